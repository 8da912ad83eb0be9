"""``EvalStopStopper``: a Ray Tune stopper driven by any package stopper.

::

    from ray import tune
    from baselines import EvalStop
    from evalstop_integrations.ray_tune import EvalStopStopper

    stop = EvalStopStopper(EvalStop(2), metric="score", mode="max", n_checkpoints=20)
    tune.Tuner(train_fn, run_config=tune.RunConfig(stop=stop)).fit()
    stop.stopper(trial_id).best_step  # the iteration whose checkpoint it would keep

Tune calls the stopper with every result a trial reports; a result carrying ``metric``
is fed to that trial's own :class:`~baselines.online.OnlineStopper` (the object the
offline replay of a log uses), and the trial stops when it says so.  Results without
the metric, and a result at a step already fed (Tune repeats a trial's last result when
it ends), are ignored.  Unlike Tune's ``TrialPlateauStopper`` (a standard deviation
threshold in the metric's own units) the default ``EvalStop(2)`` needs no scale.
"""

from __future__ import annotations

import copy
import difflib
import math
import warnings
from typing import Any

from ray.tune import Stopper

from baselines.online import OnlineStopper, check_n_checkpoints, check_run_settings
from baselines.policies import Policy
from evalstop_gym.errors import ConfigError

from .common import (
    as_value,
    check_key,
    check_metric,
    new_stopper,
    policy_name,
    resolve_policy,
)

MODES = ("max", "min")


class EvalStopStopper(Stopper):
    """Stop each Ray Tune trial when a package stopper would stop it.

    Args:
        policy: Any package stopper (``EvalStop(k)``, ``Cusum``, ``BayesStopper``,
            ``Learned``, your own :class:`~baselines.Policy`); ``None``: ``EvalStop(2)``.
        metric: The key of the reported result to watch.
        mode: ``"max"`` (higher is better) or ``"min"``.
        n_checkpoints: How many results with the metric a trial reports when it runs to
            the end (the stopper's progress denominator).
        step_key: The result key used as the step (Tune's ``training_iteration``); ``None``:
            none (every result with the metric is a new evaluation).
        job_type: The job type the stopper is told (``rlhf``, ``dpo`` or ``lora``).
        scale: Passed to :class:`~baselines.online.OnlineStopper`.
    """

    def __init__(
        self,
        policy: Policy | None = None,
        *,
        metric: str,
        mode: str = "max",
        n_checkpoints: int,
        step_key: str = "training_iteration",
        job_type: str = "rlhf",
        scale: Any = None,
    ) -> None:
        if mode not in MODES:
            raise ConfigError("mode", mode, "'max' or 'min'")
        self.policy = resolve_policy(policy)
        self.metric = check_metric(metric)
        self.mode = mode
        self.n_checkpoints = check_n_checkpoints(n_checkpoints)
        self.step_key = check_key("step_key", step_key, optional=True)
        check_run_settings(job_type, scale)  # at construction, not at the first eval
        self.job_type = job_type
        self.scale = scale
        self._stoppers: dict[str, OnlineStopper] = {}
        self._last_step: dict[str, int] = {}
        self._warned_missing = False
        self._missing: dict[str, int] = {}  # per trial, results without the metric

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        """Feed the trial's result to its stopper; True once the stopper has said stop."""
        stopper = self.stopper(trial_id)
        if stopper.stopped:
            return True
        if self.metric not in result:
            self._note_missing(trial_id, result)
            return False
        value = as_value(result[self.metric], self.metric)
        if value is None:
            return False
        step = None if self.step_key is None else _step_of(result.get(self.step_key), self.step_key)
        if step is not None and step <= self._last_step.get(trial_id, -1):
            return False  # a result seen already: Tune re-sends a trial's last one when it ends
        if step is not None:
            self._last_step[trial_id] = step
        return bool(stopper.observe(value, step=step))

    def _note_missing(self, trial_id: str, result: dict[str, Any]) -> None:
        """Warn once when the metric looks mistyped, since then no trial is ever stopped.

        A result without the metric is normal (a trial that evaluates every few
        iterations), so the warning waits for a sign: a key of the result close to the
        metric's name, or a trial with ``n_checkpoints`` results and none carrying it.
        """
        self._missing[trial_id] = self._missing.get(trial_id, 0) + 1
        if self._warned_missing or self._stoppers[trial_id].decisions:
            return
        keys = sorted(map(str, result))
        close = difflib.get_close_matches(self.metric, keys, n=1, cutoff=0.8)
        if close or self._missing[trial_id] >= self.n_checkpoints:
            self._warned_missing = True
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            warnings.warn(
                f"EvalStopStopper: metric={self.metric!r} is in none of trial {trial_id}'s "
                f"{self._missing[trial_id]} results so far{hint}; their keys: {keys}",
                stacklevel=3,
            )

    def stop_all(self) -> bool:
        """Never stops the whole experiment: each trial is judged on its own results."""
        return False

    def stopper(self, trial_id: str) -> OnlineStopper:
        """The trial's stopper (made on first use): ``stop_step``, ``best_step``, ``decisions``."""
        if trial_id not in self._stoppers:
            # A policy of its own per trial: Tune interleaves the trials' results.
            self._stoppers[trial_id] = new_stopper(
                copy.deepcopy(self.policy),
                self.n_checkpoints,
                greater_is_better=self.mode == "max",
                job_type=self.job_type,
                scale=self.scale,
            )
        return self._stoppers[trial_id]

    @property
    def trials(self) -> list[str]:
        """The ids of the trials seen so far, in first-seen order."""
        return list(self._stoppers)

    def __repr__(self) -> str:
        return (
            f"EvalStopStopper({policy_name(self.policy)}, metric={self.metric!r}, "
            f"mode={self.mode!r}, n_checkpoints={self.n_checkpoints})"
        )


def _step_of(step: Any, key: str) -> int | None:
    """A result's step as an int (``None``: the result has none).

    Raises:
        ConfigError: a step that is not a whole number (a fraction, NaN, a string): a
            ``step_key`` such as ``epoch`` would merge evaluations into one step.
    """
    if step is None:
        return None
    try:
        value = float(step)
    except (TypeError, ValueError, OverflowError):
        value = math.nan
    if not math.isfinite(value) or value != int(value) or isinstance(step, bool):
        raise ConfigError(
            key, step, "a whole number (the step of the result): choose a step_key that counts"
        )
    return int(value)
