"""Batched env steps per CPU second: native EvalStop-v0 against CartPole-v1's SyncVectorEnv.

    python benchmarks/speed/bench_vector.py [--num-envs 16] [--steps 2000] [--reps 7]
    valgrind --tool=cachegrind --cache-sim=no python benchmarks/speed/bench_vector.py \
        --play native --actions constant --steps 600    # then again with --steps 0

``gym.make_vec("EvalStop-v0", num_envs=N, vectorization_mode="vector_entry_point")``
(one process, N simulators, one observation buffer) against
``gym.make_vec("CartPole-v1", num_envs=N, vectorization_mode="sync")``, both
with their default next-step autoreset, with constant (0) and random
actions.  Counted in env-steps (batch steps x N).  Targets: >= 1.5x with
constant actions at N = 16, >= 1.0x with random actions at N = 64 and more;
the other rows print without one.  Timing: see benchmarks/speed/timing.py.

Beside each native row, where its CPU goes: the share spent in the garbage
collector (``gc.callbacks``, process CPU between a collection's start and
stop) and in episode ends and resets (the sub-environments'
``info_metrics``, and ``reset_sim`` and ``tabulate`` (``reset_row`` without
the shared rows), timed by a wrapper around each call: the simulator's
construction is most of a reset).

``--play native|cartpole`` only plays ``--steps`` batch steps of one of them
(``--actions constant|random``), untimed: run under cachegrind, the
difference between ``--steps S`` and ``--steps 0`` over S x N is the
instructions per env-step, a count that does not move with the machine's load.
``--play native-core`` and ``--play native-engine`` play the native env's
episodes with constant actions through its cores' ``step_key`` alone, and
through the simulators' ``decide`` and ``next_decision`` alone: the
differences split a step between the batch, the core and the simulator.
"""

from __future__ import annotations

import argparse
import gc
import time
from collections.abc import Callable

import gymnasium as gym
import numpy as np
from timing import interleaved, report

import evalstop_gym  # noqa: F401

#: The contenders: (env id, vectorization mode).
ENVS = {"native": ("EvalStop-v0", "vector_entry_point"), "cartpole": ("CartPole-v1", "sync")}


def target(n: int, random_actions: bool) -> float | None:
    """The row's target ratio, if it has one."""
    if n == 16 and not random_actions:
        return 1.5
    if n >= 64 and random_actions:
        return 1.0
    return None


class Shares:
    """Process CPU inside the collector and inside episode ends and resets, while counting."""

    def __init__(self) -> None:
        """Nothing counted yet."""
        self.gc = self.episodes = 0.0
        self._t0 = 0.0
        self.counting = False

    def on_gc(self, phase: str, info: dict) -> None:
        """``gc.callbacks`` hook: add a collection's CPU time."""
        if not self.counting:
            return
        if phase == "start":
            self._t0 = time.process_time()
        else:
            self.gc += time.process_time() - self._t0

    def timed(self, fn: Callable) -> Callable:
        """``fn`` with its CPU time added to the episodes' share."""

        def wrapper(*args: object) -> object:
            t0 = time.process_time()
            try:
                return fn(*args)
            finally:
                self.episodes += time.process_time() - t0

        return wrapper


def stepper(
    env_id: str, mode: str, n: int, steps: int, random_actions: bool, shares: Shares | None = None
) -> Callable[[], float]:
    """A run of ``steps`` batch steps on one persistent vector env."""
    envs = gym.make_vec(env_id, num_envs=n, vectorization_mode=mode)
    envs.reset(seed=0)
    envs.action_space.seed(0)
    zeros = np.zeros(n, dtype=np.int64)
    if shares is not None:
        for core in envs.unwrapped._cores:
            # Instance attributes shadow the methods for this env's cores only.  A reset is
            # reset_sim and tabulate with the shared rows, else reset_row (which calls
            # reset_sim: one of the two is timed, never both).
            shared = envs.unwrapped.shared_rows is not None
            resets = ("reset_sim", "tabulate") if shared else ("reset_row",)
            for name in (*resets, "info_metrics"):
                setattr(core, name, shares.timed(getattr(core, name)))

    def run() -> float:
        step, sample = envs.step, envs.action_space.sample
        if shares is not None:
            shares.counting = True
        for _ in range(steps):
            step(sample() if random_actions else zeros)
        if shares is not None:
            shares.counting = False
        return steps * n

    return run


def play_parts(n: int, steps: int, engine: bool) -> None:
    """Constant-action steps of the native env's N episodes, below its batch step.

    ``engine``: only the simulators' ``decide(False)`` and ``next_decision()``;
    else each core's ``step_key(False)`` (the simulator, the reward and the row's key).
    """
    envs = gym.make_vec("EvalStop-v0", num_envs=n, vectorization_mode="vector_entry_point")
    envs.reset(seed=0)
    cores = envs.unwrapped._cores
    if engine:
        pairs = [(core.sim.decide, core.sim.next_decision) for core in cores]
        for _ in range(steps):
            for decide, next_decision in pairs:
                decide(False)
                next_decision()
    else:
        step_keys = [core.step_key for core in cores]
        for _ in range(steps):
            for step_key in step_keys:
                step_key(False)


def main() -> None:
    """Print the ratios for both action patterns."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--num-envs", type=int, default=16)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument(
        "--play",
        choices=["native", "native-core", "native-engine", "cartpole"],
        help="only play, untimed",
    )
    ap.add_argument("--actions", choices=["constant", "random"], default="constant")
    args = ap.parse_args()
    n = args.num_envs
    if args.play in ("native-core", "native-engine"):
        play_parts(n, args.steps, args.play == "native-engine")
        return
    if args.play:
        env_id, mode = ENVS[args.play]
        stepper(env_id, mode, n, args.steps, args.actions == "random")()
        return
    print(f"N = {n}: env-steps per CPU second")
    print(f"{'actions':34s} {'EvalStop native':>13s} {'CartPole sync':>13s}")
    for label, random_actions in (("constant", False), ("random", True)):
        shares = Shares()
        contenders = {
            "native": stepper(*ENVS["native"], n, args.steps, random_actions, shares),
            "cartpole": stepper(*ENVS["cartpole"], n, args.steps, random_actions),
        }
        for run in contenders.values():
            run()  # warm-up
        gc.callbacks.append(shares.on_gc)
        try:
            t0 = time.process_time()
            rates = interleaved(contenders, args.reps)
            total = time.process_time() - t0
        finally:
            gc.callbacks.remove(shares.on_gc)
        goal = target(n, random_actions)
        line = report(label, rates, "native", "cartpole", goal or 0.0)
        if goal is None:
            line = line[: line.index("  (target")] + "  (no target)"
        print(line)
        # The native runs' CPU: env-steps over their rates, summed over the rounds.
        native = sum(args.steps * n / r for r in rates["native"])
        print(
            f"  native env's CPU: collector {shares.gc / native:5.1%}, episode ends and"
            f" resets {shares.episodes / native:5.1%} (of {native:.2f} s; {total:.2f} s in all)"
        )


if __name__ == "__main__":
    main()
