"""Workloads: which jobs arrive, when, how big and how long.

Every number of the synthetic presets is defined here, once, with where it
comes from.  The curve *shapes* are in :mod:`evalstop_gym.sim.calibration`;
jobs replayed from a trace file, in :mod:`evalstop_gym.sim.traces`.

Sources and assumptions (see ``docs/CALIBRATION.md`` for the discussion):

* Job mix of ``heavy-rlhf`` (80 % RLHF, 60 % of RLHF runs hack): the EvalStop
  paper's main setting.  ``balanced`` and ``light-rlhf`` are our own points on
  either side of it (the paper names the heavy setting only).
* GPU demands: LoRA adapters fit on 1-4 GPUs, DPO on a node (4-8), RLHF needs
  policy, reference, reward and value models and takes 8-16 GPUs (one or two
  8-GPU nodes).  Assumptions typical of 7B-13B fine-tuning, not measured.
* Durations are log-normal: median LoRA 1.5 h, DPO 4 h, RLHF 10 h, log-sd
  0.5-0.7.  The heavy tail matches the shape of production traces (the
  Philly trace's run times are log-normal-like over four decades).
* Duration estimates seen by the ``-est`` schedulers are true x LogNormal(0,
  0.5): user-declared run times are known to be off by about a factor 1.5-2
  (Tiresias, NSDI'19, section 2).
* Arrivals are Poisson at an offered load rho = arrival rate x E[GPUs x
  duration] / cluster GPUs, computed in closed form from the distributions
  above; rho = 0.9 by default, so that a queue forms and the scheduler (and
  stopping) changes JCT.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..errors import ConfigError, check_real, is_integer, is_real

#: Offered load: at 1e-3 a 200-job episode already spans decades of simulated time, at 1e3
#: every job arrives at once; outside, arrival times stop being meaningful (at 5e-324 they are
#: NaN).
LOAD_RANGE = (1e-3, 1e3)

LORA, DPO, RLHF = 0, 1, 2
JOB_TYPES: tuple[str, ...] = ("lora", "dpo", "rlhf")


@dataclass(frozen=True)
class TypeProfile:
    """Size and length of one job type.

    Attributes:
        gpus: GPU demands this type can have.
        gpu_probs: Probability of each demand in ``gpus``.
        duration_median_h: Median true run time in hours.
        duration_log_sd: Standard deviation of ln(run time).
    """

    gpus: tuple[int, ...]
    gpu_probs: tuple[float, ...]
    duration_median_h: float
    duration_log_sd: float

    def mean_gpu_hours(self) -> float:
        """E[GPUs x duration] of one job of this type (log-normal mean)."""
        mean_g = float(np.dot(self.gpus, self.gpu_probs))
        return mean_g * self.duration_median_h * math.exp(self.duration_log_sd**2 / 2)


DEFAULT_PROFILES: tuple[TypeProfile, TypeProfile, TypeProfile] = (
    TypeProfile((1, 2, 4), (0.5, 0.3, 0.2), 1.5, 0.7),  # LoRA
    TypeProfile((4, 8), (0.4, 0.6), 4.0, 0.6),  # DPO
    TypeProfile((8, 16), (0.6, 0.4), 10.0, 0.5),  # RLHF
)


@dataclass(frozen=True)
class Workload:
    """A synthetic workload preset (all fields overridable).

    Attributes:
        name: Preset name.
        type_mix: Fractions of LoRA, DPO and RLHF jobs (sum to 1).
        hack_fraction: Fraction of RLHF runs that reward-hack.
        load: Offered load rho (see module docstring); > 0.
        n_jobs: Jobs per episode.
        estimate_log_sd: Log-sd of the duration-estimate error.
        profiles: Size and length of each type, in LoRA, DPO, RLHF order.
    """

    name: str
    type_mix: tuple[float, float, float]
    hack_fraction: float = 0.6
    load: float = 0.9
    n_jobs: int = 200
    estimate_log_sd: float = 0.5
    profiles: tuple[TypeProfile, TypeProfile, TypeProfile] = field(default=DEFAULT_PROFILES)

    def __post_init__(self) -> None:
        """Validate the preset; raise ConfigError naming the first bad field."""
        mix = self.type_mix
        if len(mix) != 3 or any(m < 0 for m in mix) or not math.isclose(sum(mix), 1.0):
            raise ConfigError(
                "type_mix", mix, "three non-negative fractions (LoRA, DPO, RLHF) summing to 1"
            )
        check_fraction("hack_fraction", self.hack_fraction)
        check_real("load", self.load, *LOAD_RANGE, "an offered load (e.g. 0.9)")
        if not is_integer(self.n_jobs) or self.n_jobs < 1:
            raise ConfigError("n_jobs", self.n_jobs, "an integer >= 1")
        if self.estimate_log_sd < 0:
            raise ConfigError("estimate_log_sd", self.estimate_log_sd, "a number >= 0")

    def mean_gpu_hours(self) -> float:
        """E[GPUs x duration] of one job under this mix, in closed form."""
        return _mean_gpu_hours(self.type_mix, self.profiles)

    def arrival_rate(self, num_gpus: int) -> float:
        """Jobs per hour that offer ``load`` x ``num_gpus`` GPUs of work."""
        return self.load * num_gpus / self.mean_gpu_hours()


def check_fits(workload: Workload, num_gpus: int) -> None:
    """Refuse a cluster smaller than the largest job the workload can draw."""
    for t, prof in enumerate(workload.profiles):
        if workload.type_mix[t] > 0 and max(prof.gpus) > num_gpus:
            raise ConfigError(
                "num_gpus",
                num_gpus,
                f">= {max(prof.gpus)}: {JOB_TYPES[t]} jobs of workload "
                f"{workload.name!r} may ask for {max(prof.gpus)} GPUs",
            )


def check_fraction(name: str, value: float) -> None:
    """Refuse anything but a real number in [0, 1] (a bool is not a fraction)."""
    if not is_real(value) or not 0.0 <= value <= 1.0:
        raise ConfigError(name, value, "a fraction in [0, 1]")


WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        Workload("heavy-rlhf", (0.1, 0.1, 0.8)),
        Workload("balanced", (0.34, 0.33, 0.33)),
        Workload("light-rlhf", (0.45, 0.4, 0.15)),
    )
}


def get_workload(name: str | Workload) -> Workload:
    """Return a preset by name (or pass a Workload through)."""
    if isinstance(name, Workload):
        return name
    if not isinstance(name, str) or name not in WORKLOADS:
        raise ConfigError("workload", name, f"one of {sorted(WORKLOADS)}")
    return WORKLOADS[name]


@dataclass
class JobBatch:
    """The static description of an episode's jobs, as parallel arrays.

    ``duration_h`` and ``hacking`` are hidden from policies; the engine keeps
    them on the job and only metrics read them.
    """

    arrival_h: np.ndarray
    job_type: np.ndarray
    gpus: np.ndarray
    duration_h: np.ndarray
    estimate_h: np.ndarray
    hacking: np.ndarray

    def __len__(self) -> int:
        """Number of jobs."""
        return len(self.arrival_h)


def assign_types(
    rng: np.random.Generator, n: int, mix: tuple[float, ...], hack_fraction: float
) -> tuple[np.ndarray, np.ndarray]:
    """Job types drawn from ``mix`` and hack labels (RLHF jobs only), from two U[0, 1) rows.

    ``rng.choice(3, size=n, p=p)`` is ``cdf.searchsorted(rng.random(n), side="right")``
    with ``cdf = p.cumsum() / its last value``; drawing its uniforms and the hack
    draws in one ``random`` call gives the very same numbers, without
    ``choice``'s checks of ``p`` (the workload checked the mix).
    """
    cdf = _type_cdf(mix)
    u = rng.random((2, n))
    types = cdf.searchsorted(u[0], side="right")
    hacking = (types == RLHF) & (u[1] < hack_fraction)
    return types.astype(np.int64, copy=False), hacking


def step_time_fractions(
    n_jobs: int, n_ckpt: int, jitter: float, rng: np.random.Generator
) -> np.ndarray | None:
    """Cumulative fraction of each job's work done at each checkpoint, or None when even.

    Interval i of job j lasts in proportion to exp(jitter x z_ij), z standard normal; the
    cumulative sums are normalised so that checkpoint K falls exactly at the job's end.
    ``jitter = 0`` returns None (and draws nothing): checkpoints are then at i/K exactly.
    """
    if jitter == 0:
        return None
    width = np.exp(jitter * rng.standard_normal((n_jobs, n_ckpt)))
    frac = np.cumsum(width, axis=1)
    frac /= frac[:, -1:]
    frac[:, -1] = 1.0
    return frac


def cache_if_hashable(maxsize: int) -> Any:
    """``functools.lru_cache(maxsize)`` that calls the function uncached on unhashable arguments.

    For per-episode lookups built from a workload or calibration: the presets
    are immutable and hashable, but a hand-built one may hold lists.
    """

    def decorate(fn: Any) -> Any:
        cached = functools.lru_cache(maxsize=maxsize)(fn)

        @functools.wraps(fn)
        def call(*args: Any) -> Any:
            try:
                return cached(*args)
            except TypeError:  # an unhashable argument: no cache
                return fn(*args)

        return call

    return decorate


@cache_if_hashable(maxsize=64)
def _mean_gpu_hours(type_mix: tuple[float, ...], profiles: tuple[TypeProfile, ...]) -> float:
    """:meth:`Workload.mean_gpu_hours`, computed once per mix and profiles (both immutable)."""
    return sum(m * p.mean_gpu_hours() for m, p in zip(type_mix, profiles))


@cache_if_hashable(maxsize=64)
def _type_cdf(mix: tuple[float, ...]) -> np.ndarray:
    """The job-type cdf :func:`assign_types` searches, computed once per mix (read-only)."""
    cdf = (np.asarray(mix) / sum(mix)).cumsum()
    cdf /= cdf[-1]
    cdf.flags.writeable = False
    return cdf


@dataclass(frozen=True)
class _SizePlan:
    """Per-type lookup arrays of a workload's sizes and durations (indexed by job type).

    ``cdf[t]`` is type t's GPU-demand cdf padded with +inf, ``gpus[t]`` its
    demands padded with the last one, so that counting the cdf values <= u
    is ``searchsorted(cdf, u, side="right")`` for every type at once.
    """

    cdf: np.ndarray
    gpus: np.ndarray
    median: np.ndarray
    log_sd: np.ndarray


@cache_if_hashable(maxsize=64)
def _size_plan(profiles: tuple[TypeProfile, ...]) -> _SizePlan:
    """The :class:`_SizePlan` of a workload's profiles (cached: they are immutable)."""
    width = max(len(p.gpus) for p in profiles)
    cdf = np.full((len(profiles), width), np.inf)
    gpus = np.empty((len(profiles), width + 1), dtype=np.int64)
    for t, prof in enumerate(profiles):
        # The same operations as a per-type draw, so the same cdf bits.
        cdf[t, : len(prof.gpus)] = np.cumsum(prof.gpu_probs) / sum(prof.gpu_probs)
        gpus[t, : len(prof.gpus)] = prof.gpus
        gpus[t, len(prof.gpus) :] = prof.gpus[-1]
    return _SizePlan(
        cdf=cdf,
        gpus=gpus,
        median=np.array([p.duration_median_h for p in profiles]),
        log_sd=np.array([p.duration_log_sd for p in profiles]),
    )


