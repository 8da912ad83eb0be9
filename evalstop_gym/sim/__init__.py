"""The discrete-event simulator of a multi-tenant LLM fine-tuning cluster.

It knows nothing of Gymnasium, policies or experiments: :mod:`~evalstop_gym.sim.engine` runs
time, GPUs and jobs (:func:`make_simulator` builds one for a config);
:mod:`~evalstop_gym.sim.schedulers` orders them; stoppers see only the
:mod:`~evalstop_gym.sim.boundary`; :mod:`~evalstop_gym.sim.metrics` scores an episode.
"""

from __future__ import annotations

from typing import Any

from .boundary import BOUNDARY_FIELDS, HIDDEN_FIELDS, JobView
from .calibration import CALIBRATIONS, Calibration
from .config import SimConfig
from .engine import Simulator
from .job import SchedulingView
from .metrics import METRIC_KEYS, episode_metrics
from .pooled import PooledSimulator
from .schedulers import SCHEDULERS, Scheduler
from .stopping import KDeclineRule, never_stop
from .traces import SAMPLE_TRACE
from .workloads import WORKLOADS, Workload

# ``Simulator(config)`` with pools keeps building a PooledSimulator (docs/ENVIRONMENT.md and users
# call it so); the engine reads the class from here instead of importing pooled.py.
Simulator._pooled_class = PooledSimulator


def make_simulator(config: SimConfig, seed: int | None = None, **kwargs: Any) -> Simulator:
    """The episode's simulator: a :class:`PooledSimulator` with ``config.pools``, else a plain one.

    Args:
        config: The episode's configuration.
        seed: Seed of every random draw of the episode.
        **kwargs: The simulator's keyword arguments (``record_events``, ``jobs``).
    """
    cls = Simulator if config.pools is None else PooledSimulator
    return cls(config, seed, **kwargs)


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
    "make_simulator",
    "never_stop",
]
