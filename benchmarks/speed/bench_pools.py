"""Simulator events per CPU second on typed GPU pools against the homogeneous cluster.

    python benchmarks/speed/bench_pools.py [--reps 5] [--n-jobs 400] [--seeds 5]

Three contenders, interleaved (see timing.py): the homogeneous default
(``pools=None``, the untouched hot path), one reference pool
(``pools={"gpu": 64}``: the pooled engine, same events bit for bit) and
A100+H100 (32 + 32, placement ``fastest``).  One unit is one simulator event of
an episode run with EvalStop's k = 2 rule.  No target: the pooled engine's
cost is reported, the homogeneous path's speed is checked against a reference
commit by ``bench_simulator.py --ref``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from timing import interleaved, ratio

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # this checkout's package

from evalstop_gym import KDeclineRule, SimConfig, Simulator


def contender(cfg: SimConfig, seeds: int) -> Callable[[], float]:
    """Run ``seeds`` episodes of ``cfg``; return their events."""

    def run() -> float:
        return sum(Simulator(cfg, s).run(KDeclineRule(2))["n_events"] for s in range(seeds))

    return run


def main() -> None:
    """Print events/s of each contender and the ratios against the homogeneous cluster."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--n-jobs", type=int, default=400)
    ap.add_argument("--seeds", type=int, default=5)
    args = ap.parse_args()
    base = {"n_jobs": args.n_jobs}
    contenders = {
        "homogeneous": contender(SimConfig(**base), args.seeds),
        "pools gpu:64": contender(SimConfig(**base, pools={"gpu": 64}), args.seeds),
        "a100+h100 fastest": contender(
            SimConfig(**base, pools={"a100": 32, "h100": 32}, placement="fastest"), args.seeds
        ),
    }
    rates = interleaved(contenders, args.reps)
    for name in contenders:
        best, med = ratio(rates, name, "homogeneous")
        print(
            f"{name:20s} {max(rates[name]):10.0f} events/s  "
            f"vs homogeneous: best {best:5.2f} median {med:5.2f}"
        )


if __name__ == "__main__":
    main()
