"""Old module paths that moved, kept importable (with a DeprecationWarning) for users' code."""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from typing import Any


def forward(old: str, new: str) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``old`` that warns once and reads every name from ``new``."""
    warnings.warn(f"{old} moved to {new}; import it from there", DeprecationWarning, stacklevel=3)
    module = importlib.import_module(new)

    def __getattr__(name: str) -> Any:
        return getattr(module, name)

    return __getattr__
