"""Early-eval AUC: how much a run's first evals say about whether it will hack.

Defined once and used everywhere (docs/CALIBRATION.md): over RLHF
runs only, a logistic regression on the observed evals at declared progress
<= ``max_progress`` (0.1, and 0.2) predicts the hack label; its area under the
ROC curve is measured by 5-fold stratified cross-validation (out-of-fold
scores pooled into one AUC).  On a simulated regime the features are the evals
of the first checkpoints (noise-free or at the task's sigma); on a corpus, the
evals recorded at 0 < step / last step <= ``max_progress`` (the step-0 eval is
excluded: it is the same model for every run).

An AUC near 0.5 means the first evals do not identify the label, so a stopper
must detect the decline itself; near 1, a "first evals look like hacking ->
stop" rule is enough.  NumPy, SciPy and the simulator (it draws the simulated
regimes), so it lives in the experiments layer, not in :mod:`evalstop_gym.corpus`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from evalstop_gym import SimConfig, Simulator
from evalstop_gym.corpus.format import CurveTrace
from evalstop_gym.sim.workloads import RLHF


def roc_auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Area under the ROC curve (Mann-Whitney U, ties count one half); NaN for one class."""
    y = np.asarray(labels, dtype=bool)
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    from scipy import stats  # here, not at import: the CLI's parser reaches this module

    ranks = stats.rankdata(np.asarray(scores, dtype=float))
    return float((ranks[y].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = 1e-2) -> np.ndarray:
    """Weights ``[bias, w...]`` of an L2-regularised logistic regression (standardised inputs).

    The small ridge keeps the fit finite when the classes are separable.
    """
    from scipy import optimize, stats

    xb = np.column_stack([np.ones(len(x)), x])
    t = np.asarray(y, dtype=float)

    def loss(w: np.ndarray) -> tuple[float, np.ndarray]:
        z = xb @ w
        nll = np.sum(np.logaddexp(0.0, z) - t * z) + 0.5 * l2 * np.sum(w[1:] ** 2)
        grad = xb.T @ (stats.logistic.cdf(z) - t)
        grad[1:] += l2 * w[1:]
        return float(nll), grad

    res = optimize.minimize(loss, np.zeros(xb.shape[1]), jac=True, method="L-BFGS-B")
    return np.asarray(res.x)


def cv_auc(x: np.ndarray, y: np.ndarray, folds: int = 5, seed: int = 0) -> float:
    """Cross-validated AUC of a logistic regression of ``y`` on ``x`` (stratified folds)."""
    x = np.asarray(x, dtype=float).reshape(len(y), -1)
    y = np.asarray(y, dtype=bool)
    rng = np.random.default_rng(seed)
    fold = np.empty(len(y), dtype=int)
    for cls in (True, False):
        idx = np.flatnonzero(y == cls)
        fold[rng.permutation(idx)] = np.arange(len(idx)) % folds
    scores = np.empty(len(y))
    for f in range(folds):
        test, train = fold == f, fold != f
        mu, sd = x[train].mean(axis=0), x[train].std(axis=0)
        sd[sd == 0] = 1.0
        w = fit_logistic((x[train] - mu) / sd, y[train])
        scores[test] = w[0] + ((x[test] - mu) / sd) @ w[1:]
    return roc_auc(scores, y)


def sim_early_features(
    calibration: str, eval_noise: float | None, seeds: Sequence[int], max_progress: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """RLHF runs' (noise-free evals, observed evals, labels) at progress <= ``max_progress``.

    Jobs are drawn by the simulator of the heavy-RLHF workload (200 jobs per seed).
    """
    cfg = SimConfig(calibration=calibration, eval_noise=eval_noise)
    true, obs, lab = [], [], []
    for s in seeds:
        sim = Simulator(cfg, int(s))
        c, b = sim.curves, sim.batch
        cols = c.progress <= max_progress + 1e-9
        rl = b.job_type == RLHF
        true.append(c.true_eval[rl][:, cols])
        obs.append(c.obs_eval[rl][:, cols])
        lab.append(b.hacking[rl])
    return np.vstack(true), np.vstack(obs), np.concatenate(lab)


def sim_early_auc(
    calibration: str,
    eval_noise: float | None,
    seeds: Sequence[int] = range(10),
    max_progress: float = 0.1,
) -> dict[str, float]:
    """Early-eval AUC of a simulated regime: ``{"noise_free": .., "observed": ..}``."""
    true, obs, lab = sim_early_features(calibration, eval_noise, seeds, max_progress)
    return {"noise_free": cv_auc(true, lab), "observed": cv_auc(obs, lab)}


def corpus_early_features(
    traces: Sequence[CurveTrace], max_progress: float, gold: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """(features, labels) of a corpus: evals at 0 < step / last <= ``max_progress``.

    Runs with a label only; every run keeps as many early evals as the run with
    the fewest (corpora made by one generator share their checkpoint steps).
    """
    rows, labels = [], []
    for t in traces:
        if t.label is None:
            continue
        values = t.gold if gold else t.eval
        if values is None:
            continue
        x = np.asarray(t.step, dtype=float) / float(t.step[-1])
        keep = (x > 0) & (x <= max_progress + 1e-9)
        rows.append(np.asarray(values, dtype=float)[keep])
        labels.append(bool(t.label))
    n = min((len(r) for r in rows), default=0)
    if n == 0:
        raise ValueError(f"no labelled run has an eval at 0 < progress <= {max_progress}")
    return np.array([r[:n] for r in rows]), np.array(labels)


def corpus_early_auc(traces: Sequence[CurveTrace], max_progress: float = 0.1) -> dict[str, float]:
    """Early-eval AUC of a corpus: ``{"observed": measured eval, "noise_free": gold}``."""
    obs, lab = corpus_early_features(traces, max_progress)
    out = {"observed": cv_auc(obs, lab)}
    if all(t.gold is not None for t in traces if t.label is not None):
        gold, lab_g = corpus_early_features(traces, max_progress, gold=True)
        out["noise_free"] = cv_auc(gold, lab_g)
    return out
