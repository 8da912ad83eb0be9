"""Figures of docs/REAL_RUNS.md for the packaged English corpus, beside the TRL corpus.

Prints the corpus's size and labels, the hacking share per trainer, per trainer and KL
coefficient and per proxy variant (each trainer's check: at least a quarter of its runs hack
and at least a quarter stay healthy), the CPU time per run (from each run's
``cpu_seconds.json`` when a generation folder is given), the eval noise the runs measured, and
the regime criterion's statistics (:func:`evalstop_gym.corpus.analysis.curve_statistics`, with
95 % bootstrap intervals over runs) of both real corpora and of the synthetic regimes.

    python benchmarks/research/english_corpus_report.py [--runs OUT/runs] [--corpus english_rlhf]
        [--side train|test]   # one side of the corpus's fixed split only
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from evalstop_experiments.regime_fit import regime_statistics, task_hack_fraction
from evalstop_gym.corpus import CurveTrace
from evalstop_gym.corpus.analysis import CRITERION_STATS, bootstrap_statistics, corpus_curves
from evalstop_gym.corpus.packaged import load_corpus
from evalstop_gym.corpus.split import select, split_runs

TRAINER_NAMES = {"grpo": "GRPO", "rloo": "RLOO", "online_dpo": "online DPO", "dpo": "online DPO"}


def groups(traces: Sequence[CurveTrace], *keys: str) -> dict[tuple, list[bool]]:
    """Hacking labels of the runs grouped by ``meta`` keys."""
    out: dict[tuple, list[bool]] = defaultdict(list)
    for t in traces:
        out[tuple(t.meta.get(k) for k in keys)].append(bool(t.label))
    return dict(sorted(out.items(), key=lambda kv: tuple(str(v) for v in kv[0])))


def label_tables(traces: Sequence[CurveTrace]) -> bool:
    """Print the hacking shares; True when every trainer has >= 1/4 hacking and >= 1/4 healthy."""
    n, h = len(traces), sum(bool(t.label) for t in traces)
    print(
        f"runs {n}, hacking {h} ({h / n:.2f}), checkpoints {sorted({len(t.step) for t in traces})}"
    )
    ok = True
    print("\n| trainer | runs | hacking | share |\n|---|---|---|---|")
    for (tr,), labs in groups(traces, "trainer").items():
        share = sum(labs) / len(labs)
        ok &= 0.25 <= share <= 0.75
        print(f"| {TRAINER_NAMES.get(tr, tr)} | {len(labs)} | {sum(labs)} | {share:.2f} |")
    print("\n| trainer | beta | runs | hacking |\n|---|---|---|---|")
    for (tr, beta), labs in groups(traces, "trainer", "beta").items():
        print(f"| {TRAINER_NAMES.get(tr, tr)} | {beta:g} | {len(labs)} | {sum(labs)} |")
    print("\n| proxy | runs | hacking |\n|---|---|---|")
    for (px,), labs in groups(traces, "proxy").items():
        print(f"| {px} | {len(labs)} | {sum(labs)} |")
    print(f"\neach trainer at least a quarter hacking and a quarter healthy: {ok}")
    return ok


def noise_table(traces: Sequence[CurveTrace]) -> None:
    """The eval and gold noise the runs measured (median over runs, gold units)."""
    for key in ("eval_noise_sd", "gold_noise_sd"):
        v = np.array([float(t.meta[key]) for t in traces if t.meta.get(key) is not None])
        if v.size:
            print(
                f"{key}: median {np.median(v):.4f} (q25 {np.quantile(v, 0.25):.4f}, "
                f"q75 {np.quantile(v, 0.75):.4f}) over {v.size} runs"
            )


def cpu_table(runs: Path) -> None:
    """CPU seconds per run from a generation folder's ``cpu_seconds.json`` files."""
    secs = []
    for f in sorted(runs.glob("*/cpu_seconds.json")):
        data = json.loads(f.read_text())
        secs.append(float(data["cpu_seconds"] if isinstance(data, dict) else data))
    if not secs:
        print(f"no cpu_seconds.json under {runs}")
        return
    s = np.array(secs)
    print(
        f"CPU per run: mean {s.mean():.1f} s, median {np.median(s):.1f} s, "
        f"min {s.min():.1f}, max {s.max():.1f}, total {s.sum() / 3600:.2f} CPU-h over {s.size} runs"
    )


def statistics_table(corpora: dict[str, Sequence[CurveTrace]], regimes: Sequence[str]) -> None:
    """The criterion's statistics of the real corpora (with 95 % CIs) and of the regimes."""
    cols: dict[str, dict[str, str]] = {}
    grid = None
    for name, traces in corpora.items():
        gold, progress = corpus_curves(traces)
        grid = progress if grid is None else grid
        ci = bootstrap_statistics(gold, progress, reps=2000, seed=0)
        cols[f"{name} ({len(traces)})"] = {
            k: f"{v:.2f} [{lo:.2f}, {hi:.2f}]" for k, (v, lo, hi) in ci.items()
        }
    assert grid is not None
    for cal in regimes:
        stats, _ = regime_statistics(cal, grid, hack_fraction=task_hack_fraction(cal))
        cols[cal] = {k: f"{v:.2f}" for k, v in stats.items()}
    print("\n| statistic | " + " | ".join(cols) + " |")
    print("|---|" + "---|" * len(cols))
    for k in CRITERION_STATS:
        print(f"| {k} | " + " | ".join(c[k] for c in cols.values()) + " |")


def main(argv: Sequence[str] | None = None) -> int:
    """Print the figures."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", default="english_rlhf", help="a packaged corpus name")
    ap.add_argument("--runs", default=None, help="the generation's OUT/runs (for CPU per run)")
    ap.add_argument("--regimes", default="hard,grounded", help="synthetic regimes beside it")
    ap.add_argument("--side", choices=("train", "test"), help="one side of the fixed split")
    args = ap.parse_args(argv)
    traces = load_corpus(args.corpus)
    if args.side:
        traces = select(traces, split_runs(traces), args.side)
    ok = label_tables(traces)
    noise_table(traces)
    if args.runs:
        cpu_table(Path(args.runs))
    statistics_table(
        {
            args.corpus + (f" {args.side}" if args.side else ""): traces,
            "trl_gao": load_corpus("trl_gao"),
        },
        [r for r in args.regimes.split(",") if r],
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
