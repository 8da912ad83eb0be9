"""Every keyword argument of EvalStop-v0 as a command-line flag of the same name.

A flag's type comes from the annotation of ``EvalStopEnv.__init__``, never from
the text: ``--trace-cluster 6214e9`` stays the string ``"6214e9"`` (a cluster id),
``--workload 1e3`` stays ``"1e3"`` (and the environment says which presets exist),
``--n-jobs 100`` is an int and ``--eval-noise 0.02`` a float.  ``none`` gives None
to the arguments whose annotation allows it.  The help lists allowed values.
"""

from __future__ import annotations

import argparse
import inspect
import types
import typing
from collections.abc import Callable
from typing import Any

from evalstop_gym import BOUNDARY_FIELDS, CALIBRATIONS, SCHEDULERS, WORKLOADS
from evalstop_gym.envs import EvalStopEnv
from evalstop_gym.envs.evalstop import REWARD_MODES
from evalstop_gym.sim.pools import PLACEMENTS

_SKIP = {"render_mode"}


def env_parameters() -> dict[str, inspect.Parameter]:
    """The keyword arguments of ``EvalStopEnv`` that are flags (all but ``render_mode``)."""
    params = inspect.signature(EvalStopEnv.__init__).parameters
    return {n: p for n, p in params.items() if n != "self" and n not in _SKIP}


def allowed_values() -> dict[str, list[str]]:
    """The closed sets of values of the string arguments that have one."""
    return {
        "workload": sorted(WORKLOADS),
        "scheduler": sorted(SCHEDULERS),
        "calibration": sorted(CALIBRATIONS),
        "reward": list(REWARD_MODES),
        "obs_fields": list(BOUNDARY_FIELDS),
        "placement": list(PLACEMENTS),
    }


def flag_type(annotation: Any) -> tuple[type, bool]:
    """The scalar type a flag parses to, and whether ``none`` is allowed.

    ``int | None`` -> ``(int, True)``; ``str | list[str] | None`` -> ``(str, True)``
    (a list travels as a comma-separated string); ``float`` -> ``(float, False)``.
    """
    args = typing.get_args(annotation) if _is_union(annotation) else (annotation,)
    optional = type(None) in args
    scalars = [a for a in args if a in (str, int, float, bool)]
    if str in scalars or not scalars:
        return str, optional
    return scalars[0], optional


def _is_union(annotation: Any) -> bool:
    return typing.get_origin(annotation) in (typing.Union, types.UnionType)


_BOOLS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


def _parser(name: str, kind: type, optional: bool) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        if optional and text.strip().lower() in ("none", "null"):
            return None
        if kind is bool:  # bool("false") is True: read the word instead
            if text.strip().lower() not in _BOOLS:
                raise argparse.ArgumentTypeError(
                    f"--{name.replace('_', '-')} takes true or false, not {text!r}"
                )
            return _BOOLS[text.strip().lower()]
        try:
            return kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"--{name.replace('_', '-')} takes {kind.__name__}"
                + (" or 'none'" if optional else "")
                + f", not {text!r}"
            ) from None

    parse.__name__ = kind.__name__  # argparse names the type in its messages
    return parse


def _help(name: str, default: Any, kind: type, optional: bool) -> str:
    allowed = allowed_values().get(name)
    parts = [f"{kind.__name__}" + (" or none" if optional else "")]
    if allowed:
        many = " (comma-separated subset)" if name == "obs_fields" else ""
        parts.append(f"one of {', '.join(allowed)}{many}")
    parts.append(f"default: {default!r}")
    return "; ".join(parts)


def add_env_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--workload``, ``--eval-noise``, ``--obs-fields``… (defaults: the env's)."""
    group = parser.add_argument_group("environment (EvalStop-v0 keyword arguments)")
    hints = typing.get_type_hints(EvalStopEnv.__init__)
    for name, p in env_parameters().items():
        kind, optional = flag_type(hints[name])
        group.add_argument(
            "--" + name.replace("_", "-"),
            dest=f"env_{name}",
            type=_parser(name, kind, optional),
            default=argparse.SUPPRESS,
            metavar=name.upper(),
            help=_help(name, p.default, kind, optional),
        )


def env_kwargs_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The env keyword arguments given on the command line (only those given)."""
    return {
        name: getattr(args, f"env_{name}")
        for name in env_parameters()
        if hasattr(args, f"env_{name}")
    }
