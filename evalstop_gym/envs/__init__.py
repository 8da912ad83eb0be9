"""Gymnasium environments on top of the simulator (registered by ``import evalstop_gym``)."""

from __future__ import annotations

from .evalstop import EvalStopEnv
from .flat import EvalStopFlatEnv
from .vector import EvalStopVectorEnv
from .wrappers import EpisodeMetricsInfo

__all__ = ["EpisodeMetricsInfo", "EvalStopEnv", "EvalStopFlatEnv", "EvalStopVectorEnv"]
