"""``curves replay`` of a 2,000-eval run by each shipped stopper: CPU and peak memory.

    python benchmarks/speed/bench_long_replay.py [--evals 2000] [--reps 3]

Writes a ``trainer_state.json`` of ``--evals`` evaluations (an eval that rises to its peak
at 40 % of the run and falls, with noise; ``tests/experiments/test_replay.py`` replays the
same log) to a temporary folder, then replays it with each
policy in a fresh process, ``--reps`` times in alternating order, and prints each one's
whole-process CPU seconds (user + system, min and median) and peak RSS (max), read from
the child's own resource usage (``os.wait4``).  The reference is EvalStop(2) in the same
rounds: every figure includes the interpreter's and the CLI's start-up, which the ratio
shows.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

POLICIES = (
    "evalstop:2",
    "bayes:hard",
    "bayes:grounded",
    "pretrained:general",
    "pretrained:routed",
    "pretrained:hard",
)


def write_log(path: Path, n: int) -> None:
    """A trainer_state.json of ``n`` evals peaking at 0.4 n, with noise of sd 0.02."""
    i = np.arange(1, n + 1)
    peak = 0.4 * n
    gold = 0.3 + 0.5 * np.minimum(i / peak, 1) - 0.4 * np.maximum(i - peak, 0) / (n - peak)
    evals = gold + 0.02 * np.random.default_rng(0).standard_normal(n)
    history = []
    for step, e in zip(10 * i, evals, strict=True):
        history += [{"step": int(step), "loss": 10.0 / step}, {"step": int(step), "eval_reward": e}]
    path.write_text(json.dumps({"global_step": int(10 * n), "log_history": history}))


def run_once(log: Path, policy: str) -> tuple[float, float]:
    """(CPU seconds, peak RSS in MB) of one replay in a fresh process."""
    cmd = [sys.executable, "-m", "evalstop_cli.main", "curves", "replay", str(log)]
    proc = subprocess.Popen([*cmd, "--policy", policy], stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"bench_long_replay.py: --policy {policy} exited with {status}")
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def main() -> None:
    """Replay the log with every policy and print the figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--evals", type=int, default=2000)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    if args.evals < 10 or args.reps < 1:
        ap.error(f"--evals {args.evals} --reps {args.reps}: evals >= 10, reps >= 1")
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "trainer_state.json"
        write_log(log, args.evals)
        runs: dict[str, list[tuple[float, float]]] = {p: [] for p in POLICIES}
        order = list(POLICIES)
        for _ in range(args.reps):
            for p in order:
                runs[p].append(run_once(log, p))
            order.reverse()
    ref = statistics.median(c for c, _ in runs["evalstop:2"])
    print(f"curves replay of a {args.evals}-eval trainer_state.json, {args.reps} rounds")
    print(
        f"{'policy':20s} {'CPU s min':>9s} {'median':>7s} {'x EvalStop(2)':>13s} {'peak RSS':>9s}"
    )
    for p, r in runs.items():
        cpu = [c for c, _ in r]
        med = statistics.median(cpu)
        rss = max(m for _, m in r)
        print(f"{p:20s} {min(cpu):9.2f} {med:7.2f} {med / ref:13.2f} {rss:6.0f} MB")


if __name__ == "__main__":
    main()
