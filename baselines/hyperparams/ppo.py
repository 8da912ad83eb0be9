"""RL Zoo's ``--conf-file baselines.hyperparams.ppo``: ``hyperparams`` is ``ppo.yml``."""

from . import module_getattr

__getattr__ = module_getattr("ppo")
