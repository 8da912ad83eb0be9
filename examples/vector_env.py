"""EvalStop-v0 vectorised: Gymnasium's async vector env and SB3's SubprocVecEnv.

python examples/vector_env.py
"""

import gymnasium as gym
import numpy as np

import evalstop_gym  # noqa: F401


def main() -> None:
    """Step a Gymnasium async vector env, then an SB3 SubprocVecEnv."""
    envs = gym.make_vec("EvalStop-v0", num_envs=4, vectorization_mode="async", n_jobs=50)
    obs, _ = envs.reset(seed=0)
    episodes = 0
    for _ in range(2000):
        # EvalStop's rule, batched: stop after two consecutive declines.
        actions = (obs["consecutive_declines"][:, 0] >= 2).astype(np.int64)
        obs, rewards, terminated, truncated, infos = envs.step(actions)
        episodes += int(terminated.sum())
    envs.close()
    print(f"gymnasium async: 4 envs x 2000 steps, {episodes} episodes finished")

    try:
        from stable_baselines3.common.env_util import make_vec_env
        from stable_baselines3.common.vec_env import SubprocVecEnv
    except ImportError:
        print("stable-baselines3 not installed: skipping SubprocVecEnv")
        return
    # "module:id" makes each worker process import evalstop_gym and register the env.
    venv = make_vec_env(
        "evalstop_gym:EvalStop-v0", n_envs=2, vec_env_cls=SubprocVecEnv, env_kwargs={"n_jobs": 50}
    )
    venv.seed(0)
    venv.reset()
    for _ in range(500):
        venv.step(np.zeros(2, dtype=np.int64))
    venv.close()
    print("SB3 SubprocVecEnv: 2 envs x 500 steps")


if __name__ == "__main__":  # subprocess-based vector envs need the main guard
    main()
