"""Deprecated path of :mod:`baselines.training.domain_random` (moved there); old imports keep working."""

from ._moved import forward

__getattr__ = forward(__name__, "baselines.training.domain_random")
