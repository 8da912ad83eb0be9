"""Figures of docs/CURVE_TRACES.md for the TRL corpus and, beside it, a micro-RLHF corpus.

For each corpus: runs, hacking fraction (overall, per KL coefficient, per preference-data size,
per proxy width), peak positions of hacking runs, Gao-law fits (R^2, alpha, beta), eval noise,
and the early-eval AUC at progress <= 0.1 and <= 0.2, by the project's single definition
(:mod:`evalstop_experiments.early_auc`: a 5-fold stratified cross-validated logistic regression
of the hacking label on the early evals, the step-0 eval excluded; on the synthetic regimes the
simulator's RLHF runs at the calibration's eval noise). Numpy and SciPy only.

    python benchmarks/research/trl_corpus_report.py [--micro runs/curves/traces.jsonl] [--trl FILE]
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from evalstop_corpora.micro_rlhf.generate import fit_corpus, summarize
from evalstop_experiments.early_auc import corpus_early_auc, sim_early_auc
from evalstop_gym.corpus import CurveTrace, read_traces
from evalstop_gym.corpus.packaged import TRL_CORPUS, corpus_path
from evalstop_gym.sim.calibration import CALIBRATIONS


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
        auc = corpus_early_auc(traces, p)
        print(
            f"  early-eval AUC (evals at progress <= {p}, step 0 excluded): observed "
            f"{auc['observed']:.3f}, gold {auc.get('noise_free', float('nan')):.3f}"
        )


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
        aucs = ", ".join(
            f"<= {p}: {sim_early_auc(name, None, max_progress=p)['observed']:.3f}"
            for p in (0.1, 0.2)
        )
        print(
            f"== synthetic '{name}' (RLHF runs of 10 heavy-RLHF episodes, eval noise "
            f"{cal.eval_noise}): early-eval AUC {aucs}"
        )


if __name__ == "__main__":
    main()
