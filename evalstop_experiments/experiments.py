"""The paper's experiments (SPEC section 7) as lists of cells.

A *cell* is one policy on one environment configuration; each cell runs on
many seeds, and every policy is compared with NoStop on the *same* seeds of
the same ``group`` (same environment).  Cells are plain data (JSON-friendly),
so they travel to worker processes and Ray tasks unchanged.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

from baselines.policies import EvalStop, LossPlateau, NoStop, Policy, StopAtProgress

POLICY_CLASSES: dict[str, type] = {
    "NoStop": NoStop,
    "EvalStop": EvalStop,
    "StopAtProgress": StopAtProgress,
    "LossPlateau": LossPlateau,
}


@dataclass(frozen=True)
class PolicySpec:
    """A policy by class name and keyword arguments (built inside the worker)."""

    kind: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    label: str = ""

    def build(self) -> Policy:
        if self.kind == "Learned":
            from baselines.learned import Learned

            return Learned(**self.kwargs)
        return POLICY_CLASSES[self.kind](**self.kwargs)

    @property
    def name(self) -> str:
        return self.label or self.build().name


NOSTOP = PolicySpec("NoStop", label="NoStop")
EVALSTOP = PolicySpec("EvalStop", {"k": 2}, label="EvalStop")
STOPAT = PolicySpec("StopAtProgress", {"threshold": 0.65}, label="StopAt-0.65")
LOSSPLATEAU = PolicySpec("LossPlateau", {}, label="LossPlateau")
SCRIPTED = (NOSTOP, EVALSTOP, STOPAT, LOSSPLATEAU)


@dataclass(frozen=True)
class Cell:
    """One policy on one environment configuration of one experiment."""

    experiment: str
    group: str  # the environment setting; NoStop of the same group is the baseline
    policy: PolicySpec
    env: dict[str, Any]

    @property
    def key(self) -> str:
        """A stable, file-name-safe id of the cell."""
        blob = json.dumps(
            [self.experiment, self.group, asdict(self.policy), self.env], sort_keys=True
        )
        digest = hashlib.sha1(blob.encode()).hexdigest()[:10]
        safe = "".join(c if c.isalnum() or c in "-_.=" else "_" for c in self.group)
        return f"{safe}__{self.policy.label}__{digest}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_dict(d: dict[str, Any]) -> Cell:
        return Cell(d["experiment"], d["group"], PolicySpec(**d["policy"]), dict(d["env"]))


EXPERIMENTS: dict[str, str] = {
    "E1": "Main table: heavy-RLHF on SRTF-Est",
    "E2": "Composability over base schedulers",
    "E3": "Eval-noise sweep",
    "E4": "Hack-fraction sweep",
    "E5": "Decline-threshold (k) sweep",
    "E6": "Scripted vs learned (SB3) stoppers",
    "E7": "Real micro-RLHF curves vs synthetic curves",
}

SIGMAS = (0.01, 0.02, 0.05, 0.08, 0.12)
HACK_FRACTIONS = (0.2, 0.4, 0.6, 0.8)
KS = (1, 2, 3, 4, 5)
SCHEDULERS = ("fifo", "sjf-est", "srtf-est", "loss-aware", "tiresias")


def build_cells(base_env: dict[str, Any], only: list[str] | None = None) -> list[Cell]:
    """Every cell of E1-E5 on top of ``base_env`` (e.g. ``{"n_jobs": 100}``)."""
    env0 = {"workload": "heavy-rlhf", "scheduler": "srtf-est", **base_env}
    cells: list[Cell] = []
    cells += [Cell("E1", "heavy-rlhf/srtf-est", p, env0) for p in SCRIPTED]
    for s in SCHEDULERS:
        cells += [Cell("E2", s, p, {**env0, "scheduler": s}) for p in (NOSTOP, EVALSTOP)]
    for sigma in SIGMAS:
        cells += [Cell("E3", f"sigma={sigma}", p, {**env0, "eval_noise": sigma}) for p in SCRIPTED]
    for h in HACK_FRACTIONS:
        cells += [Cell("E4", f"hack={h}", p, {**env0, "hack_fraction": h}) for p in SCRIPTED]
    cells.append(Cell("E5", "k", NOSTOP, env0))
    for k in KS:
        cells.append(Cell("E5", "k", PolicySpec("EvalStop", {"k": k}, label=f"k={k}"), env0))
    if only:
        unknown = sorted(set(only) - {c.experiment for c in cells} - {"E6", "E7"})
        if unknown:
            raise ValueError(f"experiments={unknown} unknown: choose among {sorted(EXPERIMENTS)}")
        cells = [c for c in cells if c.experiment in only]
    return cells
