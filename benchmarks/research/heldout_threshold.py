"""Is a backward model's gap on held-out real runs its stop threshold? A sweep on the train runs.

    python benchmarks/research/heldout_threshold.py                       # pretrained:general, trl-heldout
    python benchmarks/research/heldout_threshold.py --model models/m.npz --curves runs/x/traces.jsonl

A backward-induction stopper stops a job when its predicted gain of continuing is below
0.  This stops it below ``-margin`` instead, for a few margins (utility units per job),
on the held-out task's *train* runs as the suite tunes its floors on them (its
validation seeds), and prints the score of each against the Oracle there (0 = NoStop,
1 = each job stopped at its best stop value; in-sample, so an upper bound on what
tuning the margin could buy on the test runs).  If no margin is worth much, the gap
to a prior refitted on the same runs is not the threshold but what the features tell.
Nothing here reads a test run.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from baselines.backward import BackwardStopper
from evalstop_experiments.scoring import (
    VALIDATION_SEEDS,
    episode_arrays,
    job_observations,
    offline_utility,
    refit_bayes,
    utility_terms,
)
from evalstop_gym.suite import suite_task

PRICE_FACTORS = (0.5, 1.0, 2.0)
MARGINS = (-3e-3, -1e-3, -3e-4, 0.0, 3e-4, 1e-3, 3e-3, 1e-2)


def mean_utility(episodes: list, ends: list[np.ndarray]) -> float:
    """Mean over episodes of the summed utility terms of each episode's job ends."""
    return float(np.mean([utility_terms(ep.values, e).sum() for ep, e in zip(episodes, ends)]))


def main(argv: list[str] | None = None) -> int:
    """Print the sweep: one line per price, the score at each margin."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--model", default=None, help="a backward model .npz (default pretrained:general)"
    )
    p.add_argument("--task", default="trl-heldout")
    p.add_argument("--curves", default=None, help="another corpus in the task's place")
    args = p.parse_args(argv)
    t0 = time.process_time()
    corpus = {"curves": args.curves} if args.curves else {}
    test_kw, train_kw = (
        suite_task(args.task, **corpus),
        suite_task(args.task, split="train", **corpus),
    )
    for factor in PRICE_FACTORS:
        price = {"gpu_hour_price": train_kw["gpu_hour_price"] * factor}
        kw = train_kw | price
        st = (
            BackwardStopper.pretrained("general")
            if args.model is None
            else BackwardStopper(args.model)
        ).bind_task(kw)
        episodes = [episode_arrays(kw, s) for s in VALIDATION_SEEDS]
        u0 = mean_utility(
            episodes, [np.full(len(ep.values), ep.values.shape[1]) for ep in episodes]
        )
        # each job stopped at its best stop value (the Oracle's utility)
        top = float(np.mean([(ep.values.max(axis=1) - ep.values[:, 0]).sum() for ep in episodes]))
        # Bayes refitted on these train runs, played on their jobs' observations.
        bayes = refit_bayes(test_kw | price)
        ub = float(
            np.mean([offline_utility(bayes, job_observations(kw, s)) for s in VALIDATION_SEEDS])
        )
        cells = [f"Bayes refitted on these runs {(ub - u0) / (top - u0):.3f};"]
        for margin in MARGINS:
            u = mean_utility(episodes, [st.ends(ep.arrays, margin) for ep in episodes])
            cells.append(f"{margin:+.0e} {(u - u0) / (top - u0):.3f}")
        print(f"{factor:g}x  (Oracle's gain {top - u0:.2f} per episode):  " + "  ".join(cells))
    print(f"CPU {time.process_time() - t0:.0f} s; train runs, validation seeds {VALIDATION_SEEDS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
