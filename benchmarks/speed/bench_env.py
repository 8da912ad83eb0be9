"""Env steps per CPU second: EvalStop-v0 against CartPole-v1, interleaved in one run.

    python benchmarks/speed/bench_env.py [--steps 50000] [--reps 5]

Both through ``gym.make`` (with its default wrappers), resetting when an
episode ends, with two action patterns: a constant action (0) and random
actions from ``action_space.sample()``.  Targets (issue #15): EvalStop-v0 at
>= 0.8x CartPole's steps/s with the constant action and >= 0.65x with random
actions.  Timing: see benchmarks/speed/timing.py.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import gymnasium as gym
from timing import interleaved, report

import evalstop_gym  # noqa: F401

TARGETS = {"constant": 0.8, "random": 0.65}


def stepper(env_id: str, steps: int, random_actions: bool) -> Callable[[], float]:
    """A run of ``steps`` steps (resetting at episode ends) on one persistent env."""
    env = gym.make(env_id)
    env.reset(seed=0)
    env.action_space.seed(0)
    sample = env.action_space.sample

    def run() -> float:
        step, reset = env.step, env.reset
        for _ in range(steps):
            _, _, term, trunc, _ = step(sample() if random_actions else 0)
            if term or trunc:
                reset()
        return steps

    return run


def main() -> None:
    """Print the ratios for both action patterns."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=50_000)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    print(f"{'actions':34s} {'EvalStop-v0':>13s} {'CartPole-v1':>13s}")
    for label, random_actions in (("constant", False), ("random", True)):
        contenders = {
            env_id: stepper(env_id, args.steps, random_actions)
            for env_id in ("EvalStop-v0", "CartPole-v1")
        }
        for run in contenders.values():
            run()  # warm-up
        rates = interleaved(contenders, args.reps)
        print(report(label, rates, "EvalStop-v0", "CartPole-v1", TARGETS[label]))


if __name__ == "__main__":
    main()