def generate_jobs(workload: Workload, num_gpus: int, rng: np.random.Generator) -> JobBatch:
    """Draw a synthetic episode: Poisson arrivals, types, sizes, durations.

    Each job's size and duration is computed elementwise with its own type's
    parameters, looked up by type: the same float operations as one pass
    per type, so the same numbers, in a handful of array operations.
    """
    n = workload.n_jobs
    check_fits(workload, num_gpus)
    plan = _size_plan(workload.profiles)
    rate = workload.arrival_rate(num_gpus)
    arrivals = np.cumsum(rng.exponential(1.0 / rate, size=n))
    arrivals -= arrivals[0]  # the first job arrives at t = 0
    types, hacking = assign_types(rng, n, workload.type_mix, workload.hack_fraction)
    z = rng.standard_normal(n)
    gpu_u = rng.random(n)
    # A u past a cdf that rounds below 1 takes the type's last demand.  The count of
    # cdf values <= u, column by column over the comparisons' bytes (0 or 1): the
    # integers of ``.sum(axis=1)`` without its reduction along a short axis.
    below = (plan.cdf[types] <= gpu_u[:, None]).view(np.uint8)
    pick = below[:, 0].astype(np.intp)
    for col in range(1, below.shape[1]):
        pick += below[:, col]
    gpus = plan.gpus[types, pick]
    duration = plan.median[types] * np.exp(plan.log_sd[types] * z)
    estimate = duration * np.exp(workload.estimate_log_sd * rng.standard_normal(n))
    return JobBatch(arrivals, types, gpus, duration, estimate, hacking)


def with_overrides(workload: Workload, **overrides: object) -> Workload:
    """A copy of ``workload`` with the non-None ``overrides`` applied."""
    kw = {k: v for k, v in overrides.items() if v is not None}
    return replace(workload, **kw) if kw else workload
