"""Stop real training runs with the package's stoppers: transformers/TRL, Optuna, Ray Tune.

Each integration feeds the values a tool reports through one
:class:`baselines.online.OnlineStopper`, the same object the offline replay of a log uses,
so a live run and the replay of its log decide the same.

- ``evalstop_integrations.transformers.EvalStopCallback``: transformers' ``Trainer`` and
  TRL's trainers (they subclass it);
- ``evalstop_integrations.optuna.EvalStopPruner``: an Optuna study;
- ``evalstop_integrations.ray_tune.EvalStopStopper``: a Ray Tune run.

Importing this package imports none of transformers, Optuna or Ray; the names above are
also reachable as attributes of the package (imported on first use).
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_HOMES = {
    "EvalStopCallback": "transformers",
    "EvalStopPruner": "optuna",
    "EvalStopStopper": "ray_tune",
}

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    # The tools are heavy (transformers alone takes seconds): import one only when asked for.
    if name in _HOMES:
        return getattr(import_module(f"{__name__}.{_HOMES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
