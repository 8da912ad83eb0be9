"""The parts of the backward-induction stopper (:mod:`baselines.backward`), one concept each.

:mod:`.features` (what a model reads of a decision: its features, its bucket and the
task settings), :mod:`.trees` (node arrays walked: the leaf each row reaches),
:mod:`.modelfile` (the model file's members, bounds and checks), :mod:`.model` (the
model: one tree ensemble per bucket, as arrays) and :mod:`.training` (Longstaff-Schwartz
backward induction).  The stopper's module re-exports their names.
"""
