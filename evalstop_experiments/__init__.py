"""The experiment harness: the paper's experiments and ours, as cells and scores, run and reported.

The data path: :mod:`~evalstop_experiments.cells` (a policy on a setting) ->
:mod:`~evalstop_experiments.runner` (every (cell, seed), resumably) -> rows ->
:mod:`~evalstop_experiments.summary` (aggregation, CSV, the query layer) ->
each experiment's section -> :mod:`~evalstop_experiments.report` (REPORT.md) and
:mod:`~evalstop_experiments.plots`.  Stoppers scored on the benchmark suite
take :mod:`~evalstop_experiments.scoring`'s one path (:func:`score` scores your
own).  :mod:`~evalstop_experiments.experiments` holds one module per experiment,
:mod:`~evalstop_experiments.plan` what they are made of, and
:mod:`~evalstop_experiments.reproduce` runs them all.
"""

from .scoring import Comparison, ScoreRow, compare, compare_each, score

__all__ = ["Comparison", "ScoreRow", "compare", "compare_each", "score"]
