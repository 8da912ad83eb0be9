"""Is a backward model's gap on held-out real runs its stop threshold? A sweep on the train runs.

    python benchmarks/heldout_threshold.py                       # pretrained:general, trl-heldout
    python benchmarks/heldout_threshold.py --model models/m.npz --curves runs/x/traces.jsonl

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
from evalstop_experiments.scoring import VALIDATION_SEEDS, episode_arrays, refit_bayes
from evalstop_gym.suite import suite_task

PRICE_FACTORS = (0.5, 1.0, 2.0)
MARGINS = (-3e-3, -1e-3, -3e-4, 0.0, 3e-4, 1e-3, 3e-3, 1e-2)


def bayes_ends(bayes: object, arrays: object) -> np.ndarray:
    """(n,) where Bayes ends each job, deciding on each job's evals as it sees them in play."""
    n, k = arrays.evals.shape  # type: ignore[attr-defined]
    end = np.full(n, k)
    for j in range(n):
        t = int(arrays.job_type[j])  # type: ignore[attr-defined]
        for i in range(1, k):
            if bayes.decide(t, arrays.evals[j, :i]):  # type: ignore[attr-defined]
                end[j] = i
                break
    return end


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
    for factor in PRICE_FACTORS:
        kw = suite_task(
            args.task, split="train", **({"curves": args.curves} if args.curves else {})
        )
        kw["gpu_hour_price"] *= factor
        st = (
            BackwardStopper.pretrained("general")
            if args.model is None
            else BackwardStopper(args.model)
        ).bind_task(kw)
        episodes = [episode_arrays(kw, s) for s in VALIDATION_SEEDS]
        u0 = np.mean([ep.values[:, -1].sum() for ep in episodes])
        top = np.mean([ep.values.max(axis=1).sum() for ep in episodes])
        bayes = refit_bayes(
            suite_task(args.task, **({"curves": args.curves} if args.curves else {}))
            | {"gpu_hour_price": kw["gpu_hour_price"]}
        )
        ub = np.mean(
            [
                ep.values[np.arange(len(end)), end - 1].sum()
                for ep in episodes
                for end in [bayes_ends(bayes, ep.arrays)]
            ]
        )
        cells = [f"Bayes refitted on these runs {(ub - u0) / (top - u0):.3f};"]
        for margin in MARGINS:
            u = np.mean(
                [
                    ep.values[np.arange(len(end)), end - 1].sum()
                    for ep in episodes
                    for end in [st.ends(ep.arrays, margin)]
                ]
            )
            cells.append(f"{margin:+.0e} {(u - u0) / (top - u0):.3f}")
        print(f"{factor:g}x  (Oracle's gain {top - u0:.2f} per episode):  " + "  ".join(cells))
    print(f"CPU {time.process_time() - t0:.0f} s; train runs, validation seeds {VALIDATION_SEEDS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
