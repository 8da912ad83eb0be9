"""Small Gymnasium wrappers for EvalStop-v0."""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from ..sim.metrics import METRIC_KEYS


class EpisodeMetricsInfo(gym.Wrapper):
    """Copy the final step's ``info["episode_metrics"]`` to top-level ``info`` keys.

    So that tools that read flat info keys at the end of an episode (SB3's
    ``Monitor(info_keywords=...)``) log the episode metrics.  Every key of
    ``METRIC_KEYS`` is there at the end of every episode: a metric undefined
    in the episode (left out of ``info["episode_metrics"]``) is None.
    """

    def step(self, action: Any):
        """Step the env; on the last step, lift the episode metrics into ``info``."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        if "episode_metrics" in info:
            info = {**info, **dict.fromkeys(METRIC_KEYS), **info["episode_metrics"]}
        return obs, reward, terminated, truncated, info
