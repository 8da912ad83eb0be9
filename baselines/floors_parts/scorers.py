"""The floors' array scorers: every job of an episode, every candidate, at once.

:class:`EpisodeArrays` holds every observed value of one episode as a policy sees it;
each ``fires_*`` decides as its rule (:mod:`.rules`) does, from the same values with the
same float operations.  Each returns fires (P, n, K - 1): whether candidate p stops job j
at its decision after checkpoint i (column i - 1, i = 1 .. K - 1; no decision follows the
last checkpoint).  :func:`end_checkpoints` and :func:`utilities` turn fires into where
each job ends and what that is worth.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from evalstop_gym.sim.workloads import JOB_TYPES, RLHF

from ..changepoint import Cusum, GatedCusum, cusum_table
from ..policies import Policy, StopAtProgress
from .rules import (
    TOL,
    DeclinesAfter,
    FirstEvalGate,
    GainRule,
    LevelRule,
    LossStall,
    Patience,
    RunningMaxDrop,
)


@dataclass(frozen=True)
class EpisodeArrays:
    """Every observed value of one episode, as a policy sees it (float32 values, as float64).

    With the whole history in view (``eval_window = K``), the evals a policy sees
    after checkpoint i are ``evals[j, :i]``.

    Attributes:
        evals: (n, K) the observed evals (float32, clipped, as in the observation).
        loss: (n, K) the observed losses (likewise).
        job_type: (n,) job type indices.
        progress: (K,) the declared progress after checkpoint i (float32 i/K).
        declines: (n, K) the ``consecutive_declines`` field after checkpoint i.
        evals32: (n, K) the evals as float32 (the first-eval gate averages those).
    """

    evals: np.ndarray
    loss: np.ndarray
    job_type: np.ndarray
    progress: np.ndarray
    declines: np.ndarray
    evals32: np.ndarray

    @property
    def k(self) -> int:
        """Checkpoints per job."""
        return self.evals.shape[1]


def _col(values: Sequence[float]) -> np.ndarray:
    """(P, 1, 1) parameters, broadcast against (n, K - 1) tables."""
    return np.asarray(values, dtype=float)[:, None, None]


def _gate(cands: Sequence[Policy], a: EpisodeArrays, attr: str = "after") -> np.ndarray:
    """(P, n, K - 1): RLHF run at declared progress >= each candidate's ``attr``."""
    prog = a.progress[None, None, :-1] >= _col([getattr(c, attr) for c in cands]) - TOL
    return prog & (a.job_type == RLHF)[None, :, None]


def _by(cands: Sequence[Policy], attr: str, table: Callable[[object], np.ndarray]) -> np.ndarray:
    """(P, n, K - 1): ``table(value)`` for each candidate's ``attr`` (each table built once)."""
    keys = [getattr(c, attr) for c in cands]
    built = {v: table(v)[:, :-1] for v in dict.fromkeys(keys)}
    return np.stack([built[v] for v in keys])


def _mean_last_table(evals: np.ndarray, m: int) -> np.ndarray:
    """(n, K): column i - 1 the mean of evals i - m + 1 .. i, summed oldest first (NaN before m)."""
    n, k = evals.shape
    out = np.full((n, k), np.nan)
    if m <= k:
        s = np.zeros((n, k - m + 1))
        for t in range(m):
            s = s + evals[:, t : k - m + 1 + t]
        out[:, m - 1 :] = s / m
    return out


def fires_stop_at(cands: Sequence[StopAtProgress], a: EpisodeArrays) -> np.ndarray:
    """:class:`~baselines.policies.StopAtProgress` (any job types) for every candidate."""
    prog = a.progress[None, None, :-1] >= _col([c.threshold for c in cands]) - 1e-6
    types = np.array([[t in c.job_types for t in JOB_TYPES] for c in cands]).reshape(
        -1, len(JOB_TYPES)
    )
    return prog & types[:, a.job_type][:, :, None]


def fires_gate(cands: Sequence[FirstEvalGate], a: EpisodeArrays) -> np.ndarray:
    """:class:`FirstEvalGate` for every candidate (np.mean of the float32 first evals)."""
    k = a.k

    def first_means(early: float) -> np.ndarray:
        out = np.empty(a.evals.shape)
        means: dict[int, np.ndarray] = {}
        for i in range(1, k + 1):
            progress = float(a.progress[i - 1])
            n_early = min(i, max(1, int(np.floor(early * i / progress + 1e-6))))
            if n_early not in means:
                means[n_early] = np.mean(a.evals32[:, :n_early], axis=1).astype(float)
            out[:, i - 1] = means[n_early]
        return out

    high = _by(cands, "early", first_means) > _col([c.threshold for c in cands])
    return _gate(cands, a, "stop_at") & high


