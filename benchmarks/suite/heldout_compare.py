"""Stoppers against both Bayes priors and the best floor on a held-out real-run task, paired run by run.

    python benchmarks/suite/heldout_compare.py                       # pretrained:general and :routed
    python benchmarks/suite/heldout_compare.py --policy model:PATH --task english-heldout --n-jobs 100
    python benchmarks/suite/heldout_compare.py --curves runs/trl-fresh/traces.jsonl   # other runs

Each ``--policy`` (repeatable; default ``pretrained:general`` and ``pretrained:routed``)
plays the task's test seeds at 1/2x, 1x and 2x the task's price beside Bayes with a
prior refitted on the task's train runs (``evalstop_experiments.scoring.refit_bayes``),
Bayes with the synthetic ``hard`` prior (the suite's held-out reference stoppers) and
the suite's best floor (every family tuned on the train runs, the best there kept),
through :func:`evalstop_experiments.compare_each` (each stopper plays each seed once).
``--curves`` replays another corpus in the task's place: its test runs are scored, its
train runs refit the prior, tune the floors and measure the noise.  Prints each one's
score against the CurveOracle and the difference (the stopper minus the other, in score
units) with its 95 % interval, a bootstrap over the task's test runs: ahead of the
other only where the interval excludes 0.
"""

from __future__ import annotations

import argparse
import sys
import time

from baselines.bayes import BayesStopper
from evalstop_experiments import compare_each
from evalstop_experiments.scoring import (
    VALIDATION_SEEDS,
    StopperSpec,
    best_floor,
    refit_bayes,
    stopper_spec,
    tune_floors,
)
from evalstop_gym import ConfigError
from evalstop_gym.suite import tuning_kwargs

PRICE_FACTORS = (0.5, 1.0, 2.0)


def refitted_bayes(task: str, kw: dict) -> BayesStopper:
    """Bayes with the prior refitted on ``task``'s train runs (the suite's second reference)."""
    return refit_bayes(kw)


def hard_bayes(task: str, kw: dict) -> BayesStopper:
    """Bayes with the synthetic ``hard`` prior and the corpus's measured noise (the suite's)."""
    return BayesStopper.from_env_kwargs(kw)


def tuned_best_floor(task: str, kw: dict) -> object:
    """The suite's best floor: every family tuned on the train runs, the best one's member."""
    return best_floor(tune_floors(tuning_kwargs(kw), VALIDATION_SEEDS)).policy


AGAINST = {
    "Bayes (refitted on train runs)": refitted_bayes,
    "Bayes (hard prior)": hard_bayes,
    "Best floor (tuned on train runs)": tuned_best_floor,
}


def main(argv: list[str] | None = None) -> int:
    """Compare each stopper with both priors and print the table."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", default="trl-heldout")
    p.add_argument("--seeds", type=int, default=30, help="test seeds 0..N-1 (default 30)")
    p.add_argument("--n-jobs", type=int, default=None, help="jobs per episode (default the task's)")
    p.add_argument("--policy", action="append", default=None, help="a stopper spec (repeatable)")
    p.add_argument("--curves", default=None, help="a corpus JSONL to replay (default the task's)")
    args = p.parse_args(argv)
    try:
        specs = [
            stopper_spec(s) for s in args.policy or ["pretrained:general", "pretrained:routed"]
        ]
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    corpus = f" on {args.curves}" if args.curves else ""
    print(
        f"{args.task}{corpus}, test seeds 0-{args.seeds - 1}, "
        "scores against the CurveOracle [95 % CI over runs]"
    )
    print("| stopper | against | price | stopper's score | its score | difference [95 % CI] |")
    print("|---|---|---|---|---|---|")
    t0 = time.process_time()
    try:
        rows = compare_each(
            specs,
            [StopperSpec(name, factory) for name, factory in AGAINST.items()],
            args.task,
            seeds=range(args.seeds),
            prices=PRICE_FACTORS,
            n_jobs=args.n_jobs,
            curves=args.curves,
        )
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for r in sorted(rows, key=lambda r: (r.a, r.b, r.price_factor)):
        print(
            f"| {r.a} | {r.b} | {r.price_factor:g}x | {r.score_a:.2f} | {r.score_b:.2f} "
            f"| {r.diff:+.2f} [{r.diff_lo:+.2f}, {r.diff_hi:+.2f}] |",
            flush=True,
        )
    print(f"<!-- {time.process_time() - t0:.0f} CPU-s -->", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
