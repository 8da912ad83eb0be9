"""An episode's fixed cost (reset and end-of-episode metrics): this code against a reference commit.

    python benchmarks/speed/bench_reset.py [--ref e0ed0e9] [--reps 5] [--resets 400] [--steps 3000]

Two settings, each in a fresh subprocess per run (both trees share a package
name), runs alternating reference / current then current / reference:

* ``tight``: one ``EvalStop-v0`` env reset ``--resets`` times in a loop
  (``env.reset()``), then the metrics of a finished episode computed as many
  times (``env.episode_metrics()``), each timed by the process's CPU time.
* ``vec``: the native vector env, N = 16, random actions, ``--steps`` batch
  steps; the CPU time spent inside its resets (``EpisodeCore.reset_row``; before it,
  ``EvalStopEnv._reset_row``) and end-of-episode metrics (``info_metrics``) is summed by a timer around each
  call (the same wrapper in both trees), beside the whole run's env-steps/s.

Prints microseconds per reset and per metrics call (best run) and the ratio
reference / current (best runs, and the median of the per-round ratios; > 1
means the current code is cheaper).  The rewards and the last observations
must be the same in both trees, or the script stops.  The reference tree is a
``git worktree`` of ``--ref`` under the temp directory (see bench_simulator.py).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from bench_simulator import ROOT, reference_tree, run_in_tree
from timing import alternating, ratio

CHILD = r"""
import json, sys, time, zlib
import numpy as np
import gymnasium as gym
import evalstop_gym
from evalstop_gym.envs.evalstop import EvalStopEnv
mode, n = sys.argv[1], int(sys.argv[2])
pt = time.process_time
if mode == "tight":
    env = EvalStopEnv()
    env.reset(seed=0)
    for _ in range(20):
        env.reset()
    t0 = pt()
    for _ in range(n):
        obs, _ = env.reset()
    reset = (pt() - t0) / n
    while not env.step(0)[2]:
        pass
    env.episode_metrics()
    t0 = pt()
    for _ in range(n):
        m = env.episode_metrics()
    metrics = (pt() - t0) / n
    check = [float(obs["evals"].sum()), m["return"], m["mean_jct_h"]]
    print(json.dumps({"reset": reset, "metrics": metrics, "check": check}))
else:
    # The episode core (envs/core.py) where the tree has one; before it, the env's privates.
    try:
        from evalstop_gym.envs.core import EpisodeCore as owner
        names = ("reset_row", "info_metrics")
    except ImportError:
        owner, names = EvalStopEnv, ("_reset_row", "_info_metrics")
    spent = {name: [0.0, 0] for name in names}
    for name, acc in spent.items():
        def timed(self, *args, _f=getattr(owner, name), _acc=acc):
            t0 = pt()
            out = _f(self, *args)
            _acc[0] += pt() - t0
            _acc[1] += 1
            return out
        setattr(owner, name, timed)
    envs = gym.make_vec("EvalStop-v0", num_envs=16, vectorization_mode="vector_entry_point")
    envs.reset(seed=0)
    envs.action_space.seed(0)
    for _ in range(300):
        envs.step(envs.action_space.sample())
    for acc in spent.values():
        acc[:] = [0.0, 0]
    total = 0.0
    t0 = pt()
    for _ in range(n):
        obs, rew, *_ = envs.step(envs.action_space.sample())
        total += float(rew.sum())
    run = pt() - t0
    (r, nr), (m, nm) = spent.values()
    check = [total, zlib.crc32(np.ascontiguousarray(obs["evals"]).tobytes())]
    print(json.dumps({"reset": r / nr, "metrics": m / nm, "rate": 16 * n / run,
                      "resets": nr, "check": check}))
"""


def measure(tree: Path, mode: str, n: int) -> dict:
    """One run of ``mode`` in a subprocess importing evalstop_gym from ``tree``."""
    return run_in_tree(tree, CHILD, mode, str(n))


def compare(mode: str, n: int, ref: Path, reps: int) -> None:
    """Alternate the trees' runs (A B, then B A); print costs and ratios reference / current."""
    runs = alternating(
        {"ref": lambda: measure(ref, mode, n), "cur": lambda: measure(ROOT, mode, n)}, reps
    )
    checks = {json.dumps(r["check"]) for r in runs["ref"] + runs["cur"]}
    if len(checks) != 1:
        raise SystemExit(f"{mode}: results differ between the trees: {sorted(checks)}")
    keys = ["reset", "metrics"] + (["rate"] if mode == "vec" else [])
    for key in keys:
        ref_v = [r[key] for r in runs["ref"]]
        cur_v = [r[key] for r in runs["cur"]]
        if key == "rate":  # env-steps per CPU second: higher is better
            rates = {"ref": ref_v, "cur": cur_v}
            shown = f"ref {max(ref_v):9.0f}/s   now {max(cur_v):9.0f}/s"
        else:  # CPU seconds per call: lower is better, so compare calls per second
            rates = {"ref": [1 / v for v in ref_v], "cur": [1 / v for v in cur_v]}
            shown = f"ref {min(ref_v) * 1e6:7.1f} us   now {min(cur_v) * 1e6:7.1f} us"
        best, med = ratio(rates, "cur", "ref")
        print(f"{mode:6s} {key:8s} {shown}   ratio best {best:4.2f} median {med:4.2f}")


def main() -> None:
    """Print the tight-loop and vector-env figures against the reference."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ref", default="e0ed0e9")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--resets", type=int, default=400)
    ap.add_argument("--steps", type=int, default=3000)
    args = ap.parse_args()
    ref = reference_tree(args.ref)
    print(f"reference {args.ref} ({ref}); load average {os.getloadavg()[0]:.1f}")
    compare("tight", args.resets, ref, args.reps)
    compare("vec", args.steps, ref, args.reps)
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
