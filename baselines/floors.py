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

The rules, their array scorers and their grids live in :mod:`.floors_parts`; this module
keeps the families (:class:`Family`, :data:`FLOOR_FAMILIES`), and every name the parts
define stays importable from here.
"""

# Re-exports: the parts' names stay importable from this module (its import path is the API).
# ruff: noqa: F401

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from .floors_parts import grids as _grids
from .floors_parts import rules as _rules
from .floors_parts import scorers as _scorers
from .floors_parts.grids import (
    AFTER_GRID,
    CUSUM_DRIFTS,
    CUSUM_THRESHOLDS,
    DROP_QUANTILES,
    GATE_QUANTILES,
    LEVEL_QUANTILES,
    PROGRESS_GRID,
    first_eval_means,
    grid_by_type,
    grid_cusum,
    grid_declines,
    grid_drop,
    grid_gain,
    grid_gate,
    grid_gated_cusum,
    grid_level,
    grid_loss,
    grid_patience,
    grid_stop_at,
)
from .floors_parts.rules import (
    TOL,
    DeclinesAfter,
    FirstEvalGate,
    GainRule,
    LevelRule,
    LossStall,
    Patience,
    RunningMaxDrop,
)
from .floors_parts.scorers import (
    EpisodeArrays,
    end_checkpoints,
    fires_cusum,
    fires_declines,
    fires_drop,
    fires_gain,
    fires_gate,
    fires_level,
    fires_loss,
    fires_patience,
    fires_stop_at,
    utilities,
)
from .policies import Policy

# The parts' private helpers, reachable here as before: assigned, since a module imports
# no other module's private name (tests/test_architecture.py).
_check_after = _rules._check_after
_check_count = _rules._check_count
_check_number = _rules._check_number
_gated = _rules._gated
_mean_last = _rules._mean_last
_col = _scorers._col
_gate = _scorers._gate
_by = _scorers._by
_mean_last_table = _scorers._mean_last_table
_best_age = _scorers._best_age
_loss_change_table = _scorers._loss_change_table
_rlhf = _grids._rlhf
_quantiles = _grids._quantiles


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
