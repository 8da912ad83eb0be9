"""The discrete-event simulator of a multi-tenant LLM fine-tuning cluster.

It knows nothing of Gymnasium, policies or experiments: :mod:`~evalstop_gym.sim.engine` runs
time, GPUs and jobs; :mod:`~evalstop_gym.sim.schedulers` orders them; stoppers see only the
:mod:`~evalstop_gym.sim.boundary`; :mod:`~evalstop_gym.sim.metrics` scores an episode.
"""

from __future__ import annotations

from .boundary import BOUNDARY_FIELDS, HIDDEN_FIELDS, JobView
from .calibration import CALIBRATIONS, Calibration
from .config import SimConfig
from .engine import Simulator
from .job import SchedulingView
from .metrics import METRIC_KEYS, episode_metrics
from .schedulers import SCHEDULERS, Scheduler
from .stopping import KDeclineRule, never_stop
from .workloads import SAMPLE_TRACE, WORKLOADS, Workload

__all__ = [
    "BOUNDARY_FIELDS",
    "CALIBRATIONS",
    "HIDDEN_FIELDS",
    "METRIC_KEYS",
    "SAMPLE_TRACE",
    "SCHEDULERS",
    "WORKLOADS",
    "Calibration",
    "JobView",
    "KDeclineRule",
    "Scheduler",
    "SchedulingView",
    "SimConfig",
    "Simulator",
    "Workload",
    "episode_metrics",
    "never_stop",
]
