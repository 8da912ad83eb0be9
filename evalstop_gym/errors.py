"""Errors raised for bad input.

Every message names the field, the value received and what is allowed, so a
researcher can fix a configuration without reading the source.
"""

from __future__ import annotations

from typing import Any


class ConfigError(ValueError):
    """A configuration value is outside what the simulator accepts."""

    def __init__(self, field: str, value: Any, allowed: str) -> None:
        """Name the offending field, its value and what is allowed."""
        self.field = field
        self.value = value
        self.allowed = allowed
        super().__init__(f"{field}={value!r} is not allowed: {allowed}")


class TraceError(ValueError):
    """A row of a cluster-trace CSV cannot be read."""

    def __init__(self, path: str, line: int, field: str, message: str) -> None:
        """Name the file, the line, the field and what is wrong."""
        self.path = path
        self.line = line
        self.field = field
        super().__init__(f"{path}, line {line}, field {field!r}: {message}")
