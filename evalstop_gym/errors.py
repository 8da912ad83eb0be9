"""Errors raised for bad input.

Every message names the field, the value received and what is allowed, so a
researcher can fix a configuration without reading the source.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class EvalStopError(ValueError):
    """Base of the package's own errors for bad input (configuration or files).

    Catch this to handle any malformed input the package reports; anything else
    escaping the package on bad input is a bug.

    Every subclass survives a pickle round trip whatever its ``__init__`` takes, so
    one raised in a worker process reaches the parent as itself (an exception
    pickles as ``cls(*args)``, which a subclass taking ``field, value, allowed``
    cannot rebuild from its one-message ``args``; the pool would break instead).
    """

    def __reduce__(self) -> tuple[Any, ...]:
        """Rebuild without calling ``__init__``: the message, then the attributes."""
        return _rebuild, (type(self), self.args), self.__dict__


class ConfigError(EvalStopError):
    """A configuration value is outside what the simulator accepts."""

    def __init__(self, field: str, value: Any, allowed: str) -> None:
        """Record the field, the value received and what is allowed."""
        self.field = field
        self.value = value
        self.allowed = allowed
        super().__init__(f"{field}={shown(value)} is not allowed: {allowed}")


class TraceError(EvalStopError):
    """A row of a cluster-trace CSV cannot be read."""

    def __init__(self, path: str, line: int, field: str, message: str) -> None:
        """Record the file, the 1-based line, the field and what is wrong."""
        self.path = path
        self.line = line
        self.field = field
        super().__init__(f"{path}, line {line}, field {field!r}: {message}")


def shown(value: Any) -> str:
    """``repr(value)`` for a message; what it is, for a value ``repr`` refuses (a huge int)."""
    try:
        return repr(value)
    except ValueError:  # an int beyond Python's digit limit for str(), or a container of one
        if isinstance(value, int):
            return f"<an integer of {value.bit_length()} bits>"
        return f"<a {type(value).__name__} holding an integer too long to print>"


def _rebuild(cls: type[EvalStopError], args: tuple[Any, ...]) -> EvalStopError:
    # BaseException.__new__ sets ``args`` (hence the message); __init__ is not called.
    return cls.__new__(cls, *args)


def is_integer(value: Any) -> bool:
    """True for a Python or NumPy integer; False for a bool (``True`` is not a GPU count)."""
    return isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_)


def is_real(value: Any) -> bool:
    """True for a Python or NumPy integer or float; False for a bool or anything else."""
    return isinstance(value, int | float | np.integer | np.floating) and not isinstance(
        value, bool | np.bool_
    )


def check_real(field: str, value: Any, lo: float, hi: float, what: str = "a number") -> float:
    """``value`` as a float if it is a real number in [lo, hi], else :class:`ConfigError`."""
    if not is_real(value) or not lo <= value <= hi:
        raise ConfigError(field, value, f"{what} in [{lo:g}, {hi:g}]")
    return float(value)
