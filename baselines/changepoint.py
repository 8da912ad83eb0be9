"""A classical change-point detector on eval differences: one-sided CUSUM (Page, 1954).

With d_i = e_i - e_{i-1} the successive eval differences, the statistic
S_i = max(0, S_{i-1} - d_i - drift) accumulates evidence that the evals have
started to fall; the detector stops a job when S_i > threshold.  Unlike
EvalStop's "k declines in a row" it weighs how much each eval fell and
forgives an isolated rise.  ``drift`` and ``threshold`` (eval units) are tuned
on validation seeds (``evalstop_experiments.scoring``).
"""

from __future__ import annotations

import numpy as np

from evalstop_gym.errors import ConfigError
from evalstop_gym.sim.workloads import RLHF

from .policies import Obs, need_field, observed


def cusum_statistic(evals: np.ndarray, drift: float) -> float:
    """The CUSUM statistic for a downward shift after the evals ``evals`` (oldest first)."""
    s = 0.0
    for d in np.diff(np.asarray(evals, dtype=float)):
        s = max(0.0, s - d - drift)
    return s


class Cusum:
    """Stop when the CUSUM of eval declines exceeds ``threshold`` (every job type)."""

    def __init__(self, threshold: float = 0.1, drift: float = 0.0) -> None:
        """Validate the threshold (> 0) and the drift (>= 0), in eval units."""
        if not isinstance(threshold, int | float) or not threshold > 0:
            raise ConfigError("threshold", threshold, "a number > 0 (eval units)")
        if not isinstance(drift, int | float) or not drift >= 0:
            raise ConfigError("drift", drift, "a number >= 0 (eval units)")
        self.threshold, self.drift = float(threshold), float(drift)
        self.name = f"CUSUM-{threshold:g}/{drift:g}"

    def reset(self) -> None:
        """Stateless: the statistic is rebuilt from the observed window."""

    def act(self, obs: Obs) -> int:
        """1 when the statistic over the observed evals exceeds the threshold."""
        evals = observed(need_field(obs, "evals", self.name))
        return int(cusum_statistic(evals, self.drift) > self.threshold)

    def __repr__(self) -> str:
        """Its parameters."""
        return f"Cusum(threshold={self.threshold:g}, drift={self.drift:g})"


def cusum_table(evals: np.ndarray, drift: float) -> np.ndarray:
    """(n, K): column i - 1 the :func:`cusum_statistic` of each row's evals 1..i.

    The same recursion in the same float order, vectorised over rows (the
    array scorer of the tuned CUSUM families).
    """
    evals = np.asarray(evals, dtype=float)
    n, k = evals.shape
    out = np.zeros((n, k))
    s = np.zeros(n)
    for i in range(1, k):
        s = np.maximum(0.0, s - (evals[:, i] - evals[:, i - 1]) - drift)
        out[:, i] = s
    return out


class GatedCusum(Cusum):
    """:class:`Cusum` on RLHF runs only, and only at declared progress >= ``after``.

    A floor family (:mod:`baselines.floors`): a late change point is taken for
    a hacking run's decline.
    """

    def __init__(self, threshold: float = 0.1, drift: float = 0.0, after: float = 0.0) -> None:
        """Validate the threshold, the drift and the progress gate (in [0, 1])."""
        super().__init__(threshold, drift)
        if not isinstance(after, int | float) or not 0.0 <= after <= 1.0:
            raise ConfigError("after", after, "a progress in [0, 1]")
        self.after = float(after)
        self.name = f"GatedCUSUM-{threshold:g}/{drift:g}@{after:g}"

    def act(self, obs: Obs) -> int:
        """1 when an RLHF run past ``after`` has a statistic above the threshold."""
        if int(np.argmax(need_field(obs, "job_type", self.name))) != RLHF:
            return 0
        if float(need_field(obs, "progress", self.name)[0]) < self.after - 1e-6:
            return 0
        return super().act(obs)

    def __repr__(self) -> str:
        """Its parameters."""
        return (
            f"GatedCusum(threshold={self.threshold:g}, drift={self.drift:g}, after={self.after:g})"
        )
