"""Gymnasium environments on top of the simulator (registered by ``import evalstop_gym``)."""

from __future__ import annotations

from .cluster import EvalStopClusterEnv, per_job_actions
from .evalstop import EvalStopEnv
from .flat import EvalStopFlatEnv
from .vector import EvalStopVectorEnv
from .wrappers import EpisodeMetricsInfo

__all__ = [
    "EpisodeMetricsInfo",
    "EvalStopClusterEnv",
    "EvalStopEnv",
    "EvalStopFlatEnv",
    "EvalStopVectorEnv",
    "per_job_actions",
]
