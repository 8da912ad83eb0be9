"""What a score is normalised to: the :class:`Reference` of a task and the stoppers that play it.

Bayes on synthetic tasks, the privileged Oracle on corpus tasks, the privileged
CurveOracle on held-out real-run tasks (:func:`reference_for`); :func:`references` are
the reference stoppers the suite plays (with a Bayes refitted on a held-out task's
train runs, :func:`refit_bayes`), :func:`reference_stopper` the one a task needs.
"""

from __future__ import annotations

import enum
from typing import Any

from baselines.bayes import BayesStopper
from baselines.curve_oracle import CurveOracle
from evalstop_gym.envs.config import EvalStopConfig
from evalstop_gym.sim.real_curves import corpus_eval_noise
from evalstop_gym.suite import is_heldout, tuning_kwargs

from .stoppers import BAYES, BAYES_REFIT, CURVE_ORACLE, ORACLE, Stopper
from .tuning import VALIDATION_SEEDS


class Reference(enum.Enum):
    """What a score is normalised to (score 1): its value is the name shown in tables."""

    #: The Bayes stopper that knows the task's curve family (synthetic tasks).
    BAYES = "Bayes"
    #: The privileged Oracle that sees the true curves (corpus tasks: no family describes them).
    ORACLE = "Oracle"
    #: The privileged CurveOracle, knowing each run's curve but not its future noise
    #: (held-out real-run tasks, whose evals carry fresh noise).
    CURVE_ORACLE = "CurveOracle"


def reference_for(kw: dict[str, Any]) -> Reference:
    """The reference of a task's env kwargs.

    The CurveOracle on held-out real-run tasks (:func:`evalstop_gym.suite.is_heldout`),
    the Oracle on the other corpus tasks, Bayes on synthetic ones.
    """
    if is_heldout(kw):
        return Reference.CURVE_ORACLE
    return Reference.ORACLE if kw.get("curves") else Reference.BAYES


#: The stopper kind that plays each reference.
REFERENCE_KIND = {
    Reference.BAYES: BAYES,
    Reference.ORACLE: ORACLE,
    Reference.CURVE_ORACLE: CURVE_ORACLE,
}


def references(kw: dict[str, Any]) -> list[Stopper]:
    """The Bayes stopper, the privileged CurveOracle and the privileged Oracle for these env kwargs.

    On a held-out task Bayes keeps the task's (``hard``) prior and assumes the corpus's
    measured eval noise, and a second Bayes with a prior refitted on the train runs
    (:func:`refit_bayes`) plays beside it.
    """
    if not is_heldout(kw):
        return [
            Stopper(BAYES, "Bayes", BayesStopper.from_env_kwargs(kw)),
            Stopper(CURVE_ORACLE, "CurveOracle", CurveOracle()),
            Stopper(ORACLE, "Oracle", None),
        ]
    return [
        Stopper(BAYES, "Bayes (hard prior)", BayesStopper.from_env_kwargs(kw)),
        Stopper(BAYES_REFIT, "Bayes (refitted on train runs)", refit_bayes(kw)),
        Stopper(CURVE_ORACLE, "CurveOracle", CurveOracle()),
        Stopper(ORACLE, "Oracle", None),
    ]


def refit_bayes(kw: dict[str, Any]) -> BayesStopper:
    """Bayes whose prior is refitted on a held-out task's train runs only.

    The prior is :func:`evalstop_experiments.regime_fit.fit_prior_on_task` on the
    train runs as the task replays them (:func:`evalstop_gym.suite.tuning_kwargs`, on
    :data:`VALIDATION_SEEDS`); the noise the corpus's measured eval sd of the train
    runs; the price, workload, delivery and hack share the task's.
    """
    from ..regime_fit import fit_prior_on_task

    config = EvalStopConfig.from_kwargs(**kw)
    sim = config.sim_config
    return BayesStopper(
        calibration=fit_prior_on_task(tuning_kwargs(kw), VALIDATION_SEEDS),
        eval_noise=corpus_eval_noise(sim.curves, "train"),
        gpu_hour_price=config.gpu_hour_price,
        workload=sim.workload,
        deliver=sim.deliver,
        hack_fraction=sim.hack_fraction,
    )


def reference_stopper(kw: dict[str, Any]) -> Stopper:
    """The stopper that plays these env kwargs' reference (:func:`reference_for`)."""
    ref = reference_for(kw)
    if ref is Reference.ORACLE:
        return Stopper(ORACLE, "Oracle", None)
    if ref is Reference.CURVE_ORACLE:
        return Stopper(CURVE_ORACLE, "CurveOracle", CurveOracle())
    return Stopper(BAYES, "Bayes", BayesStopper.from_env_kwargs(kw))
