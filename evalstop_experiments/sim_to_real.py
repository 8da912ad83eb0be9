"""The sim-to-real check: a panel of stoppers designed on the twin, scored on twin and real runs.

Every stopper of the panel is built from the twin task alone (``english-twin``: runs drawn
from a model of the English corpus's train runs, :mod:`evalstop_experiments.twin_fit`):
floors tuned on the twin's train runs, Bayes with a prior refitted on them, a backward-
induction model trained on them, every model told the twin's settings.  The same objects
then play the twin's test runs and the real held-out test runs (``english-heldout``), both
normalised to the CurveOracle (0 = NoStop keeping each run's best checkpoint, 1 = the
CurveOracle).  The real runs' scores are never used to fit or choose anything.

The check, at each price: the mean absolute difference of the two scores over the panel
(target <= :data:`MAD_TARGET`) and their Spearman rank correlation (>= :data:`RHO_TARGET`),
with each stopper's difference and its 95 % interval (the two scores' run-bootstrap
intervals are independent: half-widths added in quadrature).

Everything here reads the env's kwargs and plays through :mod:`evalstop_experiments.scoring`;
the command is ``python benchmarks/suite/sim_to_real.py`` (or ``reproduce --only sim-to-real``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from baselines import EvalStop, LossPlateau, NoStop
from baselines.backward import BackwardStopper, TrainingEpisode, fit_backward, settings_for_task
from baselines.binding import for_task
from baselines.curve_oracle import CurveOracle
from baselines.learned import from_spec
from evalstop_gym.suite import PRICE_FACTORS, tuning_kwargs

from .scoring import (
    CURVE_ORACLE,
    EXTRA,
    NOSTOP,
    VALIDATION_SEEDS,
    Stopper,
    env_kwargs,
    episode_arrays,
    normalised_score,
    play_stoppers,
    refit_bayes,
    score_task,
    tune_floors,
)

#: The twin task and the real task it stands for.
TWIN_TASK, REAL_TASK = "english-twin", "english-heldout"
#: Jobs per episode (the held-out task's scale in the published comparison).
N_JOBS = 100
#: Test seeds of every score here: disjoint from the floors' validation seeds
#: (:data:`~evalstop_experiments.scoring.VALIDATION_SEEDS`) and the training seeds below.
TEST_SEEDS: tuple[int, ...] = tuple(range(100, 130))
#: Training episodes (seeds) of the backward-induction model trained on the twin.
TRAIN_SEEDS: tuple[int, ...] = tuple(range(10_000, 10_200))
#: The targets of the check, at every price.
MAD_TARGET, RHO_TARGET = 0.15, 0.85
#: Tuned floor families of the panel (keys of ``baselines.floors.FLOOR_FAMILIES``).
PANEL_FLOORS: tuple[str, ...] = (
    "StopAtTuned",
    "GateTuned",
    "DropTuned",
    "DeclinesTuned",
    "LevelTuned",
    "GatedCusumTuned",
    "LossStallTuned",
    "CusumTuned",
)
#: Shipped learned models of the panel (trained on synthetic regimes, not on the twin).
PANEL_PRETRAINED: tuple[str, ...] = ("pretrained:general", "pretrained:routed")


@dataclass(frozen=True)
class Member:
    """One stopper of the panel: its name, kind (for the table) and policy."""

    name: str
    kind: str
    policy: Any


def train_twin_backward(
    twin_kw: dict[str, Any], seeds: Sequence[int] = TRAIN_SEEDS, label: str = "Backward[twin]"
) -> BackwardStopper:
    """A backward-induction model trained on the twin's train runs, told the twin's settings."""
    train = tuning_kwargs(twin_kw)
    settings = settings_for_task(train)
    episodes = []
    for s in seeds:
        ep = episode_arrays(train, int(s))
        episodes.append(TrainingEpisode(ep.arrays, ep.values, settings))
    model = fit_backward(
        episodes,
        grid=max(e.arrays.k for e in episodes),
        label=label,
        record={"task": TWIN_TASK, "split": "train", "first_seed": int(seeds[0])},
        default_settings=settings,
    )
    return BackwardStopper(model, settings, label)


def build_panel(
    twin_kw: dict[str, Any],
    *,
    val_seeds: Sequence[int] = VALIDATION_SEEDS,
    train_seeds: Sequence[int] = TRAIN_SEEDS,
    pretrained: Sequence[str] = PANEL_PRETRAINED,
) -> list[Member]:
    """The panel for one price (``twin_kw``: the twin task's kwargs at that price).

    Fixed-parameter floors tuned on the twin's train runs, EvalStop k = 1-4, LossPlateau,
    Bayes with a prior refitted on the twin's train runs, a backward-induction model trained
    on them, and the shipped learned models told the twin's settings.
    """
    tuned = tune_floors(tuning_kwargs(twin_kw), val_seeds)
    panel = [
        Member(f"{tuned[k].family.label} (tuned on twin)", "floor", tuned[k].policy)
        for k in PANEL_FLOORS
    ]
    panel += [Member(f"EvalStop(k={k})", "scripted", EvalStop(k)) for k in (1, 2, 3, 4)]
    panel.append(Member("LossPlateau", "scripted", LossPlateau()))
    panel.append(Member("Bayes (twin prior)", "Bayes", refit_bayes(twin_kw)))
    if train_seeds:
        panel.append(Member("Backward[twin]", "learned", train_twin_backward(twin_kw, train_seeds)))
    for spec in pretrained:
        panel.append(Member(spec, "learned", for_task(from_spec(spec), twin_kw)))
    return panel


@dataclass(frozen=True)
class SideScore:
    """One stopper's score on one side: the score against the CurveOracle and its 95 % CI."""

    score: float
    lo: float
    hi: float


def side_scores(
    task: str, factor: float, kw: dict[str, Any], panel: Sequence[Member], seeds: Sequence[int]
) -> dict[str, SideScore]:
    """Each member's score on env kwargs ``kw`` (a held-out task's: CIs over runs)."""
    stoppers = [
        Stopper(NOSTOP, "NoStop", NoStop()),
        *(Stopper(EXTRA, m.name, m.policy) for m in panel),
        Stopper(CURVE_ORACLE, "CurveOracle", CurveOracle()),
    ]
    rows = score_task(task, factor, kw, stoppers, seeds)
    return {r.stopper: SideScore(r.score, r.score_lo, r.score_hi) for r in rows[1:-1]}


def plain_scores(
    kw: dict[str, Any], panel: Sequence[Member], seeds: Sequence[int]
) -> dict[str, SideScore]:
    """Each member's score on any env kwargs against the CurveOracle, CIs over seeds.

    For corpora played whole (``curve_split="all"``), where the held-out task's run
    bootstrap does not apply: every seed is a fresh draw of the corpus's runs.
    """
    stoppers = [
        Stopper(NOSTOP, "NoStop", NoStop()),
        *(Stopper(EXTRA, m.name, m.policy) for m in panel),
        Stopper(CURVE_ORACLE, "CurveOracle", CurveOracle()),
    ]
    runs = play_stoppers(kw, stoppers, seeds)
    u0 = [r["utility"] for r in runs[0]]
    uref = [r["utility"] for r in runs[-1]]
    out = {}
    for m, rs in zip(panel, runs[1:-1], strict=True):
        out[m.name] = SideScore(*normalised_score([r["utility"] for r in rs], u0, uref))
    return out


@dataclass(frozen=True)
class CheckRow:
    """One stopper at one price: its twin and real scores and their difference."""

    price_factor: float
    stopper: str
    kind: str
    twin: SideScore
    real: SideScore

    @property
    def diff(self) -> float:
        """Real less twin."""
        return self.real.score - self.twin.score

    @property
    def diff_ci(self) -> tuple[float, float]:
        """95 % interval of the difference (independent sides: half-widths in quadrature)."""
        half = math.hypot((self.twin.hi - self.twin.lo) / 2.0, (self.real.hi - self.real.lo) / 2.0)
        return self.diff - half, self.diff + half


@dataclass(frozen=True)
class Agreement:
    """The check at one price: mean |real - twin|, Spearman's rho, and whether both meet it."""

    price_factor: float
    mad: float
    rho: float
    n: int
    met: bool = field(default=False)


def agreement(rows: Sequence[CheckRow]) -> list[Agreement]:
    """The check's two figures at each price of ``rows``."""
    from scipy.stats import spearmanr

    out = []
    for f in sorted({r.price_factor for r in rows}):
        at = [r for r in rows if r.price_factor == f]
        twin = np.array([r.twin.score for r in at])
        real = np.array([r.real.score for r in at])
        mad = float(np.mean(np.abs(real - twin)))
        rho = float(spearmanr(twin, real).statistic)
        out.append(Agreement(f, mad, rho, len(at), mad <= MAD_TARGET and rho >= RHO_TARGET))
    return out


def run_check(
    prices: Sequence[float] = PRICE_FACTORS,
    seeds: Sequence[int] = TEST_SEEDS,
    *,
    n_jobs: int = N_JOBS,
    real_kwargs: Callable[[float], dict[str, Any]] | None = None,
    twin_kwargs: Callable[[float], dict[str, Any]] | None = None,
    panel_kwargs: dict[str, Any] | None = None,
    progress: Callable[[str], None] | None = None,
) -> tuple[list[CheckRow], dict[float, list[Member]]]:
    """Build the panel on the twin at each price and score it on both sides.

    ``real_kwargs``/``twin_kwargs`` map a price factor to env kwargs (default the two
    tasks'); the panel is always built on the twin task at that price.  Returns the rows
    and the panels (to score elsewhere, e.g. :func:`plain_scores` on another corpus).
    """
    real_kwargs = real_kwargs or (lambda f: env_kwargs(REAL_TASK, f, n_jobs))
    twin_kwargs = twin_kwargs or (lambda f: env_kwargs(TWIN_TASK, f, n_jobs))
    rows, panels = [], {}
    for f in prices:
        design = env_kwargs(TWIN_TASK, f, n_jobs)
        panel = build_panel(design, **(panel_kwargs or {}))
        panels[f] = panel
        if progress:
            progress(f"{f:g}x: panel of {len(panel)} built on the twin")
        twin = side_scores(TWIN_TASK, f, twin_kwargs(f), panel, seeds)
        real = side_scores(REAL_TASK, f, real_kwargs(f), panel, seeds)
        if progress:
            progress(f"{f:g}x: scored on both sides")
        rows += [CheckRow(f, m.name, m.kind, twin[m.name], real[m.name]) for m in panel]
    return rows, panels


def check_markdown(rows: Sequence[CheckRow]) -> str:
    """The per-stopper table (twin, real, difference with its CI) and the agreement lines."""
    lines = [
        "| price | stopper | kind | twin [95 % CI] | real [95 % CI] | real - twin [95 % CI] |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lo, hi = r.diff_ci
        lines.append(
            f"| {r.price_factor:g}x | {r.stopper} | {r.kind} | {_ci(r.twin)} | {_ci(r.real)} "
            f"| {r.diff:+.2f} [{lo:+.2f}, {hi:+.2f}] |"
        )
    lines += [
        "",
        "| price | stoppers | mean abs diff | Spearman rho | target met |",
        "|---|---|---|---|---|",
    ]
    for a in agreement(rows):
        lines.append(
            f"| {a.price_factor:g}x | {a.n} | {a.mad:.3f} (<= {MAD_TARGET}) "
            f"| {a.rho:.3f} (>= {RHO_TARGET}) | {'yes' if a.met else 'no'} |"
        )
    return "\n".join(lines)


def _ci(s: SideScore) -> str:
    return f"{s.score:.2f} [{s.lo:.2f}, {s.hi:.2f}]"


__all__ = [
    "MAD_TARGET",
    "REAL_TASK",
    "RHO_TARGET",
    "TEST_SEEDS",
    "TWIN_TASK",
    "Agreement",
    "CheckRow",
    "Member",
    "SideScore",
    "agreement",
    "build_panel",
    "check_markdown",
    "plain_scores",
    "run_check",
    "side_scores",
    "train_twin_backward",
]
