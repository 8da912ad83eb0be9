"""The parts of the floor families (:mod:`baselines.floors`), one concept each.

:mod:`.rules` (each floor as a boundary policy), :mod:`.scorers` (their array scorers
over an episode's :class:`~.scorers.EpisodeArrays`, and the utilities of where they end
the jobs) and :mod:`.grids` (each family's candidates from validation data).  The floors
module re-exports their names.
"""
