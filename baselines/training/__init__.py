"""Training learned stoppers with Stable-Baselines3.

* :mod:`~baselines.training.train` — :class:`TrainConfig` (one run's settings, each field
  documented) and :func:`train`;
* :mod:`~baselines.training.zoo` — the RL Zoo hyperparameter files
  (``baselines/hyperparams/<algo>.yml``), read with literals only;
* :mod:`~baselines.training.native_vec` — SB3's ``VecEnv`` over the native batched env
  (``vec="native"``; imports SB3);
* :mod:`~baselines.training.domain_random` — a mixture of regimes to train on
  (``make_base_env``), and the padding that lets its models play narrower windows.

Importing this package imports neither torch nor Stable-Baselines3: :func:`train` does.
"""

from __future__ import annotations

from .train import TrainConfig, TrainResult, train
from .zoo import ALGOS, ZOO_KEYS, load_hyperparams, load_zoo_config

__all__ = [
    "ALGOS",
    "ZOO_KEYS",
    "TrainConfig",
    "TrainResult",
    "load_hyperparams",
    "load_zoo_config",
    "train",
]
