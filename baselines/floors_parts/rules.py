"""The floors' rules as boundary policies: ``reset()``, ``act(obs) -> 0/1``, fields only.

:class:`FirstEvalGate`, :class:`RunningMaxDrop`, :class:`DeclinesAfter`,
:class:`LevelRule`, :class:`GainRule`, :class:`Patience` and :class:`LossStall`, RLHF runs
only, each gated by progress (within :data:`TOL`: progress travels as float32).  Their
array scorers (:mod:`.scorers`) decide as they do, decision for decision.
"""

from __future__ import annotations

import numpy as np

from evalstop_gym.errors import ConfigError
from evalstop_gym.sim.workloads import RLHF

from ..policies import Obs, need_field, observed

#: Progress comparisons carry this tolerance: progress travels as float32 (0.7 -> 0.69999).
TOL = 1e-6


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
