"""The engine's cost per unit of work from 1,024 to 16,384 synthetic GPUs.

    python benchmarks/speed/bench_scaling.py [--reps 3] [--jobs-per-gpu 2.0] [--load 1.2]

One unit of work is one event, one start or one preemption: a bigger, busier cluster
starts and preempts more per event (each start and preemption is a scheduling action
of its own), so the cost per event grows with the cluster even where the cost of each
kind of work does not.  Each size runs one synthetic episode (``jobs-per-gpu`` jobs
per GPU at ``load``, EvalStop's k = 2 rule), timed by process CPU around
``Simulator.run``; a smaller size runs its episode (a fresh simulator, the same seed)
``largest // size`` times per round and is timed over all of them, so that every size
is timed over about the same CPU (a 1,024-GPU episode alone takes ~0.1 s, where the
scheduler's noise is a large part of a ratio).  Sizes alternate in order (small to
large, then large to small) ``--reps`` times.  Printed per size: events, starts and preemptions per event, and
microseconds per unit of work; then the ratio of the largest size's cost per unit to
the smallest's (best runs and median of the per-round ratios).
Target: <= 1.2x from 1,024 to 16,384 GPUs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # this checkout's package

from evalstop_gym import KDeclineRule, SimConfig, Simulator

SIZES = (1024, 4096, 16384)
TARGET = 1.2


def measure(gpus: int, jobs_per_gpu: float, load: float, times: int = 1) -> dict[str, float]:
    """One episode on ``gpus`` GPUs run ``times`` times: CPU seconds of the runs, work by kind."""
    cfg = SimConfig(num_gpus=gpus, n_jobs=max(1, round(gpus * jobs_per_gpu)), load=load)
    seconds = 0.0
    for _ in range(times):
        sim = Simulator(cfg, 0)
        t0 = time.process_time()
        m = sim.run(KDeclineRule(2))
        seconds += time.process_time() - t0
    preempt = sim.cluster_metrics()["preemptions"]
    starts = cfg.n_jobs + preempt  # every job starts once, and again after each preemption
    events = m["n_events"]
    return {
        "seconds": seconds / times,
        "events": events,
        "starts": starts,
        "preemptions": preempt,
        "units": events + starts + preempt,
    }


def main() -> None:
    """Print the cost per unit of work at each size and the largest/smallest ratio."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--jobs-per-gpu", type=float, default=2.0)
    ap.add_argument("--load", type=float, default=1.2)
    ap.add_argument("--sizes", type=lambda s: tuple(int(x) for x in s.split(",")), default=SIZES)
    args = ap.parse_args()
    runs: dict[int, list[dict[str, float]]] = {g: [] for g in args.sizes}
    order = list(args.sizes)
    for _ in range(args.reps):
        for g in order:
            times = max(1, max(args.sizes) // g)
            runs[g].append(measure(g, args.jobs_per_gpu, args.load, times))
        order.reverse()
    print(
        f"synthetic workload, {args.jobs_per_gpu:g} jobs per GPU, load {args.load:g}, "
        f"{args.reps} alternating reps (process CPU time of Simulator.run; a smaller size "
        "timed over largest/size runs of its episode)"
    )
    cost = {g: [r["seconds"] / r["units"] * 1e6 for r in rs] for g, rs in runs.items()}
    for g, rs in runs.items():
        r = rs[0]
        print(
            f"{g:6d} GPUs: {r['events']:9.0f} events; per event {r['starts'] / r['events']:.3f} "
            f"starts, {r['preemptions'] / r['events']:.3f} preemptions; "
            f"{min(cost[g]):.2f} us per unit of work (best), "
            f"{min(r['seconds'] / r['events'] for r in rs) * 1e6:.2f} us per event"
        )
    lo, hi = args.sizes[0], args.sizes[-1]
    best = min(cost[hi]) / min(cost[lo])
    med = statistics.median(a / b for a, b in zip(cost[hi], cost[lo]))
    ok = "met" if max(best, med) <= TARGET else "NOT met"
    print(
        f"cost per unit of work, {hi} vs {lo} GPUs: ratio best {best:.2f} median {med:.2f} "
        f"(target <= {TARGET:.2f}: {ok})"
    )


if __name__ == "__main__":
    main()
