"""SB3 training throughput on EvalStop-v0 against CartPole-v1, same run, same settings.

    python benchmarks/bench_train.py [--timesteps 20000]

Each algorithm trains on 4 DummyVecEnv copies of each env with the
hyperparameters of baselines/train.py (MultiInputPolicy on EvalStop's Dict,
MlpPolicy on CartPole), single-threaded torch; prints steps/s and the ratio.
"""

from __future__ import annotations

import argparse
import time

import torch
from stable_baselines3.common.env_util import make_vec_env

import evalstop_gym  # noqa: F401
from baselines.learned import _algo
from baselines.train import load_hyperparams


def fps(algo: str, env_id: str, policy: str, timesteps: int, **env_kwargs) -> float:
    venv = make_vec_env(env_id, n_envs=4, seed=0, env_kwargs=env_kwargs)
    model = _algo(algo)(policy, venv, seed=0, device="cpu", **load_hyperparams(algo))
    t0 = time.perf_counter()
    model.learn(total_timesteps=timesteps)
    dt = time.perf_counter() - t0
    venv.close()
    return model.num_timesteps / dt


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--timesteps", type=int, default=20_000)
    args = ap.parse_args()
    torch.set_num_threads(1)
    print(f"{'algo':6s} {'EvalStop-v0':>14s} {'CartPole-v1':>14s} {'ratio':>7s}")
    for algo in ("ppo", "dqn"):
        a = fps(algo, "EvalStop-v0", "MultiInputPolicy", args.timesteps, n_jobs=100)
        b = fps(algo, "CartPole-v1", "MlpPolicy", args.timesteps)
        print(f"{algo:6s} {a:12.0f}/s {b:12.0f}/s {a / b:7.2f}")


if __name__ == "__main__":
    main()
