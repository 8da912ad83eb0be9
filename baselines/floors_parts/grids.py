"""The floors' candidate grids, from validation data: each family's rules to tune over.

Each ``grid_*`` builds a family's candidates from the validation episodes
(:class:`~.scorers.EpisodeArrays`): fixed grids of progress gates and counts, thresholds
at quantiles of the RLHF runs' values.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import numpy as np

from evalstop_gym.sim.workloads import JOB_TYPES, RLHF

from ..changepoint import Cusum, GatedCusum
from ..policies import Policy, StopAtProgress
from .rules import (
    DeclinesAfter,
    FirstEvalGate,
    GainRule,
    LevelRule,
    LossStall,
    Patience,
    RunningMaxDrop,
)
from .scorers import EpisodeArrays

#: Progress gates the gated families try.
AFTER_GRID: tuple[float, ...] = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


#: Stop progresses of StopAt-p, the gate and stop-by-type.
PROGRESS_GRID: tuple[float, ...] = tuple(round(0.05 * i, 2) for i in range(1, 20))


#: Quantiles of the validation data that level, gain and drop thresholds sit at.
LEVEL_QUANTILES: tuple[float, ...] = (0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 0.98, 0.99)


DROP_QUANTILES: tuple[float, ...] = (0.2, 0.4, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 0.98, 0.995)


GATE_QUANTILES: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


CUSUM_THRESHOLDS: tuple[float, ...] = (0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 0.8)


CUSUM_DRIFTS: tuple[float, ...] = (0.0, 0.01, 0.03, 0.06)


def _rlhf(
    data: Sequence[EpisodeArrays], table: Callable[[EpisodeArrays], np.ndarray]
) -> np.ndarray:
    """``table(a)`` over the RLHF jobs of every validation episode, finite values pooled."""
    parts = [table(a)[a.job_type == RLHF].ravel() for a in data]
    x = np.concatenate(parts) if parts else np.zeros(0)
    return x[np.isfinite(x)]


def _quantiles(x: np.ndarray, qs: Sequence[float], fallback: Sequence[float]) -> list[float]:
    """Distinct quantiles of ``x`` (``fallback`` when there is no data)."""
    if not len(x):
        return list(fallback)
    return [float(v) for v in dict.fromkeys(np.quantile(x, qs).tolist())]


def grid_stop_at(data: Sequence[EpisodeArrays]) -> list[Policy]:
    """StopAt-p, RLHF runs, at every progress of :data:`PROGRESS_GRID`."""
    return [StopAtProgress(p) for p in PROGRESS_GRID]


def grid_gate(data: Sequence[EpisodeArrays]) -> list[Policy]:
    """Gates at every stop progress x early window x quantile of the first-eval means."""
    out: list[Policy] = []
    for early in (0.1, 0.2, 0.3):
        firsts = _rlhf(data, functools.partial(first_eval_means, FirstEvalGate(0.5, 0.0, early)))
        for t in _quantiles(firsts, GATE_QUANTILES, [0.0]):
            out += [FirstEvalGate(p, t, early) for p in PROGRESS_GRID[1::2]]
    return out


def first_eval_means(gate: FirstEvalGate, a: EpisodeArrays) -> np.ndarray:
    """(n,): each job's first-eval mean as ``gate`` reads it at the last checkpoint."""
    n_early = max(1, int(np.floor(gate.early * a.k / float(a.progress[-1]) + 1e-6)))
    return np.mean(a.evals32[:, : min(n_early, a.k)], axis=1).astype(float)


def grid_drop(data: Sequence[EpisodeArrays]) -> list[Policy]:
    """Drops at quantiles of the RLHF runs' positive drops x every progress gate."""
    drops = _rlhf(data, lambda a: np.maximum.accumulate(a.evals, axis=1) - a.evals)
    deltas = [d for d in _quantiles(drops[drops > 0], DROP_QUANTILES, [0.1]) if d > 0]
    return [RunningMaxDrop(d, p) for d in deltas for p in AFTER_GRID]


def grid_declines(data: Sequence[EpisodeArrays]) -> list[Policy]:
    """k = 1..6 consecutive declines x every progress gate."""
    return [DeclinesAfter(k, p) for k in range(1, 7) for p in AFTER_GRID]


def grid_level(data: Sequence[EpisodeArrays]) -> list[Policy]:
    """Levels at quantiles of the RLHF evals x m in 1, 2, 3, 5 x gates 0 .. 0.6."""
    levels = _quantiles(_rlhf(data, lambda a: a.evals), LEVEL_QUANTILES, [0.0])
    return [LevelRule(t, m, p) for t in levels for m in (1, 2, 3, 5) for p in AFTER_GRID[:7:2]]


def grid_gain(data: Sequence[EpisodeArrays]) -> list[Policy]:
    """Gains at quantiles of the RLHF runs' eval - first eval x m in 1, 3, 5 x gates."""
    gains = _quantiles(_rlhf(data, lambda a: a.evals - a.evals[:, :1]), LEVEL_QUANTILES, [0.0])
    return [GainRule(t, m, p) for t in gains for m in (1, 3, 5) for p in AFTER_GRID[:7:2]]


def grid_patience(data: Sequence[EpisodeArrays]) -> list[Policy]:
    """Patience 1 .. 8 checkpoints x every progress gate."""
    return [Patience(k, p) for k in (1, 2, 3, 4, 5, 6, 8) for p in AFTER_GRID]


def grid_gated_cusum(data: Sequence[EpisodeArrays]) -> list[Policy]:
    """Gated CUSUM: thresholds x drifts x gates 0 .. 0.8."""
    return [
        GatedCusum(h, d, p) for h in CUSUM_THRESHOLDS for d in CUSUM_DRIFTS for p in AFTER_GRID[::2]
    ]


def grid_loss(data: Sequence[EpisodeArrays]) -> list[Policy]:
    """Loss stalls: eps x m in 1, 2, 3, 5 x gates 0 .. 0.8."""
    eps = (0.0, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1)
    return [LossStall(e, m, p) for e in eps for m in (1, 2, 3, 5) for p in AFTER_GRID[::2]]


def grid_by_type(data: Sequence[EpisodeArrays]) -> list[Policy]:
    """Every job of one type (each of :data:`JOB_TYPES`) at every progress."""
    return [StopAtProgress(p, (t,)) for t in JOB_TYPES for p in PROGRESS_GRID]


def grid_cusum(data: Sequence[EpisodeArrays]) -> list[Policy]:
    """The classical CUSUM on every job type: thresholds x drifts."""
    return [Cusum(h, d) for h in CUSUM_THRESHOLDS for d in CUSUM_DRIFTS]
