"""Gymnasium environments on top of the simulator (registered by ``import evalstop_gym``)."""

from __future__ import annotations

from .cluster import EvalStopClusterEnv, per_job_actions
from .config import EvalStopConfig
from .evalstop import EvalStopEnv
from .flat import EvalStopFlatEnv
from .vector import EvalStopVectorEnv
from .wrappers import EpisodeMetricsInfo, EpisodeMetricsSoFar

__all__ = [
    "EpisodeMetricsInfo",
    "EpisodeMetricsSoFar",
    "EvalStopClusterEnv",
    "EvalStopConfig",
    "EvalStopEnv",
    "EvalStopFlatEnv",
    "EvalStopVectorEnv",
    "per_job_actions",
]
