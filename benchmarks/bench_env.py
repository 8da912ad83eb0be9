"""Env steps per second: EvalStop-v0 against CartPole-v1, same process, same run.

    python benchmarks/bench_env.py [--steps 100000]

Both through ``gym.make`` (with its default wrappers), resetting when an
episode ends, with two action patterns: a constant action (0) and random
actions from ``action_space.sample()``.  Target: EvalStop-v0 at >= 0.5x
CartPole's throughput.
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym

import evalstop_gym  # noqa: F401


def steps_per_second(env_id: str, steps: int, random_actions: bool, **kwargs) -> float:
    env = gym.make(env_id, **kwargs)
    env.reset(seed=0)
    env.action_space.seed(0)
    sample = env.action_space.sample
    t0 = time.perf_counter()
    for _ in range(steps):
        a = sample() if random_actions else 0
        _, _, term, trunc, _ = env.step(a)
        if term or trunc:
            env.reset()
    dt = time.perf_counter() - t0
    env.close()
    return steps / dt


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=100_000)
    args = ap.parse_args()
    steps_per_second("CartPole-v1", 2000, False)  # warm-up
    steps_per_second("EvalStop-v0", 2000, False)
    print(f"{'actions':10s} {'EvalStop-v0':>14s} {'CartPole-v1':>14s} {'ratio':>7s}")
    for random_actions in (False, True):
        a = steps_per_second("EvalStop-v0", args.steps, random_actions)
        b = steps_per_second("CartPole-v1", args.steps, random_actions)
        label = "random" if random_actions else "constant"
        print(f"{label:10s} {a:12.0f}/s {b:12.0f}/s {a / b:7.2f}")


if __name__ == "__main__":
    main()
