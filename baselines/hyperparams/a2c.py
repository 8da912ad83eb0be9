"""RL Zoo's ``--conf-file baselines.hyperparams.a2c``: ``hyperparams`` is ``a2c.yml``."""

from . import module_getattr

__getattr__ = module_getattr("a2c")
