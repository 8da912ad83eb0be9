"""How much the dense utility reward tells about a run's hacking, beyond the observation.

    python benchmarks/research/dense_lookahead.py [--task hard-0.12] [--episodes 60]

NoStop plays ``--episodes`` episodes of the task (dense utility reward; seeds
5000.. for fitting, the next ones for testing).  At every decision (job j,
checkpoint i) three logistic regressions (numpy Newton steps, standardised
features, a small ridge) predict two labels: the run hacks (``label``), and
the run hacks (``label``; RLHF runs, decisions at progress <= 0.2), and a
hacking run is past its true peak (``past-peak``; hacking runs, every
decision).  Their features:

* ``obs``: the observation row (what a stopper sees);
* ``obs + past rewards``: plus the rewards of job j's earlier continues (what a
  policy conditioning on rewards sees at this decision);
* ``obs + look-ahead``: plus this decision's continue reward, computed from
  the noise-free next checkpoint (what a learner's value target sees).

Printed: the held-out AUC of each, and the gains over ``obs``.
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy.stats import rankdata

import evalstop_gym  # noqa: F401
from evalstop_gym.envs.evalstop import EvalStopEnv
from evalstop_gym.sim.workloads import RLHF
from evalstop_gym.suite import suite_task

W_REWARDS = 4  # earlier continue rewards of the job kept as features
EARLY = 0.2  # the label is predicted at decisions up to this progress (an early stop's chance)


def collect(kw: dict, seeds: range) -> tuple[np.ndarray, ...]:
    """Per decision: obs row, past rewards, this decision's reward, hack and past-peak labels."""
    env = EvalStopEnv(**kw)
    X, P, R, y_hack, y_past, early, rlhf = [], [], [], [], [], [], []
    for seed in seeds:
        obs, _ = env.reset(seed=seed)
        sim = env.sim
        history: dict[int, list[float]] = {}
        done = False
        while not done:
            jid, ckpt = sim.pending_job_id, sim.decision_checkpoint
            row = np.concatenate([obs[f] for f in env.obs_fields])
            obs, r, done, _, _ = env.step(0)
            past = history.setdefault(jid, [])
            pad = ([0.0] * W_REWARDS + past)[-W_REWARDS:]
            X.append(row)
            P.append(pad)
            R.append([r])
            hack = bool(sim.batch.hacking[jid])
            y_hack.append(hack)
            k = sim.n_ckpt
            y_past.append(hack and ckpt / k >= sim.curves.peak_progress[jid])
            early.append(ckpt / k <= EARLY)
            rlhf.append(int(sim.batch.job_type[jid]) == RLHF)
            past.append(r)
    return tuple(np.asarray(a, float) for a in (X, P, R, y_hack, y_past, early, rlhf))


def fit_predict(xtr: np.ndarray, ytr: np.ndarray, xte: np.ndarray) -> np.ndarray:
    """Ridge-regularised logistic regression by Newton's method; scores of ``xte``."""
    mu, sd = xtr.mean(0), xtr.std(0) + 1e-9
    a = np.c_[np.ones(len(xtr)), (xtr - mu) / sd]
    b = np.c_[np.ones(len(xte)), (xte - mu) / sd]
    w = np.zeros(a.shape[1])
    for _ in range(25):
        p = 1 / (1 + np.exp(-a @ w))
        g = a.T @ (p - ytr) + 1e-3 * w
        h = (a * (p * (1 - p))[:, None]).T @ a + 1e-3 * np.eye(len(w))
        w -= np.linalg.solve(h, g)
    return b @ w


def auc(score: np.ndarray, y: np.ndarray) -> float:
    """Area under the ROC curve (rank form, ties averaged)."""
    ranks = rankdata(score)
    pos = y.astype(bool)
    n1, n0 = pos.sum(), (~pos).sum()
    return float((ranks[pos].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def main() -> None:
    """Print the AUCs."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", default="hard-0.12")
    ap.add_argument("--episodes", type=int, default=60)
    args = ap.parse_args()
    kw = {**suite_task(args.task), "reward": "utility", "reward_timing": "dense"}
    half = args.episodes // 2
    train = collect(kw, range(5000, 5000 + half))
    test = collect(kw, range(5000 + half, 5000 + args.episodes))
    sets = {
        "obs": lambda d: d[0],
        "obs + past rewards": lambda d: np.c_[d[0], d[1]],
        "obs + look-ahead": lambda d: np.c_[d[0], d[1], d[2]],
    }
    print(f"{args.task}: {len(train[0])} train / {len(test[0])} test decisions")
    # label: RLHF runs, decisions at progress <= EARLY; past-peak: hacking runs, every decision.
    subsets = {
        "label": (3, lambda d: (d[6] > 0) & (d[5] > 0)),
        "past-peak": (4, lambda d: d[3] > 0),
    }
    for name, (label, where) in subsets.items():
        tr, te = where(train), where(test)
        base = None
        for feats, f in sets.items():
            a = auc(fit_predict(f(train)[tr], train[label][tr], f(test)[te]), test[label][te])
            base = a if base is None else base
            print(f"  {name:9s} AUC {feats:20s} {a:.3f}  ({a - base:+.3f})", flush=True)


if __name__ == "__main__":
    main()
