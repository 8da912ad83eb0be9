"""The grounded task's suite, measured once: what `benchmark --suite --tasks TASK` plays, plus
Bayes minus every floor with a paired interval over seeds.

    python benchmarks/suite/grounded_suite.py                  # grounded-0.05, 30 test seeds
    python benchmarks/suite/grounded_suite.py --task english-heldout --n-jobs 100
    python benchmarks/suite/grounded_suite.py --policy pretrained:routed   # a stopper beside them

Prints the suite table (every floor family tuned on the validation seeds, EvalStop,
CUSUM, Bayes, CurveOracle, Oracle, at 1/2x, 1x and 2x the task's price), the
CI-coverage check, the best floor family per price, Bayes minus each floor (score
units: the difference of their gains over NoStop divided by the reference's, 95 %
paired bootstrap CI over seeds) and where each stopper stops at each price (its
recall after the peak, its stops before the peak, its healthy RLHF stops); ``--policy
SPEC`` (repeatable) scores more stoppers beside the suite's; writes E8.csv and E8.md
to --out.
"""

from __future__ import annotations

import argparse
import resource
import sys

import numpy as np

from evalstop_experiments.experiments.suite import (
    notes,
    refuse_finished_table,
    run_e8,
    write_e8,
)
from evalstop_experiments.scoring import (
    BAYES,
    BEST_FLOOR,
    FLOOR_KINDS,
    ScoreRow,
    markdown_table,
    paired_diff_ci,
    stopper_spec,
)
from evalstop_gym.errors import ConfigError
from evalstop_gym.suite import PRICE_FACTORS


def bayes_minus_floors(rows: list[ScoreRow]) -> list[str]:
    """Lines "price, floor, Bayes - floor [CI]" in score units, for every tuned floor family."""
    out = []
    for f in PRICE_FACTORS:
        at = [r for r in rows if r.price_factor == f]
        bayes = next((r for r in at if r.stopper_kind == BAYES), None)
        if bayes is None:  # a held-out task: no single Bayes reference
            continue
        u_b, u0, uref = (np.array(c) for c in zip(*bayes.per_seed))
        den = float(np.mean(uref - u0))
        for r in at:
            if r.stopper_kind not in (*FLOOR_KINDS, BEST_FLOOR):
                continue
            u_f = np.array([s[0] for s in r.per_seed])
            d, lo, hi = paired_diff_ci(u_b / den, u_f / den)
            verdict = "Bayes above" if lo > 0 else ("floor above" if hi < 0 else "not separated")
            out.append(f"{f:g}x  {r.stopper:40s} {d:+.2f} [{lo:+.2f}, {hi:+.2f}]  {verdict}")
    return out


def where_floors_stop(rows: list[ScoreRow], factor: float = 1.0) -> list[str]:
    """Lines "stopper, recall after peak, stops before peak, healthy RLHF stops" at ``factor``."""
    out = [f"{'stopper @ ' + format(factor, 'g') + 'x':44s} after-peak  before-peak  fpr_rlhf"]
    for r in rows:
        if r.price_factor != factor:
            continue
        m = r.metrics
        out.append(
            f"{r.stopper:44s} {m.get('recall_after_peak', np.nan):10.2f} "
            f"{m.get('stops_before_peak_frac', np.nan):12.2f} {m.get('fpr_rlhf', np.nan):9.2f}"
        )
    return out


def _cpu() -> float:
    """CPU seconds of this process and its finished children."""
    own, kids = (resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def main(argv: list[str] | None = None) -> int:
    """Run the task's suite once and print its tables."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", default="grounded-0.05")
    p.add_argument("--seeds", type=int, default=30, help="test seeds 0..N-1 (default 30)")
    p.add_argument("--n-jobs", type=int, default=None, help="jobs per episode (default the task's)")
    p.add_argument("--out", default="grounded_suite", help="folder of E8.csv and E8.md")
    p.add_argument(
        "--policy",
        action="append",
        default=[],
        help="a stopper to score beside the suite's (repeatable): pretrained:NAME, model:PATH, "
        "module:Class or file.py:Class",
    )
    args = p.parse_args(argv)
    try:
        # A finished table is never overwritten; a bad spec fails before any episode.
        refuse_finished_table(args.out)
        if args.seeds < 1:
            raise ConfigError("seeds", args.seeds, "an integer >= 1")
        extra = [stopper_spec(s) for s in args.policy]
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    t0 = _cpu()
    rows = run_e8(
        [args.task], range(args.seeds), n_jobs=args.n_jobs, progress=print, extra_stoppers=extra
    )
    cpu = _cpu() - t0
    print(markdown_table([r.as_dict() for r in rows]))
    print(notes(rows))
    for f in PRICE_FACTORS:
        best = next(r for r in rows if r.price_factor == f and r.stopper_kind == BEST_FLOOR)
        print(
            f"best floor @ {f:g}x: {best.stopper} {best.score:.2f} [{best.score_lo:.2f}, {best.score_hi:.2f}]"
        )
    print("\nBayes minus each floor (score units, paired 95 % CI over seeds):")
    print("\n".join(bayes_minus_floors(rows)))
    for f in PRICE_FACTORS:
        print()
        print("\n".join(where_floors_stop(rows, f)))
    for path in write_e8(args.out, rows):
        print(f"wrote {path}")
    print(f"CPU {cpu:.0f} s (this process and its workers)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
