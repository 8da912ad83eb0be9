"""The simulator's configuration: one typed, validated object with its defaults.

Bad values fail here, at construction, with the field, the value and what is
allowed, before any job is simulated.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError
from .calibration import Calibration, get_calibration
from .schedulers import SCHEDULERS, Scheduler, make_scheduler
from .workloads import Workload, check_fits, check_fraction, get_workload, with_overrides


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


@dataclass(frozen=True)
class SimConfig:
    """Everything that defines an episode except the seed.

    Attributes:
        num_gpus: Cluster size (homogeneous GPUs, gang-allocated).
        workload: Preset name (``heavy-rlhf``, ``balanced``, ``light-rlhf``) or a
            :class:`~evalstop_gym.sim.workloads.Workload`.
        scheduler: Base scheduler: ``fifo``, ``sjf-est``, ``srtf-est``,
            ``loss-aware`` or ``tiresias`` (or any registered subclass).
        scheduler_options: Keyword arguments of the scheduler class.
        calibration: ``paper`` (default) or ``realistic``, or a Calibration.
        eval_noise: Standard deviation of the observed eval noise; None takes
            the calibration's default.
        hack_fraction: Fraction of RLHF runs that hack; None takes the workload's.
        load: Offered load; None takes the workload's (synthetic workloads only).
        n_jobs: Jobs per episode; None takes the workload's, or the whole trace.
        trace: Path of a Philly-format CSV to replay instead of the generator.
        trace_cluster: Keep only this virtual cluster of the trace.
        eval_window: W, how many past evals and losses a policy sees; None
            means all of a job's checkpoints.
        curves: Path of a curve-trace corpus (JSONL, see docs/CURVE_TRACES.md):
            RLHF jobs then run on its real curves, and ``eval_noise`` is extra
            noise on the measured eval (default 0).
    """

    num_gpus: int = 64
    workload: str | Workload = "heavy-rlhf"
    scheduler: str = "srtf-est"
    scheduler_options: dict[str, Any] = field(default_factory=dict)
    calibration: str | Calibration = "paper"
    eval_noise: float | None = None
    hack_fraction: float | None = None
    load: float | None = None
    n_jobs: int | None = None
    trace: str | None = None
    trace_cluster: str | None = None
    eval_window: int | None = None
    curves: str | None = None

    def __post_init__(self) -> None:
        """Validate every field at construction (ConfigError names the field)."""
        if not _is_int(self.num_gpus) or self.num_gpus < 1:
            raise ConfigError("num_gpus", self.num_gpus, "an integer >= 1")
        if self.scheduler not in SCHEDULERS:
            raise ConfigError("scheduler", self.scheduler, f"one of {sorted(SCHEDULERS)}")
        if not isinstance(self.scheduler_options, dict):
            raise ConfigError("scheduler_options", self.scheduler_options, "a dict")
        make_scheduler(self.scheduler, **self.scheduler_options)  # validates the options
        get_calibration(self.calibration)
        wl = get_workload(self.workload)
        if self.eval_noise is not None and (
            not isinstance(self.eval_noise, int | float)
            or not self.eval_noise >= 0
            or math.isinf(self.eval_noise)
        ):
            raise ConfigError("eval_noise", self.eval_noise, "a finite standard deviation >= 0")
        if self.hack_fraction is not None:
            check_fraction("hack_fraction", self.hack_fraction)
        if self.n_jobs is not None and (not _is_int(self.n_jobs) or self.n_jobs < 1):
            raise ConfigError("n_jobs", self.n_jobs, "an integer >= 1 (or None)")
        if self.eval_window is not None and (not _is_int(self.eval_window) or self.eval_window < 1):
            raise ConfigError("eval_window", self.eval_window, "an integer >= 1 (or None)")
        if self.curves is not None and not (
            isinstance(self.curves, str | os.PathLike) and os.path.isfile(self.curves)
        ):
            raise ConfigError("curves", self.curves, "an existing curve-trace JSONL file")
        if self.trace is None:
            if self.trace_cluster is not None:
                raise ConfigError("trace_cluster", self.trace_cluster, "only with trace=PATH")
            # Validates load (and the other overrides) through the Workload checks.
            self.resolved_workload()
            check_fits(wl, self.num_gpus)
        else:
            if not isinstance(self.trace, str | os.PathLike):
                raise ConfigError("trace", self.trace, "a path to a CSV in the Philly format")
            if not os.path.isfile(self.trace):
                raise ConfigError("trace", self.trace, "an existing CSV file")
            if self.load is not None:
                raise ConfigError("load", self.load, "None with trace= (a trace fixes arrivals)")

    # -- resolved views -------------------------------------------------------
    def resolved_workload(self) -> Workload:
        """The workload preset with this config's overrides applied."""
        return with_overrides(
            get_workload(self.workload),
            hack_fraction=self.hack_fraction,
            load=self.load,
            n_jobs=self.n_jobs,
        )

    def resolved_calibration(self) -> Calibration:
        """The Calibration object this config names."""
        return get_calibration(self.calibration)

    def resolved_eval_noise(self) -> float:
        """The eval-noise standard deviation in force (the calibration's unless overridden)."""
        if self.eval_noise is not None:
            return float(self.eval_noise)
        return 0.0 if self.curves is not None else float(self.resolved_calibration().eval_noise)

    def resolved_eval_window(self) -> int:
        """W, the number of past evals and losses a policy sees."""
        k = self.resolved_calibration().evals_per_job
        return k if self.eval_window is None else self.eval_window

    def make_scheduler(self) -> Scheduler:
        """A fresh instance of the configured base scheduler."""
        return make_scheduler(self.scheduler, **self.scheduler_options)
