"""RL Zoo's ``--conf-file baselines.hyperparams.recurrentppo``: ``hyperparams`` is its yml."""

from . import module_getattr

__getattr__ = module_getattr("recurrentppo")
