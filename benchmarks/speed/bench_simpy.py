"""Events per CPU second: the engine against a SimPy model of the same cluster.

    python benchmarks/speed/bench_simpy.py [--reps 3] [--philly PATH] [--quick]

Both replay the same episode with EvalStop's k = 2 rule called at every
decision (the SimPy model is benchmarks/speed/simpy_cluster.py; it needs
``pip install -e ".[bench]"``).  Each run's event count, stops and mean JCT
are checked equal to the engine's before any time is reported.  Only running
the episode is timed (process CPU time), interleaved.  Target (issue #15):
>= 1.5x the SimPy model's events/s.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from simpy_cluster import SimPyCluster
from timing import interleaved, report

from evalstop_gym import KDeclineRule, SimConfig, Simulator

DEFAULT_PHILLY = (
    Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "philly" / "philly.csv"
).resolve()
TARGET = 1.5


def contenders(cfg: SimConfig) -> dict[str, Callable[[], float]]:
    """One run of each on a fresh copy of the episode; each returns its event count."""
    expected = Simulator(cfg, 0).run(KDeclineRule(2))

    def check(got: dict[str, float]) -> float:
        for k in ("n_events", "n_stopped", "mean_jct_h"):
            if got[k] != expected[k]:
                raise SystemExit(
                    f"the SimPy model differs from the engine on {k}: {got[k]} vs {expected[k]}"
                )
        return got["n_events"]

    def ours() -> float:
        return check(Simulator(cfg, 0).run(KDeclineRule(2)))

    def simpy_model() -> float:
        return check(SimPyCluster(Simulator(cfg, 0), KDeclineRule(2)).run())

    return {"engine": ours, "simpy": simpy_model}


def main() -> None:
    """Print the ratio per workload."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--philly", default=str(DEFAULT_PHILLY))
    ap.add_argument("--quick", action="store_true", help="heavy-RLHF only")
    args = ap.parse_args()
    rows = [("heavy-rlhf, 64 GPUs, 5000 jobs", SimConfig(n_jobs=5000))]
    philly = Path(args.philly)
    if not args.quick and philly.is_file():
        rows.append(
            ("philly 6214e9, 64 GPUs", SimConfig(trace=str(philly), trace_cluster="6214e9"))
        )
    print(f"{'workload (events per CPU second)':34s} {'engine':>13s} {'SimPy':>13s}")
    for name, cfg in rows:
        rates = interleaved(contenders(cfg), args.reps)
        print(report(name, rates, "engine", "simpy", TARGET))


if __name__ == "__main__":
    main()
