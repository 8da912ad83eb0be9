"""Workloads: which jobs arrive, when, how big and how long.

Every number of the synthetic presets is defined here, once, with where it
comes from.  The curve *shapes* are in :mod:`evalstop_gym.sim.calibration`.

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

import csv
import functools
import math
import os
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path

import numpy as np

from ..errors import ConfigError, TraceError

LORA, DPO, RLHF = 0, 1, 2
JOB_TYPES: tuple[str, ...] = ("lora", "dpo", "rlhf")

#: The tiny hand-made sample in the Philly format, shipped for unit tests and examples.
SAMPLE_TRACE = str(Path(__file__).with_name("data") / "philly_sample.csv")


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
        """E[GPUs x duration] of one job of this type, in closed form (log-normal mean)."""
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
        """Validate every field (ConfigError names the field)."""
        mix = self.type_mix
        if len(mix) != 3 or any(m < 0 for m in mix) or not math.isclose(sum(mix), 1.0):
            raise ConfigError(
                "type_mix", mix, "three non-negative fractions (LoRA, DPO, RLHF) summing to 1"
            )
        check_fraction("hack_fraction", self.hack_fraction)
        if not isinstance(self.load, int | float) or not self.load > 0 or math.isinf(self.load):
            raise ConfigError("load", self.load, "a finite offered load > 0 (e.g. 0.9)")
        if not isinstance(self.n_jobs, int) or isinstance(self.n_jobs, bool) or self.n_jobs < 1:
            raise ConfigError("n_jobs", self.n_jobs, "an integer >= 1")
        if self.estimate_log_sd < 0:
            raise ConfigError("estimate_log_sd", self.estimate_log_sd, "a number >= 0")

    def mean_gpu_hours(self) -> float:
        """E[GPUs x duration] of one job under this mix, in closed form."""
        return sum(m * p.mean_gpu_hours() for m, p in zip(self.type_mix, self.profiles))

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
    """Raise ConfigError unless ``value`` is a fraction in [0, 1]."""
    if not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
        raise ConfigError(name, value, "a fraction in [0, 1]")


WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        Workload("heavy-rlhf", (0.1, 0.1, 0.8)),
        Workload("balanced", (0.34, 0.33, 0.33)),
        Workload("light-rlhf", (0.45, 0.4, 0.15)),
    )
}

#: Job-type mix assigned to trace rows (a trace says nothing about job types):
#: the heavy-RLHF mix, so trace replays study the paper's setting.
TRACE_TYPE_MIX = WORKLOADS["heavy-rlhf"].type_mix


def get_workload(name: str | Workload) -> Workload:
    """Return a registered workload preset by name (or pass one through)."""
    if isinstance(name, Workload):
        return name
    if name not in WORKLOADS:
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


def _assign_types(
    rng: np.random.Generator, n: int, mix: tuple[float, ...], hack_fraction: float
) -> tuple[np.ndarray, np.ndarray]:
    types = rng.choice(3, size=n, p=np.asarray(mix) / sum(mix))
    hack_draw = rng.random(n)
    hacking = (types == RLHF) & (hack_draw < hack_fraction)
    return types.astype(np.int64), hacking


def generate_jobs(workload: Workload, num_gpus: int, rng: np.random.Generator) -> JobBatch:
    """Draw a synthetic episode: Poisson arrivals, types, sizes, durations."""
    n = workload.n_jobs
    check_fits(workload, num_gpus)
    rate = workload.arrival_rate(num_gpus)
    arrivals = np.cumsum(rng.exponential(1.0 / rate, size=n))
    arrivals -= arrivals[0]  # the first job arrives at t = 0
    types, hacking = _assign_types(rng, n, workload.type_mix, workload.hack_fraction)
    gpus = np.empty(n, dtype=np.int64)
    duration = np.empty(n)
    z = rng.standard_normal(n)
    gpu_u = rng.random(n)
    for t, prof in enumerate(workload.profiles):
        sel = types == t
        cdf = np.cumsum(prof.gpu_probs) / sum(prof.gpu_probs)
        gpus[sel] = np.asarray(prof.gpus)[np.searchsorted(cdf, gpu_u[sel], side="right")]
        duration[sel] = prof.duration_median_h * np.exp(prof.duration_log_sd * z[sel])
    estimate = duration * np.exp(workload.estimate_log_sd * rng.standard_normal(n))
    return JobBatch(arrivals, types, gpus, duration, estimate, hacking)


# --------------------------------------------------------------------------- traces


@dataclass(frozen=True)
class TraceRows:
    """Rows of a Philly-format trace, parsed and validated once."""

    path: str
    arrival_s: np.ndarray  # seconds since the first submission of the *file*
    duration_s: np.ndarray
    gpus: np.ndarray
    cluster: np.ndarray  # str
    line: np.ndarray  # 1-based line number in the file (header is line 1)


TRACE_COLUMNS = ("timestamp", "duration", "num_gpus", "cluster")


@functools.lru_cache(maxsize=4)
def _read_trace_cached(path: str, mtime_ns: int, size: int) -> TraceRows:
    del mtime_ns, size  # part of the cache key only: a changed file is re-read
    with open(path, newline="") as fh:
        reader = csv.reader(fh)
        try:
            header = next(reader)
        except StopIteration:
            raise TraceError(path, 1, "header", "the file is empty") from None
        col = {name.strip(): i for i, name in enumerate(header)}
        missing = [c for c in TRACE_COLUMNS if c not in col]
        if missing:
            raise TraceError(
                path, 1, missing[0], f"missing column; the header must hold {list(TRACE_COLUMNS)}"
            )
        its, idur, igpu, iclu = (col[c] for c in TRACE_COLUMNS)
        width = max(its, idur, igpu, iclu) + 1
        stamps: list[float] = []
        durs: list[float] = []
        gpus: list[int] = []
        clusters: list[str] = []
        lines: list[int] = []
        for lineno, row in enumerate(reader, start=2):
            if not row or all(not c.strip() for c in row):
                continue
            if len(row) < width:
                raise TraceError(path, lineno, "row", f"{len(row)} columns, expected {len(header)}")
            try:
                ts = datetime.fromisoformat(row[its].strip()).timestamp()
            except ValueError:
                raise TraceError(
                    path, lineno, "timestamp", f"{row[its]!r} is not 'YYYY-MM-DD HH:MM:SS'"
                ) from None
            try:
                dur = float(row[idur])
            except ValueError:
                dur = float("nan")
            if not (dur > 0 and math.isfinite(dur)):
                raise TraceError(
                    path, lineno, "duration", f"{row[idur]!r} is not a positive number of seconds"
                )
            try:
                g = int(row[igpu])
            except ValueError:
                g = 0
            if g < 1:
                raise TraceError(path, lineno, "num_gpus", f"{row[igpu]!r} is not an integer >= 1")
            cl = row[iclu].strip()
            if not cl:
                raise TraceError(path, lineno, "cluster", "empty virtual-cluster id")
            stamps.append(ts)
            durs.append(dur)
            gpus.append(g)
            clusters.append(cl)
            lines.append(lineno)
    if not stamps:
        raise TraceError(path, 2, "row", "the trace holds no job")
    ts_arr = np.asarray(stamps)
    return TraceRows(
        path=path,
        arrival_s=ts_arr - ts_arr.min(),
        duration_s=np.asarray(durs),
        gpus=np.asarray(gpus, dtype=np.int64),
        cluster=np.asarray(clusters),
        line=np.asarray(lines, dtype=np.int64),
    )


def read_trace(path: str | os.PathLike[str]) -> TraceRows:
    """Parse and validate a trace CSV in the Philly format (cached per file version).

    Raises:
        FileNotFoundError: the file does not exist.
        TraceError: a malformed row; the message names the file, line and field.
    """
    p = os.fspath(path)
    st = os.stat(p)
    return _read_trace_cached(os.path.abspath(p), st.st_mtime_ns, st.st_size)


def trace_jobs(
    path: str | os.PathLike[str],
    num_gpus: int,
    rng: np.random.Generator,
    *,
    cluster: str | None = None,
    n_jobs: int | None = None,
    hack_fraction: float = 0.6,
    type_mix: tuple[float, float, float] = TRACE_TYPE_MIX,
    estimate_log_sd: float = 0.5,
) -> JobBatch:
    """Replay a trace: arrivals, GPU demands and durations from the file.

    Jobs are taken in submission order (optionally one virtual cluster only, and
    the first ``n_jobs`` of them); job types and hack labels are drawn from
    ``type_mix`` and ``hack_fraction`` since a trace carries neither.
    """
    rows = read_trace(path)
    sel = np.arange(len(rows.arrival_s))
    if cluster is not None:
        sel = sel[rows.cluster == cluster]
        if len(sel) == 0:
            known = sorted(set(rows.cluster.tolist()))
            raise ConfigError("trace_cluster", cluster, f"a cluster of the trace: {known}")
    sel = sel[np.argsort(rows.arrival_s[sel], kind="stable")]
    if n_jobs is not None:
        if not isinstance(n_jobs, int) or n_jobs < 1:
            raise ConfigError("n_jobs", n_jobs, "an integer >= 1, or None for the whole trace")
        sel = sel[:n_jobs]
    too_big = sel[rows.gpus[sel] > num_gpus]
    if len(too_big):
        i = too_big[0]
        raise TraceError(
            rows.path,
            int(rows.line[i]),
            "num_gpus",
            f"{int(rows.gpus[i])} GPUs exceed the cluster's num_gpus={num_gpus}; "
            "use a larger cluster or filter with trace_cluster",
        )
    n = len(sel)
    arrival_h = (rows.arrival_s[sel] - rows.arrival_s[sel][0]) / 3600.0
    duration_h = rows.duration_s[sel] / 3600.0
    types, hacking = _assign_types(rng, n, type_mix, hack_fraction)
    estimate = duration_h * np.exp(estimate_log_sd * rng.standard_normal(n))
    return JobBatch(arrival_h, types, rows.gpus[sel].copy(), duration_h, estimate, hacking)


def with_overrides(workload: Workload, **overrides: object) -> Workload:
    """A copy of ``workload`` with the non-None ``overrides`` applied."""
    kw = {k: v for k, v in overrides.items() if v is not None}
    return replace(workload, **kw) if kw else workload
