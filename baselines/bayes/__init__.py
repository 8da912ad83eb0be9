"""``BayesStopper`` (:mod:`.stopper`), its hypotheses (:mod:`.families`), its posterior
(:mod:`.posterior`) and the look-ahead's shortcut (:mod:`.shortcut`)."""

from . import posterior as _posterior
from .families import FUTURES, GRID, MODEL_JITTER, TOP_HYPOTHESES
from .posterior import TABLED_CHECKPOINTS
from .shortcut import SHORTCUT_MARGIN, SHORTCUT_STEPS
from .stopper import (
    EXACT_LOOKAHEAD,
    LOOKAHEAD_POINTS,
    NEAR_CHECKPOINTS,
    PROBE_QUANTILES,
    PROBE_STEPS,
    REAL_CURVE_NOISE,
    WINDOW,
    BayesStopper,
    assumed_eval_noise,
)

#: The C einsum the posterior calls (tests compare their sums with its bits).
_einsum = _posterior.einsum

__all__ = [
    "EXACT_LOOKAHEAD",
    "FUTURES",
    "GRID",
    "LOOKAHEAD_POINTS",
    "MODEL_JITTER",
    "NEAR_CHECKPOINTS",
    "PROBE_QUANTILES",
    "PROBE_STEPS",
    "REAL_CURVE_NOISE",
    "SHORTCUT_MARGIN",
    "SHORTCUT_STEPS",
    "TABLED_CHECKPOINTS",
    "TOP_HYPOTHESES",
    "WINDOW",
    "BayesStopper",
    "assumed_eval_noise",
]
