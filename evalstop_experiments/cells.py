"""Cells: one policy on one environment configuration, the unit every experiment runs.

A *cell* is one policy on one environment configuration; each cell runs on
many seeds, and every policy is compared with NoStop on the *same* seeds of
the same setting.  Cells are plain data (JSON-friendly), so they travel to
worker processes and Ray tasks unchanged.

A cell carries its coordinates as typed fields — the policy's ``kind`` and
``params``, the swept variable's name (``sweep``) and ``value``, and a
categorical ``variant`` — so tables and plots select rows by those, never by
parsing a label back.  Labels (``PolicySpec.label``, :attr:`Cell.group`) are for
display only.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from baselines.policies import (
    Deprioritize,
    EvalStop,
    LossPlateau,
    NoStop,
    Policy,
    StopAtProgress,
)

POLICY_CLASSES: dict[str, type] = {
    "NoStop": NoStop,
    "EvalStop": EvalStop,
    "StopAtProgress": StopAtProgress,
    "LossPlateau": LossPlateau,
    "Deprioritize": Deprioritize,
}

#: E1's setting (SPEC section 7), the base every experiment varies: heavy-RLHF on SRTF-Est.
BASE_SETTING: dict[str, Any] = {"workload": "heavy-rlhf", "scheduler": "srtf-est"}


def base_env(overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """E1's environment keyword arguments with ``overrides`` (e.g. ``{"n_jobs": 100}``) on top."""
    return {**BASE_SETTING, **(overrides or {})}


@dataclass(frozen=True)
class PolicySpec:
    """A policy by class name and keyword arguments (built inside the worker).

    Args:
        kind: ``NoStop``, ``EvalStop``, ``StopAtProgress``, ``LossPlateau`` or ``Learned``.
        params: Keyword arguments of the class (for ``Learned``: ``path``).
        label: Display name in tables and plots; never used to find a row.
    """

    kind: str
    params: dict[str, Any] = field(default_factory=dict)
    label: str = ""

    def build(self) -> Policy:
        """A fresh policy object."""
        if self.kind == "Learned":
            from baselines.learned import Learned

            return Learned(**self.params, label=self.label or None)
        return POLICY_CLASSES[self.kind](**self.params)

    @property
    def plays_seeds_together(self) -> bool:
        """Whether a worker plays every seed of a cell of this policy in one go.

        A learned stopper's: its model file is read and loaded once for all of them (not
        once per seed), and a model that decides for many episodes in one network call
        plays them side by side (:meth:`baselines.learned.Learned.batch_actor`).  A
        scripted policy's seeds go one at a time, which spreads them over the workers.
        """
        return self.kind == "Learned"

    def same_policy(self, row: dict[str, Any]) -> bool:
        """Whether a result row (or summary row) is this policy, whatever its label."""
        return row["policy_kind"] == self.kind and row["policy_params"] == self.params


NOSTOP = PolicySpec("NoStop", label="NoStop")
EVALSTOP = PolicySpec("EvalStop", {"k": 2}, label="EvalStop")
STOPAT = PolicySpec("StopAtProgress", {"threshold": 0.65}, label="StopAt-0.65")
LOSSPLATEAU = PolicySpec("LossPlateau", {}, label="LossPlateau")
SCRIPTED = (NOSTOP, EVALSTOP, STOPAT, LOSSPLATEAU)


@dataclass(frozen=True)
class Cell:
    """One policy on one environment configuration of one experiment.

    Args:
        experiment: Experiment id (``E1`` ...).
        policy: The policy.
        env: Keyword arguments of ``EvalStop-v0``.
        sweep: Name of the swept variable: an environment keyword (``eval_noise``,
            ``scheduler``...) or a policy parameter (``k``); ``""`` for none.
        value: The swept variable's value in this cell (``None`` for none).
        variant: A categorical coordinate besides the sweep (E7: ``real`` or ``synthetic``).
    """

    experiment: str
    policy: PolicySpec
    env: dict[str, Any]
    sweep: str = ""
    value: Any = None
    variant: str = ""

    @property
    def sweeps_env(self) -> bool:
        """The swept variable is an environment keyword (not a policy parameter)."""
        return self.sweep in self.env

    @property
    def group(self) -> str:
        """A display name of the cell's setting, e.g. ``real eval_noise=0.05``."""
        shown = f"{self.sweep}={self.value}" if self.value is not None else ""
        return " ".join(p for p in (self.variant, shown) if p)

    @property
    def key(self) -> str:
        """A stable, file-name-safe id of the cell (labels are not part of it)."""
        blob = json.dumps(
            [
                self.experiment,
                self.policy.kind,
                self.policy.params,
                self.env,
                self.sweep,
                self.value,
                self.variant,
            ],
            sort_keys=True,
        )
        digest = hashlib.sha1(blob.encode()).hexdigest()[:10]
        safe = "".join(c if c.isalnum() or c in "-_.=" else "_" for c in self.group)
        return f"{safe or 'base'}__{self.policy.kind}__{digest}"

    def row_fields(self) -> dict[str, Any]:
        """The typed fields every result row of this cell carries (plus display names)."""
        return {
            "experiment": self.experiment,
            "policy": self.policy.label or self.policy.kind,
            "policy_kind": self.policy.kind,
            "policy_params": dict(self.policy.params),
            "sweep": self.sweep,
            "value": self.value,
            "sweep_of": ("env" if self.sweeps_env else "policy") if self.sweep else "",
            "variant": self.variant,
            "group": self.group,
            "cell": self.key,
        }


#: The base schedulers E2 and E10 compare.
SCHEDULERS = ("fifo", "sjf-est", "srtf-est", "loss-aware", "tiresias")


def env_sweep(
    experiment: str,
    env0: dict[str, Any],
    name: str,
    values: tuple[Any, ...],
    policies: tuple[PolicySpec, ...] = SCRIPTED,
    variant: str = "",
) -> list[Cell]:
    """Every policy at every value of the environment keyword ``name`` on top of ``env0``."""
    return [
        Cell(experiment, p, {**env0, name: v}, sweep=name, value=v, variant=variant)
        for v in values
        for p in policies
    ]
