"""RL Zoo's ``--conf-file baselines.hyperparams.dqn``: ``hyperparams`` is ``dqn.yml``."""

from . import module_getattr

__getattr__ = module_getattr("dqn")
