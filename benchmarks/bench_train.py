"""SB3 PPO training throughput: EvalStop-v0 (native batched env) against CartPole-v1.

    python benchmarks/bench_train.py [--timesteps 32768] [--reps 2]

Both with ``PPO("MlpPolicy", ...)`` at SB3's defaults (n_steps 2048, 10
epochs, batch 64), 16 envs, one torch thread: EvalStop-v0 through
``baselines.native_vec.NativeVecEnv`` (N simulators in one process, flat
observations) under ``VecMonitor``, CartPole-v1 through ``make_vec_env``
(``DummyVecEnv`` of ``Monitor``-ed envs).  fps = timesteps learned per CPU
second of ``learn`` (rollouts and gradient steps), interleaved runs.
Target (issue #15): >= 1.0x CartPole's fps.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import torch
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import VecMonitor
from timing import interleaved, report

import evalstop_gym  # noqa: F401
from baselines.native_vec import NativeVecEnv

N_ENVS = 16
TARGET = 1.0


def learner(make_venv: Callable[[], object], timesteps: int) -> Callable[[], float]:
    """One fresh PPO trained for ``timesteps``; returns the timesteps learned."""

    def run() -> float:
        model = PPO("MlpPolicy", make_venv(), seed=0, device="cpu")
        model.learn(total_timesteps=timesteps)
        model.get_env().close()
        return model.num_timesteps

    return run


def main() -> None:
    """Print the fps ratio."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--timesteps", type=int, default=2048 * N_ENVS)
    ap.add_argument("--reps", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(1)
    contenders = {
        "evalstop": learner(lambda: VecMonitor(NativeVecEnv(N_ENVS, seed=0)), args.timesteps),
        "cartpole": learner(
            lambda: make_vec_env("CartPole-v1", n_envs=N_ENVS, seed=0), args.timesteps
        ),
    }
    rates = interleaved(contenders, args.reps)
    print(f"{'PPO MlpPolicy, 16 envs (fps)':34s} {'EvalStop':>13s} {'CartPole':>13s}")
    print(report("ppo", rates, "evalstop", "cartpole", TARGET))


if __name__ == "__main__":
    main()
