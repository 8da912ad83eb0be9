"""Every keyword argument of EvalStop-v0 as a command-line flag of the same name.

The flags, their defaults and allowed values are those of
:func:`evalstop_gym.envs.config.arguments` (the fields of ``SimConfig`` and
``EvalStopConfig``).  A flag's type comes from the field's annotation, never
from the text: ``--trace-cluster 6214e9`` stays the string ``"6214e9"`` (a
cluster id), ``--workload 1e3`` stays ``"1e3"`` (and the environment says which
presets exist), ``--n-jobs 100`` is an int and ``--eval-noise 0.02`` a float;
a dict field (``--scheduler-options '{"window": 3}'``) takes a JSON object.
``none`` gives None to the arguments whose annotation allows it.  The help
lists allowed values.
"""

from __future__ import annotations

import argparse
import inspect
import json
import types
import typing
from collections.abc import Callable
from typing import Any

from evalstop_gym.envs.config import arguments
from evalstop_gym.sim.pools import GPU_SPEEDS


def formats() -> dict[str, str]:
    """The text form of the arguments that take structured text (their help shows it)."""
    return {
        "pools": "comma-separated GPU type=count pairs, e.g. a100=32,h100=32; types "
        + ", ".join(sorted(GPU_SPEEDS)),
    }


def env_parameters() -> dict[str, inspect.Parameter]:
    """The keyword arguments of ``EvalStop-v0`` that are flags (all but ``render_mode``).

    As keyword-only parameters carrying the config field's annotation and default.
    """
    kind = inspect.Parameter.KEYWORD_ONLY
    return {
        a.name: inspect.Parameter(a.name, kind, default=a.default, annotation=a.annotation)
        for a in arguments().values()
    }


def allowed_values() -> dict[str, list[str]]:
    """The closed sets of values of the string arguments that have one."""
    return {a.name: list(a.allowed) for a in arguments().values() if a.allowed}


def flag_type(annotation: Any) -> tuple[type, bool]:
    """The type a flag parses to, and whether ``none`` is allowed.

    ``int | None`` -> ``(int, True)``; ``str | list[str] | None`` -> ``(str, True)``
    (a list travels as a comma-separated string); ``float`` -> ``(float, False)``;
    ``dict[str, Any]`` -> ``(dict, False)`` (a JSON object).
    """
    args = typing.get_args(annotation) if _is_union(annotation) else (annotation,)
    optional = type(None) in args
    scalars = [a for a in args if a in (str, int, float, bool)]
    if not scalars and any(typing.get_origin(a) is dict or a is dict for a in args):
        return dict, optional
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
        if kind is dict:
            try:
                value = json.loads(text)
            except ValueError:
                value = None
            if not isinstance(value, dict):
                raise argparse.ArgumentTypeError(
                    f"--{name.replace('_', '-')} takes a JSON object, not {text!r}"
                )
            return value
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

    parse.__name__ = "JSON" if kind is dict else kind.__name__  # argparse names it in messages
    return parse


def _help(name: str, default: Any, kind: type, optional: bool) -> str:
    allowed = allowed_values().get(name)
    what = "a JSON object" if kind is dict else kind.__name__
    parts = [what + (" or none" if optional else "")]
    if name in formats():
        parts.append(formats()[name])
    if allowed:
        many = " (comma-separated subset)" if name == "obs_fields" else ""
        parts.append(f"one of {', '.join(allowed)}{many}")
    parts.append(f"default: {default!r}")
    return "; ".join(parts)


def at_least(minimum: int) -> Callable[[str], int]:
    """An argparse ``type``: an integer >= ``minimum`` (argparse names the flag in its error)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < minimum:
            raise argparse.ArgumentTypeError(f"{text!r} is not allowed: an integer >= {minimum}")
        return value

    parse.__name__ = f"integer >= {minimum}"
    return parse


def add_env_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--workload``, ``--eval-noise``, ``--obs-fields``… (defaults: the env's)."""
    group = parser.add_argument_group("environment (EvalStop-v0 keyword arguments)")
    for name, p in env_parameters().items():
        kind, optional = flag_type(p.annotation)
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
