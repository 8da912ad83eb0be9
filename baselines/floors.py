"""Floors that catch exploits: a stopper that cannot beat them learned the calibration.

Each floor is a *family* of simple rules, tuned on validation seeds
(``evalstop_experiments.scoring``) per task and price.  A family is a
boundary policy class (``reset()``, ``act(obs) -> 0/1``, reading observation
fields only) and an array scorer that decides every job of an episode for
every parameter combination at once, from the same observed values the
policy reads (:class:`EpisodeArrays`), with the same float operations: the
two agree decision for decision (``tests/policies/test_floor_families.py``).

The families (:data:`FLOOR_FAMILIES`), RLHF runs only unless a family is about type:

* **StopAt-p** (:class:`~baselines.policies.StopAtProgress`): every RLHF run at
  one progress; it detects nothing.
* **First-eval gate** (:class:`FirstEvalGate`): at a fixed progress, if the
  first evals were high.  Nearly optimal where the early evals identify the
  label (``paper``: AUC ~1).
* **Running-max drop** (:class:`RunningMaxDrop`): the last eval is ``delta``
  below the running maximum, after progress ``after``.  Where no hacking run
  peaks early, "any fall late in the run is real" is a detector.
* **k declines after p0** (:class:`DeclinesAfter`): EvalStop's count, gated by progress.
* **Level** (:class:`LevelRule`): the mean of the last ``m`` evals reaches
  ``theta``.  Where a run reaches a high level only at a hacking peak, a
  threshold finds the peak.
* **Gain** (:class:`GainRule`): the same, measured from the run's first eval
  (a level rule that survives per-run offsets and scales).
* **Patience** (:class:`Patience`): no new best eval for ``patience``
  checkpoints, after ``after`` (early stopping's patience rule).
* **Gated CUSUM** (:class:`~baselines.changepoint.GatedCusum`): CUSUM of eval
  declines on RLHF runs after ``after``.
* **Loss stall** (:class:`LossStall`): the loss improved by less than ``eps``
  (relative) over the last ``m`` checkpoints, after ``after``.
* **Stop-by-type** (:class:`~baselines.policies.StopAtProgress` with one job
  type): every job of one type at one progress.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from evalstop_gym.errors import ConfigError
from evalstop_gym.sim.workloads import JOB_TYPES, RLHF

from .changepoint import Cusum, GatedCusum, cusum_table
from .policies import Obs, Policy, StopAtProgress, need_field, observed

#: Progress comparisons carry this tolerance: progress travels as float32 (0.7 -> 0.69999).
TOL = 1e-6


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


def _check_after(after: float) -> float:
    if not isinstance(after, int | float) or not 0.0 <= after <= 1.0:
        raise ConfigError("after", after, "a progress in [0, 1]")
    return float(after)


def _check_count(field: str, v: int, low: int = 1) -> int:
    if not isinstance(v, int) or isinstance(v, bool) or v < low:
        raise ConfigError(field, v, f"an integer >= {low}")
    return v


def _check_number(field: str, v: float, allowed: str = "a finite number") -> float:
    if not isinstance(v, int | float) or not np.isfinite(v):
        raise ConfigError(field, v, allowed)
    return float(v)


def _gated(obs: Obs, name: str, after: float) -> bool:
    """Whether the job is an RLHF run at declared progress >= ``after``."""
    if int(np.argmax(need_field(obs, "job_type", name))) != RLHF:
        return False
    return float(need_field(obs, "progress", name)[0]) >= after - TOL


def _mean_last(values: np.ndarray, m: int) -> float:
    """The mean of the last ``m`` values, summed oldest first (the array scorers' order)."""
    s = 0.0
    for v in values[len(values) - m :]:
        s += v
    return s / m


class FirstEvalGate:
    """Stop an RLHF run at progress ``stop_at`` if the mean of its first evals exceeds ``threshold``.

    The first evals are those at declared progress <= ``early`` (at least one),
    so the policy needs the whole history (``eval_window = K``).
    """

    def __init__(self, stop_at: float, threshold: float, early: float = 0.1) -> None:
        """Validate the stop progress, the threshold and the early window."""
        if not isinstance(stop_at, int | float) or not 0.0 < stop_at <= 1.0:
            raise ConfigError("stop_at", stop_at, "a progress in (0, 1]")
        if not isinstance(threshold, int | float) or np.isnan(threshold):
            raise ConfigError("threshold", threshold, "a number (-inf stops every RLHF run)")
        if not isinstance(early, int | float) or not 0.0 < early < 1.0:
            raise ConfigError("early", early, "a progress in (0, 1)")
        self.stop_at, self.threshold, self.early = float(stop_at), float(threshold), float(early)
        self.name = f"Gate-{stop_at:g}@{threshold:.3g}"

    def reset(self) -> None:
        """Stateless."""

    def act(self, obs: Obs) -> int:
        """Stop once at ``stop_at`` if the job is RLHF and its first evals were high."""
        progress = float(need_field(obs, "progress", self.name)[0])
        if int(np.argmax(need_field(obs, "job_type", self.name))) != RLHF:
            return 0
        if progress < self.stop_at - 1e-6:
            return 0
        return int(float(np.mean(self.first_evals(obs))) > self.threshold)

    def first_evals(self, obs: Obs) -> np.ndarray:
        """The observed evals at declared progress <= ``early`` (at least the first one)."""
        evals = observed(need_field(obs, "evals", self.name))
        progress = float(need_field(obs, "progress", self.name)[0])
        # n evals at `progress` means K = n / progress checkpoints in all.
        n_early = max(1, int(np.floor(self.early * len(evals) / progress + 1e-6)))
        return evals[:n_early]

    def __repr__(self) -> str:
        """Its parameters."""
        return f"FirstEvalGate({self.stop_at:g}, {self.threshold:g}, early={self.early:g})"


class RunningMaxDrop:
    """Stop an RLHF run when its last eval is ``delta`` or more below the running maximum.

    Only at declared progress >= ``after``: a late fall is taken for a hacking
    run's decline.
    """

    def __init__(self, delta: float, after: float = 0.0) -> None:
        """Validate the drop (> 0, eval units) and the progress gate."""
        if _check_number("delta", delta, "a number > 0 (eval units)") <= 0:
            raise ConfigError("delta", delta, "a number > 0 (eval units)")
        self.delta, self.after = float(delta), _check_after(after)
        self.name = f"Drop-{delta:.3g}@{after:g}"

    def reset(self) -> None:
        """Stateless: the running maximum is rebuilt from the observed history."""

    def act(self, obs: Obs) -> int:
        """1 once the last eval is ``delta`` below the best so far, after ``after``."""
        if not _gated(obs, self.name, self.after):
            return 0
        ev = np.asarray(observed(need_field(obs, "evals", self.name)), dtype=float)
        return int(ev.max() - ev[-1] >= self.delta)

    def __repr__(self) -> str:
        """Its parameters."""
        return f"RunningMaxDrop(delta={self.delta:g}, after={self.after:g})"


class DeclinesAfter:
    """Stop an RLHF run after ``k`` consecutive eval declines, at progress >= ``after``."""

    def __init__(self, k: int, after: float = 0.0) -> None:
        """Validate the count (>= 1) and the progress gate."""
        self.k, self.after = _check_count("k", k), _check_after(after)
        self.name = f"Declines-{k}@{after:g}"

    def reset(self) -> None:
        """Stateless."""

    def act(self, obs: Obs) -> int:
        """1 once the job's consecutive declines reach ``k`` after ``after``."""
        if not _gated(obs, self.name, self.after):
            return 0
        # +0.5: the count travels as float32; compare robustly to the integer k.
        return int(need_field(obs, "consecutive_declines", self.name)[0] + 0.5 >= self.k)

    def __repr__(self) -> str:
        """Its parameters."""
        return f"DeclinesAfter(k={self.k}, after={self.after:g})"


class LevelRule:
    """Stop an RLHF run when the mean of its last ``m`` evals reaches ``theta``, after ``after``."""

    def __init__(self, theta: float, m: int = 1, after: float = 0.0) -> None:
        """Validate the level (eval units), the window m (>= 1) and the progress gate."""
        self.theta = _check_number("theta", theta)
        self.m, self.after = _check_count("m", m), _check_after(after)
        self.name = f"Level-{theta:.3g}/{m}@{after:g}"

    def reset(self) -> None:
        """Stateless."""

    def act(self, obs: Obs) -> int:
        """1 once ``m`` evals are in view and their mean is >= ``theta``."""
        if not _gated(obs, self.name, self.after):
            return 0
        ev = np.asarray(observed(need_field(obs, "evals", self.name)), dtype=float)
        return int(len(ev) >= self.m and _mean_last(ev, self.m) >= self.theta)

    def __repr__(self) -> str:
        """Its parameters."""
        return f"LevelRule(theta={self.theta:g}, m={self.m}, after={self.after:g})"


class GainRule:
    """Stop an RLHF run when the mean of its last ``m`` evals is ``theta`` above its first eval."""

    def __init__(self, theta: float, m: int = 1, after: float = 0.0) -> None:
        """Validate the gain (eval units), the window m (>= 1) and the progress gate."""
        self.theta = _check_number("theta", theta)
        self.m, self.after = _check_count("m", m), _check_after(after)
        self.name = f"Gain-{theta:.3g}/{m}@{after:g}"

    def reset(self) -> None:
        """Stateless."""

    def act(self, obs: Obs) -> int:
        """1 once ``m`` evals are in view and their mean is >= first eval + ``theta``."""
        if not _gated(obs, self.name, self.after):
            return 0
        ev = np.asarray(observed(need_field(obs, "evals", self.name)), dtype=float)
        return int(len(ev) >= self.m and _mean_last(ev, self.m) - ev[0] >= self.theta)

    def __repr__(self) -> str:
        """Its parameters."""
        return f"GainRule(theta={self.theta:g}, m={self.m}, after={self.after:g})"


class Patience:
    """Stop an RLHF run when its best eval is ``patience`` checkpoints old, after ``after``.

    The best is the first checkpoint holding the maximum (a later one must beat
    it strictly), as early stopping's patience counts.
    """

    def __init__(self, patience: int, after: float = 0.0) -> None:
        """Validate the patience (>= 1 checkpoints) and the progress gate."""
        self.patience, self.after = _check_count("patience", patience), _check_after(after)
        self.name = f"Patience-{patience}@{after:g}"

    def reset(self) -> None:
        """Stateless."""

    def act(self, obs: Obs) -> int:
        """1 once no eval has beaten the best for ``patience`` checkpoints."""
        if not _gated(obs, self.name, self.after):
            return 0
        ev = np.asarray(observed(need_field(obs, "evals", self.name)), dtype=float)
        return int(len(ev) - 1 - int(np.argmax(ev)) >= self.patience)

    def __repr__(self) -> str:
        """Its parameters."""
        return f"Patience(patience={self.patience}, after={self.after:g})"


class LossStall:
    """Stop an RLHF run when its loss fell by less than ``eps`` (relative) over ``m`` checkpoints.

    :class:`~baselines.policies.LossPlateau` on RLHF runs only, after ``after``.
    """

    def __init__(self, eps: float, m: int = 3, after: float = 0.0) -> None:
        """Validate the tolerance (>= 0), the window m (>= 1) and the progress gate."""
        self.eps = _check_number("eps", eps, "a number >= 0")
        if self.eps < 0:
            raise ConfigError("eps", eps, "a number >= 0")
        self.m, self.after = _check_count("m", m), _check_after(after)
        self.name = f"LossStall-{eps:g}/{m}@{after:g}"

    def reset(self) -> None:
        """Stateless."""

    def act(self, obs: Obs) -> int:
        """1 once (loss[-1-m] - loss[-1]) / loss[-1-m] < ``eps`` (a positive loss m back)."""
        if not _gated(obs, self.name, self.after):
            return 0
        loss = np.asarray(observed(need_field(obs, "loss", self.name)), dtype=float)
        if len(loss) <= self.m:
            return 0
        before, now = loss[-1 - self.m], loss[-1]
        return int(before > 0 and (before - now) / before < self.eps)

    def __repr__(self) -> str:
        """Its parameters."""
        return f"LossStall(eps={self.eps:g}, m={self.m}, after={self.after:g})"


# ---------------------------------------------------------------- array scorers
#
# Each returns fires (P, n, K - 1): whether candidate p stops job j at its
# decision after checkpoint i (column i - 1, i = 1 .. K - 1; no decision
# follows the last checkpoint).


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


# ---------------------------------------------------------------- the families and their grids

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


@dataclass(frozen=True)
class Family:
    """A rule family: its name, its candidates from validation data, and its array scorer.

    Attributes:
        key: Its identity (the suite's stopper kind).
        label: Its display name ("<label> (tuned)" in tables).
        grid: ``grid(validation arrays) -> candidate policies``.
        fires: ``fires(candidates, arrays) -> (P, n, K - 1)`` stop decisions.
        floor: Whether it competes for the suite's "Best floor" (a detector such as
            the classical CUSUM on every job type does not).
    """

    key: str
    label: str
    grid: Callable[[Sequence[EpisodeArrays]], list[Policy]]
    fires: Callable[[Sequence, EpisodeArrays], np.ndarray]
    floor: bool = True

    def ends(self, candidates: Sequence[Policy], a: EpisodeArrays) -> np.ndarray:
        """(P, n): where each candidate ends each job of the episode."""
        return end_checkpoints(self.fires(candidates, a))


#: Every floor family of the suite, and the classical CUSUM (a detector, tuned the same way).
FLOOR_FAMILIES: tuple[Family, ...] = (
    Family("StopAtTuned", "StopAt", grid_stop_at, fires_stop_at),
    Family("GateTuned", "Gate", grid_gate, fires_gate),
    Family("DropTuned", "Running-max drop", grid_drop, fires_drop),
    Family("DeclinesTuned", "Declines after p0", grid_declines, fires_declines),
    Family("LevelTuned", "Level", grid_level, fires_level),
    Family("GainTuned", "Gain", grid_gain, fires_gain),
    Family("PatienceTuned", "Patience", grid_patience, fires_patience),
    Family("GatedCusumTuned", "Gated CUSUM", grid_gated_cusum, fires_cusum),
    Family("LossStallTuned", "Loss stall", grid_loss, fires_loss),
    Family("ByTypeTuned", "Stop-by-type", grid_by_type, fires_stop_at),
    Family("CusumTuned", "CUSUM", grid_cusum, fires_cusum, floor=False),
)
