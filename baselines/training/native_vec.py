"""Stable-Baselines3's ``VecEnv`` over the native batched ``EvalStop-v0``.

:class:`NativeVecEnv` runs N simulators in one process through
:class:`evalstop_gym.envs.EvalStopVectorEnv` in same-step autoreset mode (the
step that ends an episode returns the next episode's first observation, the
terminal one in ``infos[i]["terminal_observation"]``), which is what SB3
expects.  Observations are flat (``flatten=True``, for ``MlpPolicy``; the
fields concatenated in boundary order) or a dict (``MultiInputPolicy``).

    venv = VecMonitor(NativeVecEnv(16, seed=0, n_jobs=100))
    PPO("MlpPolicy", venv).learn(100_000)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from stable_baselines3.common.vec_env.base_vec_env import (
    VecEnv,
    VecEnvIndices,
    VecEnvObs,
    VecEnvStepReturn,
)

from evalstop_gym.envs import EvalStopVectorEnv


class NativeVecEnv(VecEnv):
    """N ``EvalStop-v0`` episodes in one process, as an SB3 ``VecEnv``.

    Args:
        num_envs: Number of simulators.
        seed: Seed of the first reset (env i gets seed + i); None draws one.
        flatten: Flat Box observations (``MlpPolicy``) instead of a Dict.
        **env_kwargs: Arguments of ``EvalStop-v0``.
    """

    def __init__(
        self, num_envs: int, seed: int | None = None, *, flatten: bool = True, **env_kwargs: Any
    ) -> None:
        """Build the batched env in same-step autoreset mode."""
        self.venv = EvalStopVectorEnv(
            num_envs, flatten=flatten, autoreset_mode=AutoresetMode.SAME_STEP, **env_kwargs
        )
        super().__init__(
            num_envs, self.venv.single_observation_space, self.venv.single_action_space
        )
        if seed is not None:
            self.seed(seed)
        self._actions: np.ndarray | None = None

    def reset(self) -> VecEnvObs:
        """Reset every simulator (with the seeds set by :meth:`seed`, if any)."""
        seeds = None if all(s is None for s in self._seeds) else list(self._seeds)
        obs, _ = self.venv.reset(seed=seeds)
        self._reset_seeds()
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        """Store the actions for :meth:`step_wait`."""
        self._actions = actions

    def step_wait(self) -> VecEnvStepReturn:
        """Step every simulator; an ended episode restarts in the same step."""
        obs, rewards, terminated, truncated, info = self.venv.step(self._actions)
        dones = terminated | truncated
        infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        # Each ended episode's own metrics, as the batched env kept them (no un-batching).
        for i, ended in self.venv.ended:
            metrics = {k: float(v) for k, v in ended.items()}
            # Also at the top level, as EpisodeMetricsInfo does, for VecMonitor's info_keywords.
            infos[i] = {
                **metrics,
                "terminal_observation": info["final_obs"][i],
                "TimeLimit.truncated": bool(truncated[i]),
                "episode_metrics": metrics,
            }
        return obs, rewards.astype(np.float32), dones, infos

    def close(self) -> None:
        """Close the simulators."""
        self.venv.close()

    def _targets(self, indices: VecEnvIndices) -> list[gym.Env]:
        return [self.venv.envs[i] for i in self._get_indices(indices)]

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        """An attribute of each (selected) simulator's env."""
        return [getattr(env, attr_name) for env in self._targets(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        """Set an attribute of each (selected) simulator's env."""
        for env in self._targets(indices):
            setattr(env, attr_name, value)

    def env_method(
        self,
        method_name: str,
        *method_args: Any,
        indices: VecEnvIndices = None,
        **method_kwargs: Any,
    ) -> list[Any]:
        """Call a method of each (selected) simulator's env."""
        return [
            getattr(env, method_name)(*method_args, **method_kwargs)
            for env in self._targets(indices)
        ]

    def env_is_wrapped(
        self, wrapper_class: type[gym.Wrapper], indices: VecEnvIndices = None
    ) -> Sequence[bool]:
        """The simulators' envs are never wrapped."""
        return [False for _ in self._targets(indices)]


def make_native_venv(
    n_envs: int,
    seed: int,
    flatten: bool,
    env_kwargs: dict[str, Any],
    monitor_file: str | None = None,
    info_keywords: tuple[str, ...] = (),
) -> VecEnv:
    """A :class:`NativeVecEnv` under ``VecMonitor`` (episode returns and metrics logged)."""
    from stable_baselines3.common.vec_env import VecMonitor

    venv = NativeVecEnv(n_envs, seed, flatten=flatten, **env_kwargs)
    return VecMonitor(venv, filename=monitor_file, info_keywords=info_keywords)
