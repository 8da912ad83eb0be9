"""Every keyword argument of EvalStop-v0 as a command-line flag of the same name."""

from __future__ import annotations

import argparse
import inspect
from typing import Any

from evalstop_gym.envs import EvalStopEnv

_SKIP = {"render_mode"}


def env_parameters() -> dict[str, inspect.Parameter]:
    params = inspect.signature(EvalStopEnv.__init__).parameters
    return {n: p for n, p in params.items() if n != "self" and n not in _SKIP}


def _convert(text: str) -> Any:
    low = text.strip().lower()
    if low in ("none", "null", ""):
        return None
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def add_env_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--workload``, ``--eval-noise``, ``--obs-fields``… (defaults: the env's)."""
    group = parser.add_argument_group("environment (EvalStop-v0 keyword arguments)")
    for name, p in env_parameters().items():
        group.add_argument(
            "--" + name.replace("_", "-"),
            dest=f"env_{name}",
            type=_convert,
            default=argparse.SUPPRESS,
            metavar=name.upper(),
            help=f"default: {p.default!r}",
        )


def env_kwargs_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The env keyword arguments given on the command line (only those given)."""
    out = {}
    for name in env_parameters():
        if hasattr(args, f"env_{name}"):
            v = getattr(args, f"env_{name}")
            if (
                name
                in (
                    "trace",
                    "trace_cluster",
                    "obs_fields",
                    "workload",
                    "scheduler",
                    "reward",
                    "calibration",
                )
                and v is not None
            ):
                v = str(v)
            out[name] = v
    return out
