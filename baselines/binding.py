"""Tell a stopper the settings of the task it is about to play.

A stopper conditioned on the task reads the eval noise, GPU-hour price and evals per run
a platform knows from the task's env kwargs: a backward-induction model through its
``bind_task``, an SB3 model trained with task conditioning (its metadata's observation
fields name the task field) by being wrapped in
:class:`~baselines.training.conditioning.Conditioned`.  Every other policy is played
as it is.  The scoring path and the experiment runner call :func:`for_task` on each
policy they build, so a conditioned model never plays with its training defaults.
"""

from __future__ import annotations

from typing import Any


def for_task(policy: Any, kw: dict[str, Any]) -> Any:
    """``policy`` bound to the task of env kwargs ``kw`` (itself when it takes no settings)."""
    bind = getattr(policy, "bind_task", None)
    if callable(bind):
        return bind(kw)
    meta = getattr(policy, "meta", None)
    if isinstance(meta, dict) and meta.get("obs_fields"):
        # Imported here: SB3 and torch load only for an SB3 model.
        from .training.conditioning import Conditioned, condition_of, task_settings_of

        condition = condition_of(meta)
        if condition != "none":
            return Conditioned(policy, task_settings_of(kw), summary=condition == "task+summary")
    return policy
