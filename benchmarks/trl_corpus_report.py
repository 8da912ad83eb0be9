"""Figures of docs/CURVE_TRACES.md for the TRL corpus and, beside it, a micro-RLHF corpus.

For each corpus: runs, hacking fraction (overall, per KL coefficient, per preference-data size,
per proxy width), peak positions of hacking runs, Gao-law fits (R^2, alpha, beta), eval noise,
and the early-eval AUC: a 5-fold cross-validated logistic regression that predicts the hacking
label from the evals at checkpoints with progress in (0, 0.1] and (0, 0.2] (the step-0 eval
excluded), scored by the area under the ROC curve of the out-of-fold predictions. Numpy and
SciPy only.

    python benchmarks/trl_corpus_report.py [--micro runs/curves/traces.jsonl] [--trl FILE]
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from collections.abc import Sequence

import numpy as np
from scipy.optimize import minimize
from scipy.stats import rankdata

from evalstop_gym.corpus import CurveTrace, read_traces
from evalstop_gym.corpus.generators.micro_rlhf.generate import fit_corpus, summarize
from evalstop_gym.corpus.packaged import TRL_CORPUS, corpus_path
from evalstop_gym.sim.calibration import CALIBRATIONS, Calibration
from evalstop_gym.sim.synthetic_curves import gao_shape


def auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Area under the ROC curve (Mann-Whitney, ties counted half)."""
    pos, neg = labels.sum(), (~labels).sum()
    if pos == 0 or neg == 0:
        return float("nan")
    ranks = rankdata(scores)
    return float((ranks[labels].sum() - pos * (pos + 1) / 2) / (pos * neg))


def _fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = 1.0) -> np.ndarray:
    """L2-regularised logistic regression (intercept unpenalised); returns the weights."""
    design = np.column_stack([np.ones(len(x)), x])

    def loss(w: np.ndarray) -> tuple[float, np.ndarray]:
        z = design @ w
        nll = np.sum(np.logaddexp(0.0, z) - y * z) + 0.5 * l2 * np.sum(w[1:] ** 2)
        grad = design.T @ (1.0 / (1.0 + np.exp(-z)) - y)
        grad[1:] += l2 * w[1:]
        return float(nll), grad

    return minimize(loss, np.zeros(design.shape[1]), jac=True, method="L-BFGS-B").x


def early_eval_auc(traces: Sequence[CurveTrace], max_progress: float, folds: int = 5) -> float:
    """Cross-validated AUC of the hacking label from the evals at progress in (0, max_progress].

    Every trace must have the same checkpoint progress grid (true of a generated corpus).
    Features are standardised on each training fold; folds are a seeded shuffle.
    """
    keep = [(t.step > 0) & (t.step / t.step[-1] <= max_progress + 1e-9) for t in traces]
    x = np.array([t.eval[k] for t, k in zip(traces, keep, strict=True)])
    y = np.array([bool(t.label) for t in traces])
    order = np.random.default_rng(0).permutation(len(traces))
    out = np.empty(len(traces))
    for f in range(folds):
        test = order[f::folds]
        train = np.setdiff1d(order, test)
        mu, sd = x[train].mean(axis=0), x[train].std(axis=0) + 1e-12
        w = _fit_logistic((x[train] - mu) / sd, y[train].astype(float))
        out[test] = np.column_stack([np.ones(len(test)), (x[test] - mu) / sd]) @ w
    return auc(out, y)


def by_group(traces: Sequence[CurveTrace], key: str) -> dict[object, str]:
    """Hacking fraction of the runs grouped by a ``meta`` key, as ``"k/n"`` strings."""
    groups: dict[object, list[bool]] = defaultdict(list)
    for t in traces:
        groups[t.meta.get(key)].append(bool(t.label))
    return {k: f"{sum(v)}/{len(v)}" for k, v in sorted(groups.items(), key=lambda kv: str(kv[0]))}


