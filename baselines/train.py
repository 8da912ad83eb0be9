"""Deprecated path of :mod:`baselines.training.train` (moved there); old imports keep working."""

from ._moved import forward

__getattr__ = forward(__name__, "baselines.training.train")
