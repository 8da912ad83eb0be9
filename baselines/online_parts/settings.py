"""A run's settings checked before a stopper plays it: K, the job type, the scale, the layout.

:func:`check_n_checkpoints` and :func:`check_run_settings` are what
:class:`~baselines.online.OnlineStopper` checks of its arguments, callable before one is
built (the live integrations check theirs when they are built); :func:`layout_of` is the
observation layout a policy plays on.
"""

from __future__ import annotations

from typing import Any

from evalstop_gym.corpus.format import MAX_RUN_EVALS
from evalstop_gym.envs.config import parse_obs_fields
from evalstop_gym.envs.core import ObservationLayout
from evalstop_gym.errors import ConfigError, is_integer
from evalstop_gym.sim.workloads import JOB_TYPES

from .scale import ScaleRule


def layout_of(
    policy: Any, n_checkpoints: int, obs_fields: Any, eval_window: int | None
) -> ObservationLayout:
    """The observation layout ``policy`` plays on: given, its model's, or the env's default.

    A learned model records the fields and the window it was trained on in its
    ``meta``; every other policy gets the env's default (every field, the
    whole history).
    """
    meta = getattr(policy, "meta", None)
    if obs_fields is None and isinstance(meta, dict) and "obs_fields" in meta:
        obs_fields = meta["obs_fields"]
    if eval_window is None and isinstance(meta, dict) and meta.get("eval_window"):
        eval_window = int(meta["eval_window"])
    fields = parse_obs_fields(obs_fields)
    if eval_window is None:
        eval_window = n_checkpoints
    if not isinstance(eval_window, int) or isinstance(eval_window, bool) or eval_window < 1:
        raise ConfigError("eval_window", eval_window, "an integer >= 1")
    return ObservationLayout(fields, eval_window, n_checkpoints)


def check_n_checkpoints(n_checkpoints: Any, *, optional: bool = False) -> int | None:
    """``n_checkpoints`` as an int in [1, :data:`MAX_RUN_EVALS`] (``None`` passes when
    ``optional``: a live run works it out when it begins).

    Raises:
        ConfigError: Not such an integer.
    """
    if n_checkpoints is None and optional:
        return None
    if not is_integer(n_checkpoints) or not 1 <= n_checkpoints <= MAX_RUN_EVALS:
        allowed = f"an integer in [1, {MAX_RUN_EVALS}]" + (
            " or None (work it out from the run)" if optional else ""
        )
        raise ConfigError("n_checkpoints", n_checkpoints, allowed)
    return int(n_checkpoints)


def check_run_settings(job_type: Any, scale: Any) -> ScaleRule | None:
    """A run's ``job_type`` checked and its ``scale`` as a :class:`ScaleRule` (or None).

    What :class:`OnlineStopper` checks of them, callable before one is built (the live-run
    integrations check their arguments when they are built, not at a run's first eval).

    Raises:
        ConfigError: a job type not in :data:`JOB_TYPES`, or a scale that is not a
            ``ScaleRule``, its dict, or None.
    """
    if job_type not in JOB_TYPES:
        raise ConfigError("job_type", job_type, f"one of {list(JOB_TYPES)}")
    if isinstance(scale, dict):
        scale = ScaleRule.from_dict(scale)
    if scale is not None and not isinstance(scale, ScaleRule):
        raise ConfigError("scale", scale, "a ScaleRule, its dict, or None (identity)")
    return scale
