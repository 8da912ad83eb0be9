"""The experiments of ``reproduce``, one module each, named by what they study.

:data:`EXPERIMENTS` is the run order: E7 first after E1-E5, because its corpus
is what E7's scores, E8 and E9 read; then the two ``background`` experiments
(E7's scores and E8), so that they run beside E6's training and the episodes;
E9 last, after the corpus and with the models of its own.  REPORT.md shows
them by :attr:`~evalstop_experiments.plan.Experiment.number` (:data:`REPORT_ORDER`).
A new experiment is a module exporting its ``Experiment`` and one line here.
"""

from __future__ import annotations

from ..plan import Experiment
from . import (
    cluster_learned,
    deprioritisation,
    generalisation,
    learned,
    paper,
    pools,
    real_curves,
    signals,
    sim_to_real,
    suite,
)

EXPERIMENTS: tuple[Experiment, ...] = (
    *paper.PAPER,
    real_curves.EXPERIMENT,
    real_curves.SCORES,
    suite.EXPERIMENT,
    learned.EXPERIMENT,
    pools.EXPERIMENT,
    deprioritisation.EXPERIMENT,
    generalisation.EXPERIMENT,
    signals.EXPERIMENT,
    cluster_learned.EXPERIMENT,
    sim_to_real.EXPERIMENT,
)

#: The experiments in REPORT.md's order (by number; E7's scores after E7).
REPORT_ORDER: tuple[Experiment, ...] = tuple(sorted(EXPERIMENTS, key=lambda e: e.number))

#: The ids ``--experiments`` accepts, with their titles, in the paper's order.
TITLES: dict[str, str] = {e.id: e.title for e in REPORT_ORDER if e.listed}

__all__ = ["EXPERIMENTS", "REPORT_ORDER", "TITLES"]
