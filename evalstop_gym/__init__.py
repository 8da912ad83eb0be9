"""evalstop-gym: when should a platform stop a reward-hacking RLHF run?

The simulator (:class:`Simulator`, :class:`SimConfig`) knows nothing of
Gymnasium; :mod:`evalstop_gym.envs` is a thin layer on top.
"""

from __future__ import annotations

from .corpus import (
    CurveTrace,
    CurveTraceError,
    fit_gao,
    fit_gao_trace,
    label_hacking,
    load_openrlhf_log,
    load_trl_trainer_state,
    read_traces,
    write_traces,
)
from .errors import ConfigError, TraceError
from .sim import make_simulator
from .sim.boundary import BOUNDARY_FIELDS, HIDDEN_FIELDS, JobView
from .sim.calibration import CALIBRATIONS, Calibration
from .sim.config import SimConfig
from .sim.engine import Simulator
from .sim.metrics import METRIC_KEYS, episode_metrics
from .sim.schedulers import SCHEDULERS, Scheduler
from .sim.stopping import KDeclineRule, never_stop
from .sim.traces import SAMPLE_TRACE
from .sim.workloads import WORKLOADS, Workload
from .suite import SUITE_PRICE, SUITE_TASKS, suite_task


def _version() -> str:
    """The installed distribution's version (one source: pyproject.toml)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("evalstop-gym")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "0+unknown"


__version__ = _version()


def _register() -> None:
    # Gymnasium 1.x has no plugin entry points: registering on import is the
    # convention.  Idempotent, so re-imports and reloads do not warn.
    from gymnasium.envs.registration import register, registry

    if "EvalStop-v0" not in registry:
        register(
            id="EvalStop-v0",
            entry_point="evalstop_gym.envs:EvalStopEnv",
            vector_entry_point="evalstop_gym.envs.vector:EvalStopVectorEnv",
        )
    if "EvalStopFlat-v0" not in registry:  # a Box observation, for MlpPolicy-style defaults
        register(id="EvalStopFlat-v0", entry_point="evalstop_gym.envs:EvalStopFlatEnv")
    if "EvalStopCluster-v0" not in registry:
        register(id="EvalStopCluster-v0", entry_point="evalstop_gym.envs:EvalStopClusterEnv")
    # One id per named task (as Minigrid registers its variants), so RL Zoo and RLlib users
    # name a task without env kwargs; kwargs given to gym.make still override the task's.
    # A corpus task's path is resolved here (a stat, the corpus is not read).
    from .suite import registered_tasks, task_env_id

    for task in registered_tasks():
        env_id = task_env_id(task)
        if env_id not in registry:
            register(
                id=env_id,
                entry_point="evalstop_gym.envs:EvalStopEnv",
                vector_entry_point="evalstop_gym.envs.vector:EvalStopVectorEnv",
                kwargs=suite_task(task),
            )


_register()

__all__ = [
    "BOUNDARY_FIELDS",
    "CALIBRATIONS",
    "HIDDEN_FIELDS",
    "METRIC_KEYS",
    "SAMPLE_TRACE",
    "SCHEDULERS",
    "SUITE_PRICE",
    "SUITE_TASKS",
    "WORKLOADS",
    "Calibration",
    "ConfigError",
    "CurveTrace",
    "CurveTraceError",
    "JobView",
    "KDeclineRule",
    "Scheduler",
    "SimConfig",
    "Simulator",
    "TraceError",
    "Workload",
    "episode_metrics",
    "fit_gao",
    "fit_gao_trace",
    "label_hacking",
    "load_openrlhf_log",
    "load_trl_trainer_state",
    "make_simulator",
    "never_stop",
    "read_traces",
    "suite_task",
    "write_traces",
]
