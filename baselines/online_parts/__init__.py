"""The parts of the online stopper (:mod:`baselines.online`), one concept each.

:mod:`.scale` (:class:`~.scale.ScaleRule`, the map of a run's metric into eval units),
:mod:`.specs` (the package's stoppers by short name) and :mod:`.settings` (a run's
settings checked, and the observation layout a policy plays on).  The online module
re-exports their names.
"""
