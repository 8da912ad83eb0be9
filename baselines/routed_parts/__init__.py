"""The parts of the routed stopper (:mod:`baselines.routed`), one concept each.

:mod:`.evidence` (where a job adds its regime evidence, the regimes' probabilities and
the experts' averaged gain), :mod:`.forest` (several models' trees walked as one),
:mod:`.model` (the experts and classifiers, and their file) and :mod:`.training` (the
experts and the regime classifiers fitted).  The stoppers' module re-exports their names.
"""
