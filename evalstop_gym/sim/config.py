"""The simulator's configuration: one typed, validated object with its defaults.

Bad values fail here, at construction, with the field, the value and what is
allowed, before any job is simulated.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import ConfigError, check_real, is_integer
from .calibration import Calibration, get_calibration
from .pools import PLACEMENTS, Pool, resolve_pools
from .schedulers import SCHEDULERS, Scheduler, make_scheduler
from .workloads import (
    LOAD_RANGE,
    Workload,
    check_fits,
    check_fraction,
    get_workload,
    with_overrides,
)

#: Upper bounds of the numeric fields: far beyond any real cluster or study, low enough that
#: every reward, metric and observation stays finite (and an episode fits in memory).
MAX_GPUS = 100_000
MAX_JOBS = 1_000_000
#: Eval noise above 10 standard deviations of the score's whole range is noise only (the
#: observation clips evals to +-10).
MAX_EVAL_NOISE = 10.0
#: Upper bound of a per-event cost (restore_h, eval_cost_h): a day of GPU time per event.
MAX_EVENT_COST_H = 24.0

#: ``SimConfig(costs=...)`` presets: (restore_h, eval_cost_h), hours of the job's GPUs.
#:
#: ``realistic`` (order-of-magnitude figures for 7B-70B fine-tuning jobs; see
#: docs/CLUSTER.md, "Costs of a real cluster"):
#:
#: * restore_h = 0.1 (6 min): a preempted job reloads weights, optimizer state and
#:   data-loader position from shared storage and re-initialises its process group.
#:   Gemini (Wang et al., SOSP'23) reports that retrieving a checkpoint from remote
#:   storage takes minutes to tens of minutes for LLM-sized state; CheckFreq (Mohan et
#:   al., FAST'21) measures restore at seconds only for small models held locally.
#: * eval_cost_h = 0.05 (3 min): one eval checkpoint of an RLHF/DPO run generates
#:   answers to a few hundred held-out prompts and scores them, on the job's own GPUs
#:   (the paper's evals are generation-based, so an eval is a small inference job).
COST_PRESETS: dict[str, tuple[float, float]] = {
    "free": (0.0, 0.0),
    "realistic": (0.1, 0.05),
}


def _plain(value: Any) -> Any:
    """A NumPy scalar as the Python number it holds (so ``to_dict`` stays JSON-friendly)."""
    return value.item() if isinstance(value, np.integer | np.floating) else value


#: What a job that runs to its end delivers (SimConfig.deliver).
DELIVER_MODES: tuple[str, ...] = ("final", "best")


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
        calibration: ``paper`` (default), ``realistic`` or ``hard``, or a Calibration.
        eval_noise: Standard deviation of the observed eval noise; None takes
            the calibration's default.
        hack_fraction: Fraction of RLHF runs that hack; None takes the workload's.
        load: Offered load; None takes the workload's (synthetic workloads only).
        n_jobs: Jobs per episode; None takes the workload's, or the whole trace.
        trace: Path of a Philly-format CSV to replay instead of the generator.
        trace_cluster: Keep only this virtual cluster of the trace.
        eval_window: W, how many past evals and losses a policy sees, 1 to
            the checkpoints a job declares; None means all of them.
        curves: Path of a curve-trace corpus (JSONL, see docs/CURVE_TRACES.md):
            RLHF jobs then run on its real curves, and ``eval_noise`` is extra
            noise on the measured eval (default 0).
        curve_scale: How a corpus run is mapped into eval units: ``"run"``
            (default: its own first gold value and gain) or ``"corpus"`` (one
            common map fixed from the whole corpus, nothing of a run's future).
        curve_split: Which runs of the corpus's fixed train/test split RLHF jobs
            replay: ``"all"`` (default), ``"train"`` or ``"test"``.
        curve_noise: A corpus run's observed eval: ``"recorded"`` (default: its
            measured eval) or ``"fresh"`` (its gold plus fresh noise at its
            measured eval sd, drawn per episode).
        curve_jitter: Per-job jitter of the map, in units of the corpus's
            between-run spread of starts and log gains (default 0: none).
        curve_warp: Per-job time warp of a corpus run, in units of the corpus's
            between-run spread of log peak positions (default 0: none).
        deliver: Which checkpoint a job that runs to the end delivers:
            ``"final"`` (default, the paper's setting) or ``"best"`` (its best
            observed one, as a practitioner keeps; a stopped job always
            delivers its best observed checkpoint).
        pools: Heterogeneous cluster: GPU type -> GPU count, e.g.
            ``{"a100": 32, "h100": 32}`` or ``"a100=32,h100=32"`` (see
            :mod:`evalstop_gym.sim.pools`);
            ``num_gpus`` then becomes the pools' total (leave it at its default
            or give that total).  None: one homogeneous pool of ``num_gpus``.
        placement: How base schedulers pick a pool: ``first-fit`` (the first
            pool with room, in the configured order) or ``fastest`` (Gavel-like,
            the fastest pool for the job's type with room).  Ignored without pools.
        costs: Preset of the cluster's per-event costs (:data:`COST_PRESETS`):
            ``free`` (default: preemption and evaluation cost nothing, as in the
            paper) or ``realistic``.
        restore_h: Hours of its GPUs a preempted job spends restoring its
            checkpoint when it restarts; None takes the ``costs`` preset's.
        eval_cost_h: Hours of its GPUs each eval checkpoint takes (the eval runs
            before its score is reported); None takes the ``costs`` preset's.
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
    curve_scale: str = "run"
    curve_split: str = "all"
    curve_noise: str = "recorded"
    curve_jitter: float = 0.0
    curve_warp: float = 0.0
    deliver: str = "final"
    pools: dict[str, int] | str | None = None
    placement: str = "first-fit"
    costs: str = "free"
    restore_h: float | None = None
    eval_cost_h: float | None = None

    def __post_init__(self) -> None:
        """Validate every field; raise :class:`ConfigError` naming the first bad one."""
        for name in (
            "num_gpus",
            "eval_noise",
            "hack_fraction",
            "load",
            "n_jobs",
            "eval_window",
            "restore_h",
            "eval_cost_h",
            "curve_jitter",
            "curve_warp",
        ):
            object.__setattr__(self, name, _plain(getattr(self, name)))
        if not is_integer(self.num_gpus) or not 1 <= self.num_gpus <= MAX_GPUS:
            raise ConfigError("num_gpus", self.num_gpus, f"an integer in [1, {MAX_GPUS}]")
        self._check_names()
        self._check_pools()
        k = get_calibration(self.calibration).evals_per_job
        wl = get_workload(self.workload)
        if self.eval_noise is not None:
            check_real("eval_noise", self.eval_noise, 0.0, MAX_EVAL_NOISE, "a standard deviation")
        if self.hack_fraction is not None:
            check_fraction("hack_fraction", self.hack_fraction)
        if self.load is not None:
            check_real("load", self.load, *LOAD_RANGE, "an offered load (e.g. 0.9)")
        if self.n_jobs is not None and (
            not is_integer(self.n_jobs) or not 1 <= self.n_jobs <= MAX_JOBS
        ):
            raise ConfigError("n_jobs", self.n_jobs, f"an integer in [1, {MAX_JOBS}] (or None)")
        if self.eval_window is not None and (
            not is_integer(self.eval_window) or not 1 <= self.eval_window <= k
        ):
            raise ConfigError(
                "eval_window",
                self.eval_window,
                f"an integer in [1, {k}] (the checkpoints a job declares), or None for all",
            )
        self._check_files(wl)
        self._check_costs()

    def _check_costs(self) -> None:
        """The cost preset is known and each cost is a duration in [0, MAX_EVENT_COST_H]."""
        if not isinstance(self.costs, str) or self.costs not in COST_PRESETS:
            raise ConfigError("costs", self.costs, f"one of {sorted(COST_PRESETS)}")
        for name in ("restore_h", "eval_cost_h"):
            v = getattr(self, name)
            if v is not None:
                check_real(name, v, 0.0, MAX_EVENT_COST_H, "hours of GPU time per event")

    def _check_names(self) -> None:
        """Names must be strings (or config objects) before they are looked up."""
        for name, kind in (
            ("workload", Workload),
            ("scheduler", None),
            ("calibration", Calibration),
            ("trace_cluster", None),
        ):
            v = getattr(self, name)
            if not isinstance(v, str) and not (kind is not None and isinstance(v, kind)):
                if name == "trace_cluster" and v is None:
                    continue
                raise ConfigError(name, v, "a name (a string)")
        if self.scheduler not in SCHEDULERS:
            raise ConfigError("scheduler", self.scheduler, f"one of {sorted(SCHEDULERS)}")
        if not isinstance(self.scheduler_options, dict):
            raise ConfigError("scheduler_options", self.scheduler_options, "a dict")
        make_scheduler(self.scheduler, **self.scheduler_options)  # validates the options
        if not isinstance(self.deliver, str) or self.deliver not in DELIVER_MODES:
            raise ConfigError("deliver", self.deliver, f"one of {list(DELIVER_MODES)}")

    def _check_curve_options(self) -> None:
        """The corpus replay's options: known values, and only with ``curves``."""
        from .real_curves import CURVE_NOISES, CURVE_SCALES, MAX_CURVE_JITTER

        for name, allowed in (
            ("curve_scale", CURVE_SCALES),
            ("curve_split", ("all", "train", "test")),
            ("curve_noise", CURVE_NOISES),
        ):
            v = getattr(self, name)
            if not isinstance(v, str) or v not in allowed:
                raise ConfigError(name, v, f"one of {list(allowed)}")
        check_real("curve_jitter", self.curve_jitter, 0.0, MAX_CURVE_JITTER, "a jitter in spreads")
        check_real("curve_warp", self.curve_warp, 0.0, MAX_CURVE_JITTER, "a warp in spreads")
        if self.curves is None:
            for name in ("curve_scale", "curve_split", "curve_noise", "curve_jitter", "curve_warp"):
                default = type(self).__dataclass_fields__[name].default
                if getattr(self, name) != default:
                    raise ConfigError(name, getattr(self, name), f"{default!r} without curves=PATH")

    def _check_files(self, wl: Workload) -> None:
        """The trace and the curve corpus: paths of existing, readable files."""
        self._check_curve_options()
        if self.curves is not None:
            if not (isinstance(self.curves, str | os.PathLike) and os.path.isfile(self.curves)):
                raise ConfigError("curves", self.curves, "an existing curve-trace JSONL file")
            from .real_curves import load_corpus  # reads and checks the corpus once (cached)

            load_corpus(self.curves, self.curve_split)
        if self.trace is None:
            if self.trace_cluster is not None:
                raise ConfigError("trace_cluster", self.trace_cluster, "only with trace=PATH")
            # Validates load (and the other overrides) through the Workload checks.
            self.resolved_workload()
            if self.pools is not None:
                self._check_pool_fits(wl)
            check_fits(wl, self.num_gpus)
        else:
            if not isinstance(self.trace, str | os.PathLike):
                raise ConfigError("trace", self.trace, "a path to a CSV in the Philly format")
            if not os.path.isfile(self.trace):
                raise ConfigError("trace", self.trace, "an existing CSV file")
            if self.load is not None:
                raise ConfigError("load", self.load, "None with trace= (a trace fixes arrivals)")

    def _check_pools(self) -> None:
        """``pools`` and ``placement``; with pools, ``num_gpus`` becomes their total."""
        if not isinstance(self.placement, str) or self.placement not in PLACEMENTS:
            raise ConfigError("placement", self.placement, f"one of {list(PLACEMENTS)}")
        if self.pools is None:
            return
        pools = resolve_pools(self.pools, MAX_GPUS)
        total = sum(p.size for p in pools)
        default = type(self).__dataclass_fields__["num_gpus"].default
        if self.num_gpus not in (default, total):
            raise ConfigError(
                "num_gpus", self.num_gpus, f"the pools' total ({total}) or left at its default"
            )
        object.__setattr__(self, "pools", {p.gpu_type: p.size for p in pools})
        object.__setattr__(self, "num_gpus", total)

    def _check_pool_fits(self, wl: Workload) -> None:
        """Every job the workload can draw fits in one pool (a gang never spans pools)."""
        largest = max(p.size for p in self.resolved_pools())
        try:
            check_fits(wl, largest)
        except ConfigError as e:
            raise ConfigError(
                "pools", self.pools, f"a pool of at least the largest job's GPUs ({e.allowed})"
            ) from None

    # -- resolved views -------------------------------------------------------
    def resolved_pools(self) -> tuple[Pool, ...] | None:
        """The typed pools (None for the homogeneous cluster)."""
        return None if self.pools is None else resolve_pools(self.pools, MAX_GPUS)

    def resolved_workload(self) -> Workload:
        """The workload preset with this config's overrides applied."""
        return with_overrides(
            get_workload(self.workload),
            hack_fraction=self.hack_fraction,
            load=self.load,
            n_jobs=self.n_jobs,
        )

    def resolved_calibration(self) -> Calibration:
        """The calibration object this config names."""
        return get_calibration(self.calibration)

    def resolved_eval_noise(self) -> float:
        """The eval noise in effect: given, else 0 on a corpus, else the calibration's."""
        if self.eval_noise is not None:
            return float(self.eval_noise)
        return 0.0 if self.curves is not None else float(self.resolved_calibration().eval_noise)

    def resolved_eval_window(self) -> int:
        """W in effect: given, else every checkpoint a job declares."""
        k = self.resolved_calibration().evals_per_job
        return k if self.eval_window is None else self.eval_window

    def resolved_costs(self) -> tuple[float, float]:
        """(restore_h, eval_cost_h) in effect: each given value, else the preset's."""
        restore, eval_cost = COST_PRESETS[self.costs]
        return (
            restore if self.restore_h is None else float(self.restore_h),
            eval_cost if self.eval_cost_h is None else float(self.eval_cost_h),
        )

    def make_scheduler(self) -> Scheduler:
        """A fresh base scheduler of this config (with its pool placement rule)."""
        scheduler = make_scheduler(self.scheduler, **self.scheduler_options)
        if self.placement != scheduler.placement:
            scheduler.placement = self.placement
        return scheduler
