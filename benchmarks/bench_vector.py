"""Batched env steps per CPU second: native EvalStop-v0 against CartPole-v1's SyncVectorEnv.

    python benchmarks/bench_vector.py [--num-envs 16] [--steps 2000] [--reps 5]

``gym.make_vec("EvalStop-v0", num_envs=N, vectorization_mode="vector_entry_point")``
(one process, N simulators, one observation buffer) against
``gym.make_vec("CartPole-v1", num_envs=N, vectorization_mode="sync")``, both
with their default next-step autoreset, with constant (0) and random
actions.  Counted in env-steps (batch steps x N).  Target (issue #15): >= 1.5x
at N = 16.  Timing: see benchmarks/timing.py.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import gymnasium as gym
import numpy as np
from timing import interleaved, report

import evalstop_gym  # noqa: F401

TARGET = 1.5


def stepper(
    env_id: str, mode: str, n: int, steps: int, random_actions: bool
) -> Callable[[], float]:
    """A run of ``steps`` batch steps on one persistent vector env."""
    envs = gym.make_vec(env_id, num_envs=n, vectorization_mode=mode)
    envs.reset(seed=0)
    envs.action_space.seed(0)
    zeros = np.zeros(n, dtype=np.int64)

    def run() -> float:
        step, sample = envs.step, envs.action_space.sample
        for _ in range(steps):
            step(sample() if random_actions else zeros)
        return steps * n

    return run


def main() -> None:
    """Print the ratios for both action patterns."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--num-envs", type=int, default=16)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    print(f"N = {args.num_envs}: env-steps per CPU second")
    print(f"{'actions':34s} {'EvalStop native':>13s} {'CartPole sync':>13s}")
    for label, random_actions in (("constant", False), ("random", True)):
        contenders = {
            "native": stepper(
                "EvalStop-v0", "vector_entry_point", args.num_envs, args.steps, random_actions
            ),
            "cartpole": stepper("CartPole-v1", "sync", args.num_envs, args.steps, random_actions),
        }
        for run in contenders.values():
            run()  # warm-up
        rates = interleaved(contenders, args.reps)
        print(report(label, rates, "native", "cartpole", TARGET))


if __name__ == "__main__":
    main()
