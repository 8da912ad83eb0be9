"""``EvalStopPruner``: an Optuna pruner driven by any package stopper.

::

    import optuna
    from baselines import EvalStop
    from evalstop_integrations.optuna import EvalStopPruner

    study = optuna.create_study(direction="maximize", pruner=EvalStopPruner(EvalStop(2), 20))
    # in the objective: trial.report(value, step); if trial.should_prune(): raise TrialPruned()

Optuna calls :meth:`EvalStopPruner.prune` with the trial's reported values so far; the
pruner feeds them, in step order, through one :class:`~baselines.online.OnlineStopper`
per trial (the object the offline replay of a log uses) and prunes when it says stop.
The direction comes from the study (``minimize``: lower is better).  Compared with
Optuna's ``PatientPruner`` (prune after ``patience`` reports without a new best), the
default ``EvalStop(2)`` prunes after two consecutive declines.
"""

from __future__ import annotations

import copy
from typing import Any

import optuna
from optuna.study import StudyDirection

from baselines.online import OnlineStopper, check_n_checkpoints, check_run_settings
from baselines.policies import Policy

from .common import (
    as_value,
    new_stopper,
    policy_name,
    resolve_policy,
)


class EvalStopPruner(optuna.pruners.BasePruner):
    """Prune an Optuna trial when a package stopper would stop it.

    Args:
        policy: Any package stopper (``EvalStop(k)``, ``Cusum``, ``BayesStopper``,
            ``Learned``, your own :class:`~baselines.Policy`); ``None``: ``EvalStop(2)``.
        n_checkpoints: How many values a trial reports when it runs to the end (the
            stopper's progress denominator).
        job_type: The job type the stopper is told (``rlhf``, ``dpo`` or ``lora``).
        scale: Passed to :class:`~baselines.online.OnlineStopper`.

    The pruner keeps, per trial, the stopper and the reports it has been fed, so each call
    feeds only the new reports; a trial whose reports do not extend what was fed (a
    study shared between processes, a pruner pickled and restored, a new study of the
    same name) is replayed from its first report, which gives the same decision.
    """

    def __init__(
        self,
        policy: Policy | None = None,
        n_checkpoints: int | None = None,
        *,
        job_type: str = "rlhf",
        scale: Any = None,
    ) -> None:
        self.policy = resolve_policy(policy)
        self.n_checkpoints = check_n_checkpoints(n_checkpoints)
        check_run_settings(job_type, scale)  # at construction, not at the first eval
        self.job_type = job_type
        self.scale = scale
        #: Per trial, the reports fed so far ((step, value), in step order) and its stopper.
        #: A new study of the same name numbers its trials from 0 again: its trial is told
        #: from the old one by its reports, not its key.
        self._fed: dict[tuple[str, int], tuple[list[tuple[int, Any]], OnlineStopper]] = {}

    def prune(self, study: optuna.study.Study, trial: optuna.trial.FrozenTrial) -> bool:
        """Whether the stopper, fed the trial's reports in step order, has said stop."""
        return self._feed(study, trial)[1].stopped

    def stopper(self, study: optuna.study.Study, trial: optuna.trial.FrozenTrial) -> OnlineStopper:
        """The trial's stopper after its reports so far (``best_step``: what it would keep)."""
        return self._feed(study, trial)[1]

    def _feed(
        self, study: optuna.study.Study, trial: optuna.trial.FrozenTrial
    ) -> tuple[list[tuple[int, Any]], OnlineStopper]:
        greater = study.direction == StudyDirection.MAXIMIZE
        key = (study.study_name, trial.number)
        values = trial.intermediate_values
        reports = [(step, values[step]) for step in sorted(values)]
        fed, stopper = self._fed.get(key, ([], None))
        if stopper is None or not _same(reports[: len(fed)], fed):
            fed, stopper = [], self._new(greater)
        for step, raw in reports[len(fed) :]:
            fed.append((step, raw))
            value = as_value(raw, "intermediate value")
            if value is not None and not stopper.stopped:
                stopper.observe(value, step=step)
        self._fed[key] = (fed, stopper)
        return fed, stopper

    def _new(self, greater_is_better: bool) -> OnlineStopper:
        # A policy of its own per trial: trials may interleave (threads, n_jobs > 1).
        return new_stopper(
            copy.deepcopy(self.policy),
            self.n_checkpoints,
            greater_is_better=greater_is_better,
            job_type=self.job_type,
            scale=self.scale,
        )

    def __repr__(self) -> str:
        return f"EvalStopPruner({policy_name(self.policy)}, n_checkpoints={self.n_checkpoints})"


def _same(a: list[tuple[int, Any]], b: list[tuple[int, Any]]) -> bool:
    """Whether two lists of reports are equal, a NaN value equal to a NaN."""
    return len(a) == len(b) and all(
        sa == sb and (va == vb or (va != va and vb != vb)) for (sa, va), (sb, vb) in zip(a, b)
    )
