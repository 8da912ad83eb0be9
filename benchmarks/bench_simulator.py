"""Simulator throughput: events per second as the cluster and the job count grow.

Prints figures; asserts nothing (speed targets live here, not in timed tests).

    python benchmarks/bench_simulator.py [--philly PATH] [--quick]

Measured: the default 64-GPU heavy-RLHF workload at growing job counts, the
same on 512 GPUs, and the replay of the Philly trace with EvalStop(k=2): all
82,247 jobs on 512 GPUs, and the busiest virtual cluster (6214e9, 41,226
jobs) on 64 GPUs.  The target is the full replay in under 60 s with events/s
roughly flat as the problem grows (O(log n) per event).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from evalstop_gym import KDeclineRule, SimConfig, Simulator

DEFAULT_PHILLY = (
    Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "philly" / "philly.csv"
)


def measure(cfg: SimConfig, seed: int = 0) -> tuple[float, float, float, dict[str, float]]:
    t0 = time.perf_counter()
    sim = Simulator(cfg, seed)
    t1 = time.perf_counter()
    m = sim.run(KDeclineRule(2))
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1, m["n_events"] / (t2 - t1), m


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--philly", default=str(DEFAULT_PHILLY.resolve()))
    ap.add_argument("--quick", action="store_true", help="skip the largest runs")
    args = ap.parse_args()

    print(
        f"{'workload':44s} {'jobs':>7s} {'build s':>8s} {'run s':>7s} {'events':>9s} {'events/s':>10s}"
    )
    sizes = (200, 2000) if args.quick else (200, 2000, 20000)
    rows = []
    for gpus in (64, 512):
        for n in sizes:
            cfg = SimConfig(num_gpus=gpus, n_jobs=n)
            rows.append((f"heavy-rlhf, {gpus} GPUs, srtf-est, EvalStop(k=2)", cfg))
    philly = Path(args.philly)
    if philly.is_file():
        rows.append(
            (
                "philly 6214e9, 64 GPUs, srtf-est, EvalStop(k=2)",
                SimConfig(trace=str(philly), trace_cluster="6214e9", num_gpus=64),
            )
        )
        if not args.quick:
            rows.append(
                (
                    "philly all, 512 GPUs, srtf-est, EvalStop(k=2)",
                    SimConfig(trace=str(philly), num_gpus=512),
                )
            )
    else:
        print(f"(Philly trace not found at {philly}: trace replays skipped)")
    measure(SimConfig(n_jobs=500))  # warm-up: imports, allocator, caches
    ref = None
    for name, cfg in rows:
        build, run, eps, m = measure(cfg)
        ref = ref or eps
        print(
            f"{name:44s} {int(m['n_jobs']):7d} {build:8.2f} {run:7.2f} "
            f"{int(m['n_events']):9d} {eps:10.0f}  ({eps / ref:.2f}x of the first row)"
        )


if __name__ == "__main__":
    main()
