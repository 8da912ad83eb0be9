"""evalstop-gym: when should a platform stop a reward-hacking RLHF run?

The simulator (:class:`Simulator`, :class:`SimConfig`) knows nothing of
Gymnasium; :mod:`evalstop_gym.envs` is a thin layer on top.
"""

from __future__ import annotations

from .boundary import BOUNDARY_FIELDS, HIDDEN_FIELDS, JobView
from .calibration import CALIBRATIONS, Calibration
from .config import SimConfig
from .engine import Simulator
from .errors import ConfigError, TraceError
from .metrics import METRIC_KEYS, episode_metrics
from .schedulers import SCHEDULERS, Scheduler
from .stopping import KDeclineRule, never_stop
from .workloads import SAMPLE_TRACE, WORKLOADS, Workload

__version__ = "0.1.0"


def _register() -> None:
    # Gymnasium 1.x has no plugin entry points: registering on import is the
    # convention.  Idempotent, so re-imports and reloads do not warn.
    from gymnasium.envs.registration import register, registry

    if "EvalStop-v0" not in registry:
        register(id="EvalStop-v0", entry_point="evalstop_gym.envs:EvalStopEnv")


_register()

__all__ = [
    "BOUNDARY_FIELDS",
    "CALIBRATIONS",
    "HIDDEN_FIELDS",
    "METRIC_KEYS",
    "SAMPLE_TRACE",
    "SCHEDULERS",
    "WORKLOADS",
    "Calibration",
    "ConfigError",
    "JobView",
    "KDeclineRule",
    "Scheduler",
    "SimConfig",
    "Simulator",
    "TraceError",
    "Workload",
    "episode_metrics",
    "never_stop",
]
