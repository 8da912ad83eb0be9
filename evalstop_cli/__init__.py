"""The ``evalstop-gym`` command line (``evalstop_cli.main:main``)."""

from __future__ import annotations

from .main import main

__all__ = ["main"]
