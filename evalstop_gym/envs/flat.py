"""``EvalStopFlat-v0``: ``EvalStop-v0`` with one flat ``Box`` observation.

For RL libraries whose defaults expect a vector observation (RL Zoo's
``MlpPolicy``, RLlib's default encoders, Tianshou's ``Net``, CleanRL-style
loops with ``NormalizeObservation``): no wrapper needed in the user's script.
"""

from __future__ import annotations

from typing import Any, ClassVar, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from .config import refuse_unknown_arguments
from .evalstop import EvalStopEnv


class EvalStopFlatEnv(gym.Env[np.ndarray, np.int64]):
    """
    ## Description

    `EvalStop-v0` (see :class:`EvalStopEnv` for the dynamics, rewards, arguments,
    rendering and `info`) whose observation is the `Dict` flattened into one
    float32 vector.  Every keyword argument of `EvalStop-v0` is accepted; the
    `EvalStop-v0` instance it drives is `dict_env` (its `sim`, `config` and
    `episode_metrics()`).

    ## Observation Space

    A `Box` of shape `(n,)`, float32: the selected boundary fields concatenated
    in the `Dict`'s (alphabetical) key order — `consecutive_declines`, `evals`,
    `job_type`, `loss`, `progress` — exactly what
    `gymnasium.wrappers.FlattenObservation` gives on `EvalStop-v0`, so a model
    trained on either sees the same vector.  Bounds are the fields' bounds.
    `dict_observation_space` keeps the `Dict`.  With the default window
    (W = 10) `n` = 1 + 20 + 3 + 20 + 1 = 45.

    ## Example

    >>> import gymnasium as gym
    >>> import evalstop_gym
    >>> env = gym.make("EvalStopFlat-v0", n_jobs=20)
    >>> obs, info = env.reset(seed=0)
    >>> obs.shape, obs.dtype, env.action_space
    ((45,), dtype('float32'), Discrete(2))

    ## Version History

    * v0: initial version.
    """

    metadata: ClassVar[dict[str, Any]] = EvalStopEnv.metadata

    def __init__(self, render_mode: str | None = None, **kwargs: Any) -> None:
        """Build ``EvalStop-v0`` with the same arguments and flatten its observation space."""
        if "env_config" not in kwargs:
            refuse_unknown_arguments(kwargs, "EvalStopFlat-v0")
        # Composition, not inheritance: EvalStopEnv's internals may read its own
        # (Dict) observation_space; this class only uses its public API.
        self.dict_env = EvalStopEnv(render_mode=render_mode, **kwargs)
        self.render_mode = render_mode
        self.action_space = self.dict_env.action_space
        self.dict_observation_space: spaces.Dict = self.dict_env.observation_space
        self._keys = tuple(self.dict_observation_space.spaces)
        self.observation_space = spaces.flatten_space(self.dict_observation_space)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Reset as ``EvalStop-v0`` does (same seed, same episode); the observation is flat."""
        super().reset(seed=seed)
        obs, info = self.dict_env.reset(seed=seed, options=options)
        return self._flatten(obs), info

    def step(self, action: Any) -> tuple[np.ndarray, SupportsFloat, bool, bool, dict[str, Any]]:
        """Step as ``EvalStop-v0`` does; the observation is flat."""
        obs, reward, terminated, truncated, info = self.dict_env.step(action)
        return self._flatten(obs), reward, terminated, truncated, info

    def render(self) -> str | np.ndarray | None:
        """``EvalStop-v0``'s rendering (text, picture, or printed for ``human``)."""
        return self.dict_env.render()

    def action_masks(self) -> np.ndarray:
        """Always ``[True, True]``, as in ``EvalStop-v0`` (for ``MaskablePPO``)."""
        return self.dict_env.action_masks()

    def episode_metrics(self) -> dict[str, float | None]:
        """``EvalStop-v0``'s ``episode_metrics()``: the episode's metrics (so far, mid-episode)."""
        return self.dict_env.episode_metrics()

    def close(self) -> None:
        """Close the underlying ``EvalStop-v0``."""
        self.dict_env.close()

    def _flatten(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        # Every field is a 1-D float32 Box: concatenation in key order is
        # spaces.flatten without its per-field dispatch.
        return np.concatenate([obs[k] for k in self._keys])
