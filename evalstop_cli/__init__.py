"""The ``evalstop-gym`` command line (``evalstop_cli.main:main``)."""

from __future__ import annotations

from typing import Any

__all__ = ["main"]


def __getattr__(name: str) -> Any:
    # Lazy: `python -m evalstop_cli.main` must find the module not yet imported (runpy warns
    # otherwise, once per spawned worker process too).
    if name == "main":
        from .main import main

        return main
    raise AttributeError(f"module 'evalstop_cli' has no attribute {name!r}")
