"""Simulator events per CPU second: this engine against a reference commit, and per-event cost.

    python benchmarks/speed/bench_simulator.py [--ref 1524925] [--reps 3] [--philly PATH] [--quick]

Each measurement runs in a fresh subprocess (so both engines, which share a
package name, can be timed in one run): one episode with EvalStop's k = 2
rule, timed by that process's CPU time around ``Simulator.run`` only
(building the episode is reported apart).  The reference engine is a
``git worktree`` of ``--ref`` (the commit before issue #15's speed work),
created under the system temp directory on first use.  Runs alternate
reference / current, ``--reps`` times; ratios are of the best runs and the
median of the per-round ratios.

Targets (issue #15): >= 1.5x the reference's events/s on the 64-GPU
heavy-RLHF workload and on the full Philly trace at 512 GPUs; cost per event
within +-15 % from 64 to 2,048 GPUs on the Philly trace replicated 1x, 2x, 4x
(the copies are built here, in the temp directory, never in the repository).
Beside each size's cost per event it prints the event mix (arrivals, decisions,
starts and preemptions per event), which is what grows with the cluster.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_PHILLY = (ROOT / ".." / "shared" / "data" / "philly" / "philly.csv").resolve()

CHILD = r"""
import json, sys, time
from evalstop_gym import KDeclineRule, SimConfig, Simulator
cfg = SimConfig(**json.loads(sys.argv[1]))
t0 = time.process_time()
sim = Simulator(cfg, 0)
t1 = time.process_time()
m = sim.run(KDeclineRule(2))
t2 = time.process_time()
cm = getattr(sim, "cluster_metrics", None)  # the event mix, after the timing (newer engines)
print(json.dumps({"build": t1 - t0, "run": t2 - t1, "events": m["n_events"],
                  "jct": m["mean_jct_h"], "stopped": m["n_stopped"], "jobs": len(sim.jobs),
                  "decisions": m.get("n_decisions"),
                  "preemptions": None if cm is None else cm()["preemptions"]}))
"""


def reference_tree(ref: str) -> Path:
    """A git worktree of ``ref`` in the temp directory (created once, then reused)."""
    path = Path(tempfile.gettempdir()) / f"evalstop-ref-{ref}"
    if not (path / "evalstop_gym").is_dir():
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(path), ref],
            check=True,
            capture_output=True,
        )
    return path


def measure(tree: Path, cfg: dict) -> dict:
    """One episode in a subprocess importing evalstop_gym from ``tree``."""
    return run_in_tree(tree, CHILD, json.dumps(cfg))


def run_in_tree(tree: Path, code: str, *args: str) -> dict:
    """Run ``code`` in a subprocess importing evalstop_gym from ``tree``; its last line as JSON."""
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": "1"}
    out = subprocess.run(
        [sys.executable, "-c", code, *args],
        env=env,
        cwd=tree,
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def replicate(trace: Path, copies: int) -> Path:
    """The trace with every job ``copies`` times, written to the temp directory."""
    out = Path(tempfile.gettempdir()) / f"evalstop-philly-x{copies}.csv"
    if out.is_file() and out.stat().st_mtime >= trace.stat().st_mtime:
        return out
    with trace.open(newline="") as f:
        header, *rows = list(csv.reader(f))
    with out.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        for _ in range(copies):
            w.writerows(rows)
    return out


def compare(name: str, cfg: dict, ref: Path, reps: int, target: float) -> None:
    """Alternate reference and current runs; print events/s and the ratios."""
    cur_rates, ref_rates = [], []
    for _ in range(reps):
        r = measure(ref, cfg)
        c = measure(ROOT, cfg)
        if (r["events"], r["jct"], r["stopped"]) != (c["events"], c["jct"], c["stopped"]):
            raise SystemExit(f"{name}: results differ from the reference: {r} vs {c}")
        ref_rates.append(r["events"] / r["run"])
        cur_rates.append(c["events"] / c["run"])
    best = max(cur_rates) / max(ref_rates)
    med = statistics.median(a / b for a, b in zip(cur_rates, ref_rates))
    ok = "met" if min(best, med) >= target else "NOT met"
    print(
        f"{name:40s} {int(c['events']):9d} ev  ref {max(ref_rates):9.0f}/s  now "
        f"{max(cur_rates):9.0f}/s  ratio best {best:4.2f} median {med:4.2f} "
        f"(target >= {target}: {ok})"
    )


#: (label, GPUs, trace copies, virtual cluster): the busiest cluster on 64 GPUs,
#: then the whole trace on 512 GPUs, twice it on 1,024 and four times on 2,048.
SIZES = (
    ("cluster 6214e9", 64, 1, "6214e9"),
    ("all jobs", 512, 1, None),
    ("all jobs x2", 1024, 2, None),
    ("all jobs x4", 2048, 4, None),
)


def flatness(philly: Path, reps: int) -> None:
    """Cost per event of the current engine as the Philly replay grows."""
    costs = []
    for label, gpus, copies, cluster in SIZES:
        trace = philly if copies == 1 else replicate(philly, copies)
        cfg = {"trace": str(trace), "num_gpus": gpus, "trace_cluster": cluster}
        runs = [measure(ROOT, cfg) for _ in range(reps)]
        us = min(r["run"] / r["events"] for r in runs) * 1e6
        costs.append(us)
        print(
            f"  {label:16s} {gpus:5d} GPUs: {int(runs[0]['events']):9d} events, {us:5.2f} us/event"
            f"  | {event_mix(runs[0], us)}"
        )
    spread = max(costs) / min(costs) - 1
    ok = "met" if spread <= 0.15 else "NOT met"
    print(f"  cost per event spread {spread:+.1%} (target within 15 %: {ok})")


def event_mix(run: dict, us: float) -> str:
    """What an event stands for at this size: the events and the scheduling work they bring.

    Beside the figure, not instead of it: arrivals and checkpoints are the
    events, a job starts once plus once per preemption, and a bigger, busier
    cluster starts and preempts more per event.  The last figure spreads the
    run's time over events, starts and preemptions together.
    """
    events, jobs, preempt = run["events"], run["jobs"], run["preemptions"]
    starts = jobs + preempt  # every job starts once, and again after each preemption
    actions = events + starts + preempt
    return (
        f"per event: {jobs / events:.3f} arrivals, {run['decisions'] / events:.3f} decisions, "
        f"{starts / events:.3f} starts, {preempt / events:.3f} preemptions; "
        f"{us * events / actions:4.2f} us per event+start+preemption"
    )


def main() -> None:
    """Print every comparison."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ref", default="1524925")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--philly", default=str(DEFAULT_PHILLY))
    ap.add_argument("--quick", action="store_true", help="skip the Philly runs")
    args = ap.parse_args()
    ref = reference_tree(args.ref)
    compare("heavy-rlhf, 64 GPUs, 2000 jobs", {"n_jobs": 2000}, ref, args.reps, 1.5)
    philly = Path(args.philly)
    if args.quick or not philly.is_file():
        print(f"(Philly runs skipped: {'--quick' if args.quick else f'no trace at {philly}'})")
        return
    compare(
        "philly, all jobs, 512 GPUs", {"trace": str(philly), "num_gpus": 512}, ref, args.reps, 1.5
    )
    print("per-event cost of the current engine, Philly replay (64 -> 2,048 GPUs):")
    flatness(philly, max(1, args.reps - 1))


if __name__ == "__main__":
    main()