def report(name: str, traces: Sequence[CurveTrace], kl_key: str) -> None:
    """Print one corpus's figures."""
    rows = fit_corpus(traces)
    s = summarize(traces, rows)
    print(f"== {name}: {s['runs']} runs, {s['hacking']} hacking ({s['hacking_fraction']})")
    print(f"  hacking per KL coefficient ({kl_key}): {by_group(traces, kl_key)}")
    print(f"  hacking per preference pairs: {by_group(traces, 'n_pairs')}")
    print(f"  hacking per proxy width: {by_group(traces, 'proxy_hidden')}")
    print(f"  hacking per learning rate: {by_group(traces, 'lr')}")
    print(f"  peak progress of hacking runs (quartiles): {s['peak_progress_quartiles_hacking']}")
    for part in ("all", "hacking", "healthy"):
        print(
            f"  Gao fit {part}: R2 {s[f'r2_quartiles_{part}']} alpha {s[f'alpha_quartiles_{part}']}"
            f" beta {s[f'beta_quartiles_{part}']}"
        )
    resid = [np.std(t.eval - t.gold, ddof=1) for t in traces if t.gold is not None]
    print(f"  sd(eval - gold) per run, median: {np.median(resid):.3f}")
    repeats = [t.meta["eval_noise_sd"] for t in traces if t.meta.get("eval_noise_sd") is not None]
    if repeats:
        print(
            f"  eval sd over repeated gold evaluations, median over runs: {np.median(repeats):.3f}"
        )
    healthy_gain = [t.gold[-1] - t.gold[-4] for t in traces if t.label is False]
    if healthy_gain:
        print(
            "  healthy runs still improving over the last 3 checkpoints: "
            f"{sum(g > 0 for g in healthy_gain)}/{len(healthy_gain)}"
        )
    for p in (0.1, 0.2):
        print(
            f"  early-eval AUC (evals at progress <= {p}, step 0 excluded): {early_eval_auc(traces, p):.3f}"
        )


def synthetic_rlhf(cal: Calibration, n: int, hack_fraction: float, seed: int) -> list[CurveTrace]:
    """RLHF runs of a synthetic regime as traces: the simulator's Gao-shaped true eval plus noise.

    Mirrors the RLHF branch of :func:`evalstop_gym.sim.synthetic_curves.sample_curves` (same
    ranges and shape, observed eval = true + ``cal.eval_noise`` x N(0, 1)), checkpoints at
    progress ``i / evals_per_job``; the label is the workload's hack label.
    """
    rng = np.random.default_rng(seed)
    k = cal.evals_per_job
    p = np.arange(1, k + 1) / k
    traces = []
    for i in range(n):
        hacking = bool(rng.random() < hack_fraction)
        base, amp = rng.uniform(*cal.rlhf_base), rng.uniform(*cal.rlhf_amplitude)
        peak = rng.uniform(*(cal.hack_peak if hacking else cal.healthy_peak))
        true = base + amp * gao_shape(p / peak)
        obs = true + cal.eval_noise * rng.standard_normal(k)
        traces.append(
            CurveTrace(
                run_id=f"synthetic-{i}",
                step=np.arange(1, k + 1) * cal.steps_per_eval,
                eval=obs,
                loss=np.zeros(k),
                label=hacking,
            )
        )
    return traces


def main() -> None:
    """Print the figures of the TRL corpus and, if given, of a micro-RLHF corpus."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trl", default=None, help="a TRL corpus (default: the shipped one)")
    parser.add_argument("--micro", default=None, help="a micro-RLHF corpus (JSONL)")
    args = parser.parse_args()
    report("TRL (GRPO)", read_traces(args.trl or corpus_path(TRL_CORPUS)), "beta")
    if args.micro:
        report("micro-RLHF", read_traces(args.micro), "kl_beta")
    for name, cal in CALIBRATIONS.items():
        runs = synthetic_rlhf(cal, 2000, 0.5, seed=0)
        aucs = ", ".join(f"<= {p}: {early_eval_auc(runs, p):.3f}" for p in (0.1, 0.2))
        print(
            f"== synthetic '{name}' (2000 RLHF runs, half hacking, eval noise "
            f"{cal.eval_noise}): early-eval AUC {aucs}"
        )


if __name__ == "__main__":
    main()
