"""Heterogeneous GPU pools: GPU types, their relative speeds per job type, and placement.

A cluster is a set of typed *pools* (``SimConfig(pools={"a100": 32, "h100": 32})``).
A job is gang-allocated inside one pool (it never spans pools) and, while it
runs on a pool of speed ``s`` for its job type, its work advances at rate
``s``: an interval of ``w`` hours of work takes ``w / s`` wall-clock hours
there.  Durations of presets and traces are measured on the *reference* GPU
(speed 1 for every job type).  GPU-hours are billed in wall-clock GPU-hours.

The speed table
---------------
:data:`GPU_SPEEDS` gives, per GPU type, the relative throughput for LoRA, DPO
and RLHF fine-tuning, against an A100 (the reference, speed 1).  These are
**documented approximations** of relative speeds, chosen inside the ranges of
public figures, not measurements of ours:

* ``h100`` vs ``a100``: NVIDIA's H100 architecture whitepaper (2022) quotes
  up to 3x (dense BF16/FP16 Tensor-Core peak) and more with FP8; per-GPU
  MLPerf Training v2.1-v3.0 results (BERT, GPT-3 175B; 2022-2023) put H100 at
  about 1.5-2.6x an A100 in time to train.  Full-parameter DPO is the most
  compute-bound of our types (2.0); LoRA runs small, less utilised kernels
  (1.6); RLHF spends much of its time in autoregressive generation, bound by
  memory bandwidth (3.35 TB/s HBM3 vs 2.0 TB/s HBM2e: about 1.7).
* ``v100`` vs ``a100``: NVIDIA's A100 architecture whitepaper (2020) and
  MLPerf Training v0.7 (2020) put A100 at about 1.5-2.5x a V100 for
  mixed-precision transformer training (V100 has no BF16); memory bandwidth
  0.9 vs 2.0 TB/s bounds generation.  Hence 0.5 (LoRA), 0.4 (DPO), 0.45 (RLHF).
* ``gpu``: the generic reference type (speed 1 everywhere), what a homogeneous
  cluster (``pools=None``) is made of; ``pools={"gpu": 64}`` is that cluster.

Placement
---------
Which pool a job goes to is the base scheduler's choice
(:meth:`~evalstop_gym.sim.schedulers.Scheduler.pool_order`), so a new scheduler
still needs no engine change.  Two built-in rules (``SimConfig(placement=...)``):
``first-fit`` (heterogeneity-blind: the first pool with room, in the configured
order) and ``fastest`` (Gavel-like, Narayanan et al., OSDI 2020: the fastest
pool for the job's type that has room; ties keep the configured order).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, NamedTuple

from ..errors import ConfigError, is_integer
from .workloads import JOB_TYPES

#: The GPU type of a homogeneous cluster; preset and trace durations are measured on it.
REFERENCE_GPU = "gpu"

#: Relative speed (work per wall-clock hour) of each GPU type for LoRA, DPO, RLHF jobs,
#: against an A100 (= the reference).  Documented approximations: see the module docstring.
GPU_SPEEDS: dict[str, tuple[float, float, float]] = {
    REFERENCE_GPU: (1.0, 1.0, 1.0),
    "a100": (1.0, 1.0, 1.0),
    "h100": (1.6, 2.0, 1.7),
    "v100": (0.5, 0.4, 0.45),
}

#: Built-in placement rules (see the module docstring).
PLACEMENTS = ("first-fit", "fastest")


class Pool(NamedTuple):
    """One typed pool of the cluster: its GPU type, size and speed per job type."""

    gpu_type: str
    size: int
    speeds: tuple[float, ...]


class PoolChoice(NamedTuple):
    """A pool as a scheduler's :meth:`pool_order` sees it for one job."""

    gpu_type: str
    size: int
    #: Relative speed of this pool for the job's type.
    speed: float


#: A count in the text form: ASCII digits only (``str.isdigit`` also takes "²", which
#: ``int`` refuses), and few enough that ``int`` never meets its digit limit.
_COUNT = re.compile(r"[0-9]{1,12}")


def parse_pools(text: str) -> dict[str, Any]:
    """``"a100=32,h100=32"`` (the command line's form) as ``{"a100": 32, "h100": 32}``."""
    out: dict[str, Any] = {}
    for part in text.split(","):
        name, sep, size = part.partition("=")
        if not sep or _COUNT.fullmatch(size.strip()) is None:
            shown = text if len(text) <= 80 else text[:77] + "..."
            raise ConfigError("pools", shown, 'GPU type=count pairs, e.g. "a100=32,h100=32"')
        out[name.strip()] = int(size)
    return out


def resolve_pools(pools: Mapping[str, Any] | str, max_gpus: int) -> tuple[Pool, ...]:
    """Validate ``pools`` (GPU type -> size, or its text form) and return them in order.

    Raises:
        ConfigError: not a non-empty mapping of known GPU types to sizes in
            [1, ``max_gpus``] (total included).
    """
    if isinstance(pools, str):
        pools = parse_pools(pools)
    if not isinstance(pools, Mapping) or not pools:
        raise ConfigError(
            "pools", pools, 'a non-empty dict of GPU type -> GPU count, e.g. {"a100": 32}'
        )
    out = []
    for gpu_type, size in pools.items():
        if gpu_type not in GPU_SPEEDS:
            raise ConfigError(
                f"pools[{gpu_type!r}]", size, f"a GPU type among {sorted(GPU_SPEEDS)}"
            )
        if not is_integer(size) or not 1 <= size <= max_gpus:
            raise ConfigError(f"pools[{gpu_type!r}]", size, f"an integer in [1, {max_gpus}]")
        out.append(Pool(gpu_type, int(size), GPU_SPEEDS[gpu_type]))
    total = sum(p.size for p in out)
    if total > max_gpus:
        raise ConfigError("pools", dict(pools), f"at most {max_gpus} GPUs in total")
    return tuple(out)


def choices_for(pools: tuple[Pool, ...], job_type: int) -> tuple[PoolChoice, ...]:
    """The pools as seen by a job of type ``job_type`` (index into ``JOB_TYPES``)."""
    if not 0 <= job_type < len(JOB_TYPES):
        raise ValueError(f"job_type={job_type} is not one of 0..{len(JOB_TYPES) - 1}")
    return tuple(PoolChoice(p.gpu_type, p.size, p.speeds[job_type]) for p in pools)


def placement_order(placement: str, pools: tuple[PoolChoice, ...]) -> list[int]:
    """Pool indices in the order ``placement`` tries them."""
    idx = list(range(len(pools)))
    if placement == "fastest":
        idx.sort(key=lambda p: -pools[p].speed)  # stable: equal speeds keep the configured order
    elif placement != "first-fit":
        raise ConfigError("placement", placement, f"one of {list(PLACEMENTS)}")
    return idx