def fires_drop(cands: Sequence[RunningMaxDrop], a: EpisodeArrays) -> np.ndarray:
    """:class:`RunningMaxDrop` for every candidate."""
    drop = (np.maximum.accumulate(a.evals, axis=1) - a.evals)[None, :, :-1]
    return _gate(cands, a) & (drop >= _col([c.delta for c in cands]))


def fires_declines(cands: Sequence[DeclinesAfter], a: EpisodeArrays) -> np.ndarray:
    """:class:`DeclinesAfter` for every candidate."""
    count = (a.declines + 0.5)[None, :, :-1]
    return _gate(cands, a) & (count >= _col([c.k for c in cands]))


def fires_level(cands: Sequence[LevelRule], a: EpisodeArrays) -> np.ndarray:
    """:class:`LevelRule` for every candidate (NaN before m evals: no stop)."""
    level = _by(cands, "m", lambda m: _mean_last_table(a.evals, m))
    return _gate(cands, a) & (level >= _col([c.theta for c in cands]))


def fires_gain(cands: Sequence[GainRule], a: EpisodeArrays) -> np.ndarray:
    """:class:`GainRule` for every candidate."""
    gain = _by(cands, "m", lambda m: _mean_last_table(a.evals, m) - a.evals[:, :1])
    return _gate(cands, a) & (gain >= _col([c.theta for c in cands]))


def _best_age(evals: np.ndarray) -> np.ndarray:
    """(n, K): checkpoints since the first maximum of evals 1..i (np.argmax's choice)."""
    n, k = evals.shape
    idx = np.arange(k)
    running = np.maximum.accumulate(evals, axis=1)[:, :-1]
    prev = np.concatenate([np.full((n, 1), -np.inf), running], axis=1)
    at = np.maximum.accumulate(np.where(evals > prev, idx, 0), axis=1)
    return idx[None, :] - at


def fires_patience(cands: Sequence[Patience], a: EpisodeArrays) -> np.ndarray:
    """:class:`Patience` for every candidate."""
    age = _best_age(a.evals)[None, :, :-1]
    return _gate(cands, a) & (age >= _col([c.patience for c in cands]))


def _loss_change_table(loss: np.ndarray, m: int) -> np.ndarray:
    """(n, K): (loss[i-1-m] - loss[i-1]) / loss[i-1-m], +inf where undefined (no stop)."""
    n, k = loss.shape
    out = np.full((n, k), np.inf)
    if m < k:
        before, now = loss[:, : k - m], loss[:, m:]
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = (before - now) / before
        out[:, m:] = np.where(before > 0, rel, np.inf)
    return out


def fires_loss(cands: Sequence[LossStall], a: EpisodeArrays) -> np.ndarray:
    """:class:`LossStall` for every candidate."""
    change = _by(cands, "m", lambda m: _loss_change_table(a.loss, m))
    return _gate(cands, a) & (change < _col([c.eps for c in cands]))


def fires_cusum(cands: Sequence[Cusum | GatedCusum], a: EpisodeArrays) -> np.ndarray:
    """:class:`~baselines.changepoint.Cusum` or :class:`~baselines.changepoint.GatedCusum`."""
    stat = _by(cands, "drift", lambda d: cusum_table(a.evals, d))
    fires = stat > _col([c.threshold for c in cands])
    if cands and isinstance(cands[0], GatedCusum):
        fires &= _gate(cands, a)
    return fires


def end_checkpoints(fires: np.ndarray) -> np.ndarray:
    """(P, n): the checkpoint after which each job ends (the first stop, else K)."""
    k = fires.shape[-1] + 1
    first = np.argmax(fires, axis=-1) + 1
    return np.where(fires.any(axis=-1), first, k)


def utilities(ends: np.ndarray, values: np.ndarray) -> np.ndarray:
    """(P,): sum_j values[j, end_j - 1] - values[j, 0], summed job after job.

    The cumulative sum adds the jobs in order, as the per-call reference
    (``offline_utility``) does, so the two agree bit for bit.
    """
    n = values.shape[0]
    if n == 0:
        return np.zeros(ends.shape[0])
    terms = values[np.arange(n)[None, :], ends - 1] - values[:, 0][None, :]
    return np.cumsum(terms, axis=1)[:, -1]
