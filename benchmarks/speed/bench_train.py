"""SB3 PPO rollout collection and training throughput: EvalStop-v0 against CartPole-v1.

    python benchmarks/speed/bench_train.py [--timesteps 32768] [--reps 2] [--no-control]
    python benchmarks/speed/bench_train.py --rollouts-only [--reps 7]

Both with ``PPO("MlpPolicy", ...)`` at SB3's defaults (n_steps 2048, 10
epochs, batch 64), 16 envs, one torch thread: EvalStop-v0 through
``baselines.training.native_vec.NativeVecEnv`` (N simulators in one process, flat
observations) under ``VecMonitor``, CartPole-v1 through ``make_vec_env``
(``DummyVecEnv`` of ``Monitor``-ed envs).  The target is on what the env
decides: rollout collection (env steps and the policy's forward passes, timed
by a callback at each rollout's start and end), in env steps per CPU second,
>= 1.0x CartPole's under the same SB3 settings.  fps = timesteps learned per
CPU second of the whole ``learn`` (with PPO's gradient steps, whose cost is
torch's and moves from round to round) is printed beside it, without a target.

A third contender is the control that says where the gap is: CartPole-v1
with its 4 numbers zero-padded to EvalStop's observation width (45), so that
PPO's networks have EvalStop's input layer and the env is still CartPole.
If EvalStop's fps matches the padded CartPole's, the gap to plain CartPole
is the cost of the wider input in PPO's gradient steps, not the env.  Each
run's CPU is also split (by a callback at the rollouts' start and end) into
collecting rollouts (env steps and the policy's forward passes) and the rest
of ``learn`` (PPO's gradient steps), printed as per-part rates and ratios.

``--rollouts-only`` times the target's part alone, cheaply enough for many
rounds: each contender's PPO (the same settings, never trained) collects one
rollout of ``n_steps`` x 16 env steps per round, on one persistent env, by
SB3's own ``collect_rollouts``; rounds interleaved as above.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import VecMonitor
from timing import interleaved, report

import evalstop_gym  # noqa: F401
from baselines.training.native_vec import NativeVecEnv

N_ENVS = 16
TARGET = 1.0  # rollout collection, env steps per CPU second, vs CartPole


def padded_cartpole(width: int) -> gym.Env:
    """CartPole-v1 whose observation is zero-padded to ``width`` numbers (the control)."""
    env = gym.make("CartPole-v1")
    space = env.observation_space
    extra = width - space.shape[0]
    low = np.concatenate([space.low, np.zeros(extra, np.float32)])
    high = np.concatenate([space.high, np.zeros(extra, np.float32)])
    box = gym.spaces.Box(low, high, dtype=np.float32)
    pad = np.zeros(extra, np.float32)
    return gym.wrappers.TransformObservation(env, lambda obs: np.concatenate([obs, pad]), box)


class RolloutCPU(BaseCallback):
    """Sums the process CPU time spent collecting rollouts."""

    def __init__(self) -> None:
        """Start with no time counted."""
        super().__init__()
        self.seconds = 0.0
        self._t0 = 0.0

    def _on_rollout_start(self) -> None:
        """Note the CPU clock as a rollout starts."""
        self._t0 = time.process_time()

    def _on_rollout_end(self) -> None:
        """Add the rollout's CPU time."""
        self.seconds += time.process_time() - self._t0

    def _on_step(self) -> bool:
        """Keep training."""
        return True


def learner(
    make_venv: Callable[[], object], timesteps: int, split: list[tuple[int, float, float]]
) -> Callable[[], float]:
    """One fresh PPO trained for ``timesteps``; returns the timesteps learned.

    Appends (timesteps, CPU s collecting rollouts, CPU s of the whole ``learn``) to
    ``split``.
    """

    def run() -> float:
        model = PPO("MlpPolicy", make_venv(), seed=0, device="cpu")
        cpu = RolloutCPU()
        t0 = time.process_time()
        model.learn(total_timesteps=timesteps, callback=cpu)
        split.append((model.num_timesteps, cpu.seconds, time.process_time() - t0))
        model.get_env().close()
        return model.num_timesteps

    return run


def collector(make_venv: Callable[[], object]) -> Callable[[], float]:
    """One untrained PPO whose every call collects one rollout; returns its env steps."""
    model = PPO("MlpPolicy", make_venv(), seed=0, device="cpu")
    _, callback = model._setup_learn(10**9, RolloutCPU())  # resets the env, as learn does

    def run() -> float:
        model.collect_rollouts(model.env, callback, model.rollout_buffer, model.n_steps)
        return model.n_steps * model.env.num_envs

    return run


def split_line(name: str, split: list[tuple[int, float, float]]) -> str:
    """Median collection and gradient-step rates of one contender's runs."""
    collect = statistics.median(n / c for n, c, _ in split)
    train = statistics.median(n / (t - c) for n, c, t in split)
    share = statistics.median(c / t for _, c, t in split)
    return (
        f"  {name:17s} collecting {collect:9.0f} steps/s, gradient steps {train:7.0f} steps/s"
        f" ({share:4.0%} of learn collecting)"
    )


def main() -> None:
    """Print the fps ratio."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--timesteps", type=int, default=2048 * N_ENVS)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--no-control", action="store_true", help="skip the padded-CartPole control")
    ap.add_argument(
        "--rollouts-only", action="store_true", help="time rollout collection alone (no learn)"
    )
    args = ap.parse_args()
    torch.set_num_threads(1)
    width = NativeVecEnv(1, seed=0).observation_space.shape[0]
    makers = {
        "evalstop": lambda: VecMonitor(NativeVecEnv(N_ENVS, seed=0)),
        "cartpole": lambda: make_vec_env("CartPole-v1", n_envs=N_ENVS, seed=0),
        "cartpole_padded": lambda: make_vec_env(
            lambda: padded_cartpole(width), n_envs=N_ENVS, seed=0
        ),
    }
    if args.no_control:
        del makers["cartpole_padded"]
    if args.rollouts_only:
        runs = {name: collector(make) for name, make in makers.items()}
        for run in runs.values():
            run()  # warm-up: the first rollout starts every episode at once
        rates = interleaved(runs, args.reps)
        print(f"{'PPO MlpPolicy, 16 envs':34s} {'EvalStop':>13s} {'CartPole':>13s}")
        print(report("rollout collection (steps/s)", rates, "evalstop", "cartpole", TARGET))
        if "cartpole_padded" in rates:
            print(
                report("collection, control (same width)", rates, "evalstop", "cartpole_padded", 0)
            )
        return
    splits: dict[str, list[tuple[int, float, float]]] = {name: [] for name in makers}
    contenders = {
        name: learner(make, args.timesteps, splits[name]) for name, make in makers.items()
    }
    rates = interleaved(contenders, args.reps)
    # Run i of every contender belongs to round i: the per-round ratios pair them.
    collect = {name: [n / c for n, c, _ in split] for name, split in splits.items()}
    print(f"{'PPO MlpPolicy, 16 envs':34s} {'EvalStop':>13s} {'CartPole':>13s}")
    print(report("rollout collection (steps/s)", collect, "evalstop", "cartpole", TARGET))
    print(report("whole learn, fps (no target)", rates, "evalstop", "cartpole", 0.0))
    if not args.no_control:
        print(f"{'':34s} {'EvalStop':>13s} {f'CartPole {width}-wide':>13s}")
        print(
            report(
                "collection, control (same width)", collect, "evalstop", "cartpole_padded", TARGET
            )
        )
    print("where the CPU goes (medians over the runs):")
    for name, split in splits.items():
        print(split_line(name, split))


if __name__ == "__main__":
    main()
