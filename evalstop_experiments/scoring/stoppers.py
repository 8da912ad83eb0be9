"""The stoppers of a scoring run: their kinds, :class:`Stopper`, and :class:`StopperSpec`.

A :class:`Stopper` is what plays (its kind, display name and policy); a
:class:`StopperSpec` is an extra stopper in a form that crosses into worker processes,
checked behind the boundary (:func:`check_boundary_policy`) when it is built.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from baselines.floors import FLOOR_FAMILIES
from baselines.policies import Policy
from evalstop_gym.errors import ConfigError

#: The kinds of stopper a scoring run plays: the suite's own, and ``EXTRA`` for one given to it.
NOSTOP, STOP_AT_TUNED, GATE_TUNED, CUSUM_TUNED = "NoStop", "StopAtTuned", "GateTuned", "CusumTuned"
LOSS_PLATEAU, EVALSTOP, EXTRA, BAYES, ORACLE = "LossPlateau", "EvalStop", "extra", "Bayes", "Oracle"
#: The other tuned floor families (each a key of :data:`baselines.floors.FLOOR_FAMILIES`).
DROP_TUNED, DECLINES_TUNED, LEVEL_TUNED = "DropTuned", "DeclinesTuned", "LevelTuned"
GAIN_TUNED, PATIENCE_TUNED, GATED_CUSUM_TUNED = "GainTuned", "PatienceTuned", "GatedCusumTuned"
LOSS_STALL_TUNED, BY_TYPE_TUNED = "LossStallTuned", "ByTypeTuned"
#: The floor family with the best validation utility, and the curve-knowing reference.
BEST_FLOOR, CURVE_ORACLE = "BestFloor", "CurveOracle"
#: Bayes with a prior refitted on a held-out task's train runs (:func:`refit_bayes`).
BAYES_REFIT = "BayesRefit"
#: The floor families' kinds, in table order.
FLOOR_KINDS: tuple[str, ...] = tuple(f.key for f in FLOOR_FAMILIES if f.floor)


@dataclass(frozen=True)
class Stopper:
    """One stopper of a scoring run.

    Args:
        kind: What it is (:data:`NOSTOP` ... :data:`ORACLE`, or :data:`EXTRA`).
        name: Its display name in tables (an extra stopper's name also tells it apart).
        policy: What plays (None: the privileged Oracle, built from the simulator; an
            object with ``privileged = True`` is bound to the simulator too).
        env: Observation-only env keyword arguments it plays with (a model's own
            window): the episodes stay the ones the others play.
    """

    kind: str
    name: str
    policy: Policy | None
    env: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str]:
        """What tells its rows apart: the kind, and an extra stopper's name."""
        return (self.kind, self.name if self.kind == EXTRA else "")

    @property
    def privileged(self) -> bool:
        """Whether it reads the simulator (the Oracle, the CurveOracle): not a boundary policy."""
        return self.policy is None or bool(getattr(self.policy, "privileged", False))


@dataclass(frozen=True)
class StopperSpec:
    """A stopper to score beside the suite's own, in a form that crosses into worker processes.

    Args:
        name: Its display name (and, among extra stoppers, its identity).
        factory: ``factory(task, env_kwargs) -> Policy``, a module-level function,
            a :func:`functools.partial` of one, or a :class:`PolicySource`; it is
            called in the process that plays the task.
    """

    name: str
    factory: Callable[[str, dict[str, Any]], Policy]

    def build(self, task: str, kw: dict[str, Any]) -> Stopper:
        """The stopper for ``task`` (env kwargs ``kw``); refused if not behind the boundary."""
        policy = self.factory(task, kw)
        check_boundary_policy(policy, self.name)
        return Stopper(EXTRA, self.name, policy)


def check_boundary_policy(policy: Any, shown: str) -> None:
    """Refuse, naming it ``shown``, a scored stopper that is not a policy behind the boundary.

    A policy has ``act(obs)`` and ``reset()``.  ``None`` and an object with
    ``privileged = True`` would be played as the references are, bound to the episode's
    simulator and its hidden curves (:func:`baselines.evaluate.play_episode`): an upper
    bound, never a stopper to score.
    """
    if policy is None or bool(getattr(policy, "privileged", False)):
        raise ConfigError(
            "policy",
            shown,
            "a stopper behind the boundary, not None nor a privileged object "
            "(privileged = True: it would read the simulator's hidden curves)",
        )
    if not (callable(getattr(policy, "act", None)) and callable(getattr(policy, "reset", None))):
        raise ConfigError("policy", shown, "an object with act(obs) and reset() methods")
