"""The parts of E12 (:mod:`evalstop_experiments.experiments.signals`), one concept each.

:mod:`.runs` (a side of the split as the detectors see it, and what stopping it gives),
:mod:`.tuning` (the detectors tuned on the train runs), :mod:`.detection` (their
figures on the test runs, with bootstrap CIs) and :mod:`.scores` (their normalised score
on the held-out runs as a corpus task).  The experiment module re-exports their names.
"""
