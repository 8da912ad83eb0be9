"""Deprecated path of :mod:`baselines.training.native_vec` (moved there); old imports keep working."""

from ._moved import forward

__getattr__ = forward(__name__, "baselines.training.native_vec")
