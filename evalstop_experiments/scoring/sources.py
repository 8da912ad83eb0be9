"""Where a scored stopper's code comes from: a ``module:Class`` or file spec, or isolation.

:class:`PolicySource` builds a policy named by a spec in the process that plays
(``pretrained:NAME`` and ``model:PATH`` are :func:`baselines.learned.from_spec`'s);
:func:`isolated_spec` plays an untrusted stopper from its own process
(:mod:`evalstop_experiments.isolated`); :func:`stopper_spec` is a ``--policy`` spec's.
"""

from __future__ import annotations

import copy
import functools
import importlib
import importlib.util
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from baselines.binding import for_task
from baselines.policies import Policy
from evalstop_gym.envs.evalstop import EvalStopEnv
from evalstop_gym.errors import ConfigError

from .stoppers import StopperSpec, check_boundary_policy


@dataclass(frozen=True)
class PolicySource:
    """A policy class named ``module:Class`` or ``path/to/file.py:Class``, built with no arguments.

    Picklable (it holds the spec, not the class), so it builds the policy in the
    process that plays.  A learned stopper's spec (``pretrained:NAME``,
    ``model:PATH``) is :func:`baselines.learned.from_spec`'s.
    """

    spec: str

    def __post_init__(self) -> None:
        """Refuse a malformed spec, or one whose class (or model) cannot be loaded, at once."""
        from baselines.learned import SPEC_PREFIXES, from_spec

        if self.spec.partition(":")[0] in SPEC_PREFIXES:
            from_spec(self.spec)  # a bad name or a tampered model fails before any episode
        else:
            self.load()

    def load(self) -> Callable[[], Policy]:
        """The class (or zero-argument factory) the spec names."""
        from baselines.learned import SPEC_PREFIXES, from_spec

        if self.spec.partition(":")[0] in SPEC_PREFIXES:
            return functools.partial(from_spec, self.spec)
        where, sep, attr = self.spec.rpartition(":")
        if not sep or not where or not attr.isidentifier():
            raise ConfigError(
                "policy",
                self.spec,
                "'module:Class', 'path/to/file.py:Class', 'pretrained:NAME' or 'model:PATH'",
            )
        try:
            module = _load_module(where)
        except (ImportError, OSError, SyntaxError) as e:
            raise ConfigError("policy", self.spec, f"an importable module or file ({e})") from None
        obj = getattr(module, attr, None)
        if not callable(obj):
            raise ConfigError("policy", self.spec, f"a class {attr!r} defined in {where}")
        if isinstance(obj, type) and getattr(obj, "privileged", False):
            check_boundary_policy(obj, self.spec)  # refused before one is built
        return obj

    def __call__(self, task: str, kw: dict[str, Any]) -> Policy:
        """A fresh policy; one with ``check_observation_space`` must accept the task's space."""
        policy = for_task(self.load()(), kw)
        check = getattr(policy, "check_observation_space", None)
        if check is not None:
            try:
                check(copy.deepcopy(EvalStopEnv(**kw).observation_space))
            except ValueError as e:
                raise ValueError(f"--policy {self.spec} cannot play task {task}: {e}") from None
        return policy


def _load_module(where: str) -> Any:
    """A module by dotted name, or a ``.py`` file by path (loaded once per process)."""
    if not where.endswith(".py"):
        return importlib.import_module(where)
    path = Path(where).resolve()
    if not path.is_file():
        raise OSError(f"no file {where}")
    name = f"_evalstop_user_{abs(hash(str(path)))}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {where}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def isolated_spec(spec: str, name: str | None = None) -> StopperSpec:
    """The :class:`StopperSpec` of an untrusted stopper: it plays from its own process.

    The stopper's code is imported only in a child interpreter that receives
    observations and returns actions (:class:`~evalstop_experiments.isolated.IsolatedSource`),
    so it cannot reach the env, the simulator or this process's memory.  Use it with
    fresh test seeds (``seeds="fresh"``): isolation alone does not stop a stopper that
    recognises a public seed from its first observation.
    """
    from ..isolated import IsolatedSource

    return StopperSpec(name or spec, IsolatedSource(spec))


def stopper_spec(spec: str) -> StopperSpec:
    """The :class:`StopperSpec` a command-line ``--policy`` spec names (checked now)."""
    return StopperSpec(spec, PolicySource(spec))
