"""The scale a policy sees a run's metric in: :class:`ScaleRule`, an affine map into eval units.

Scale-dependent stoppers are tuned in the simulator's eval units (an RLHF run starts near
:data:`SIM_START` and gains about :data:`SIM_GAIN`); :meth:`ScaleRule.fit` fits one common
map from a set of runs.  :func:`is_number` is the finite-number check its fields and an
evaluation's value pass.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from evalstop_gym.errors import ConfigError

#: Where :meth:`ScaleRule.fit` puts a set of runs' median start and median gain: the
#: simulator's RLHF runs start at about 0.3 and gain about 0.6 eval units
#: (``evalstop_gym.sim.real_curves`` maps a corpus run's gold the same way).
SIM_START, SIM_GAIN = 0.3, 0.6


@dataclass(frozen=True)
class ScaleRule:
    """An affine map ``offset + factor * x`` of a (direction-adjusted) metric into eval units.

    Attributes:
        offset: Added after scaling.
        factor: Multiplies the metric; > 0, so that it keeps the metric's order.
    """

    offset: float = 0.0
    factor: float = 1.0

    def __post_init__(self) -> None:
        """Refuse a non-finite offset or a factor that is not a finite number > 0."""
        if not is_number(self.offset):
            raise ConfigError("scale.offset", self.offset, "a finite number")
        if not is_number(self.factor) or not self.factor > 0:
            raise ConfigError("scale.factor", self.factor, "a finite number > 0")
        object.__setattr__(self, "offset", float(self.offset))
        object.__setattr__(self, "factor", float(self.factor))

    def __call__(self, x: float) -> float:
        """``offset + factor * x``."""
        return self.offset + self.factor * x

    @property
    def is_identity(self) -> bool:
        """True for the map that changes nothing."""
        return self.offset == 0.0 and self.factor == 1.0

    @classmethod
    def fit(
        cls,
        runs: Iterable[Sequence[float]],
        *,
        greater_is_better: bool = True,
        start: float = SIM_START,
        gain: float = SIM_GAIN,
    ) -> ScaleRule:
        """One common map for a set of runs: median start -> ``start``, median gain -> ``gain``.

        A run's start is its first value, its gain its best value less its first
        (both after negating a lower-is-better metric).  Fit the map on runs other
        than the ones it will scale (earlier runs, a held-out set) and nothing of a
        run's own future enters its scaling.

        Raises:
            ConfigError: no run, an empty or non-finite run, or a median gain that is
                not > 0 (the runs never improve on their first value).
        """
        runs = [np.asarray(r, dtype=float) for r in runs]
        if not runs or any(r.ndim != 1 or r.size == 0 for r in runs):
            raise ConfigError("runs", len(runs), "at least one run, each a non-empty series")
        if not all(np.all(np.isfinite(r)) for r in runs):
            raise ConfigError("runs", "a non-finite value", "finite metric values")
        adjusted = [r if greater_is_better else -r for r in runs]
        starts = [float(a[0]) for a in adjusted]
        gains = [float(a.max()) - s for a, s in zip(adjusted, starts, strict=True)]
        med_start, med_gain = float(np.median(starts)), float(np.median(gains))
        if not med_gain > 0:
            raise ConfigError(
                "runs",
                f"median gain {med_gain:g} over {len(runs)} run(s)",
                "runs whose metric rises above its first value (a median gain > 0); "
                "check the metric's direction (greater_is_better)",
            )
        factor = gain / med_gain
        return cls(start - factor * med_start, factor)

    def to_dict(self) -> dict[str, float]:
        """``{"offset": ..., "factor": ...}``."""
        return {"offset": self.offset, "factor": self.factor}

    @classmethod
    def from_dict(cls, d: Any) -> ScaleRule:
        """The rule :meth:`to_dict` wrote."""
        if not isinstance(d, dict) or set(d) != {"offset", "factor"}:
            raise ConfigError("scale", d, "a dict with 'offset' and 'factor'")
        return cls(d["offset"], d["factor"])


def is_number(x: Any) -> bool:
    """A finite real number (a bool, numpy's too, is not one)."""
    return (
        isinstance(x, int | float | np.integer | np.floating)
        and not isinstance(x, bool | np.bool_)
        and math.isfinite(float(x))
    )
