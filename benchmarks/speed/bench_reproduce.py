"""``reproduce --quick`` against its time budget (issue 15), per experiment, wall and CPU.

Runs ``python -m evalstop_cli.main reproduce --quick`` into a temporary folder
(its output piped, so it also shows the plain progress lines as they come, each
prefixed with the seconds since the start), then prints every experiment's wall
and CPU seconds from ``OUT/timings.json`` and the whole run's, against the targets:

- E1-E5 (their episodes) <= 30 s of wall;
- the whole ``--quick`` <= 120 s of wall, whatever experiments others add (E9's quick
  variant is asked to stay <= 20 s);

The machine is shared: wall time moves with other people's load, CPU time much
less, so the script prints both, the one-minute load average before and after,
and the wall the run's CPU time needs at the least on this machine's cores
(CPU / cores: what a quiet machine could reach with perfect overlap).

    python benchmarks/speed/bench_reproduce.py [--workers 2] [--out DIR] [-- extra reproduce flags]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from timing import children_cpu

#: Wall-seconds targets of issue 15 (``reproduce --quick`` on this machine).
TARGETS = {"E1-E5": 30.0, "whole": 120.0, "E9": 20.0}
SCRIPTED = ("E1", "E2", "E3", "E4", "E5")


def run_quick(out: Path, workers: int | None, extra: list[str]) -> tuple[float, float]:
    """Run ``reproduce --quick`` into ``out``, echoing its lines; its wall and CPU seconds."""
    cmd = [sys.executable, "-m", "evalstop_cli.main", "reproduce", "--quick", "--out", str(out)]
    cmd += (["--workers", str(workers)] if workers else []) + extra
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE"):  # piped: plain lines, as a log would get
        env.pop(name, None)
    t0, cpu0 = time.perf_counter(), children_cpu()
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            print(f"  {time.perf_counter() - t0:6.1f} s | {line.rstrip()}", flush=True)
    if proc.returncode:
        raise SystemExit(f"reproduce --quick failed with exit code {proc.returncode}")
    return time.perf_counter() - t0, children_cpu() - cpu0


def verdict(value: float, target: float) -> str:
    """``met`` or ``NOT met`` against a wall-seconds target."""
    return f"target <= {target:.0f} s: {'met' if value <= target else 'NOT met'}"


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the table; return 0."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=None, help="reproduce --workers")
    ap.add_argument("--out", default=None, help="output folder (default: a temporary one)")
    ap.add_argument("extra", nargs="*", help="more reproduce flags (after --)")
    args = ap.parse_args(argv)
    load0 = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(args.out) if args.out else Path(tmp) / "quick"
        wall, cpu = run_quick(out, args.workers, args.extra)
        data = json.loads((out / "timings.json").read_text(encoding="utf-8"))
    load1 = os.getloadavg()
    cores = os.cpu_count() or 1
    exps = {t["experiment"]: t for t in data["experiments"]}
    print(f"\n{'experiment':12s} {'wall s':>8s} {'CPU s':>8s}  episodes  stage work")
    for name, t in exps.items():
        parts = ", ".join(f"{k} {v:.1f} s" for k, v in t["parts"].items())
        beside = " (beside the others)" if t.get("background") else ""
        print(f"{name:12s} {t['wall_s']:8.1f} {t['cpu_s']:8.1f}  {t['ran']:8d}  {parts}{beside}")
    scripted = [exps[e] for e in SCRIPTED if e in exps]
    e15_wall = sum(t["wall_s"] for t in scripted)
    e15_cpu = sum(t["cpu_s"] for t in scripted)
    print(
        f"\nE1-E5 episodes: {e15_wall:.1f} s wall, {e15_cpu:.1f} s CPU  "
        f"({verdict(e15_wall, TARGETS['E1-E5'])})"
    )
    if "E9" in exps:
        e9 = exps["E9"]["wall_s"]
        print(
            f"E9: {e9:.1f} s wall, {exps['E9']['cpu_s']:.1f} s CPU  ({verdict(e9, TARGETS['E9'])})"
        )
    print(
        f"whole --quick: {wall:.1f} s wall, {cpu:.1f} s CPU (all processes)  "
        f"({verdict(wall, TARGETS['whole'])})"
    )
    print(
        f"CPU / {cores} cores = {cpu / cores:.1f} s: the least wall this CPU time needs here "
        f"({verdict(cpu / cores, TARGETS['whole'])} on a quiet machine with perfect overlap)"
    )
    print(
        f"load average (1, 5, 15 min) before: {', '.join(f'{v:.1f}' for v in load0)}; "
        f"after: {', '.join(f'{v:.1f}' for v in load1)}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
