"""One task at one price scored: the suite's stoppers, their plays, and one :class:`ScoreRow` each.

:func:`suite_stoppers` is every stopper of the suite (the floors tuned on the validation
seeds); :func:`score_task` plays them on the same test seeds (:func:`play_stoppers`,
the Best floor's episodes played once) and normalises each by NoStop and the reference
(:func:`reference_sums`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from baselines.policies import EvalStop, LossPlateau, NoStop
from evalstop_gym.suite import is_heldout, tuning_kwargs

from .bootstrap import (
    UnitSums,
    normalised_score,
    paired_diff_ci,
    run_bootstrap_diff,
    run_bootstrap_score,
    unit_sums,
)
from .episodes import episode_job_runs, play
from .reference import REFERENCE_KIND, Reference, reference_for, references
from .stoppers import (
    BEST_FLOOR,
    CUSUM_TUNED,
    EVALSTOP,
    EXTRA,
    FLOOR_KINDS,
    LOSS_PLATEAU,
    NOSTOP,
    Stopper,
    StopperSpec,
)
from .tuning import best_floor, tune_floors

#: Per-episode metrics averaged over seeds in every row.
METRIC_COLUMNS: tuple[str, ...] = (
    "utility",
    "mean_jct_h",
    "precision",
    "recall",
    "fpr",
    "fpr_rlhf",
    "recall_after_peak",
    "stops_before_peak_frac",
    "killed_healthy_gpu_hours",
    "total_gpu_hours",
    "wasted_gpu_hours",
    "regret_vs_oracle",
)

#: The columns of a score row's CSV line, in order.
SCORE_COLUMNS: tuple[str, ...] = (
    "task",
    "price_factor",
    "gpu_hour_price",
    "stopper",
    "params",
    "reference",
    "seeds",
    "score",
    "score_lo",
    "score_hi",
    "u_minus_u0",
    "u_minus_u0_lo",
    "u_minus_u0_hi",
    "delta_jct_pct",
    *METRIC_COLUMNS,
)


@dataclass(frozen=True)
class ScoreRow:
    """One stopper's score on one task at one price.

    ``score`` is ``mean(U - U0) / mean(Uref - U0)`` with its 95 % paired bootstrap
    interval ``[score_lo, score_hi]``; ``reference`` says what Uref is.
    ``u_minus_u0`` is the mean utility gain over NoStop with its interval,
    ``delta_jct_pct`` the mean JCT against NoStop's in %, and ``metrics`` the
    per-episode metrics of :data:`METRIC_COLUMNS` (the honest ones among them:
    ``fpr_rlhf``, ``killed_healthy_gpu_hours``, ``total_gpu_hours``,
    ``recall_after_peak``, ``stops_before_peak_frac``, ``regret_vs_oracle``)
    averaged over seeds.  ``stopper`` and ``params`` are for display;
    ``stopper_kind`` (with an extra stopper's name, :attr:`key`) identifies it.
    """

    task: str
    price_factor: float
    gpu_hour_price: float
    stopper_kind: str
    stopper: str
    params: str
    reference: Reference
    seeds: int
    score: float
    score_lo: float
    score_hi: float
    u_minus_u0: float
    u_minus_u0_lo: float
    u_minus_u0_hi: float
    delta_jct_pct: float
    metrics: dict[str, float]
    #: The test seeds, in order, and each seed's (U, U0, Uref) (not CSV columns).
    test_seeds: tuple[int, ...] = field(default=(), repr=False, compare=False)
    per_seed: tuple[tuple[float, float, float], ...] = field(default=(), repr=False, compare=False)

    @property
    def key(self) -> tuple[str, str]:
        """The stopper's identity: its kind, and an extra stopper's name."""
        return (self.stopper_kind, self.stopper if self.stopper_kind == EXTRA else "")

    def as_dict(self) -> dict[str, Any]:
        """The CSV columns (:data:`SCORE_COLUMNS`, reference by name), then ``stopper_kind``."""
        d: dict[str, Any] = {
            "task": self.task,
            "price_factor": self.price_factor,
            "gpu_hour_price": self.gpu_hour_price,
            "stopper": self.stopper,
            "params": self.params,
            "reference": self.reference.value,
            "seeds": self.seeds,
            "score": self.score,
            "score_lo": self.score_lo,
            "score_hi": self.score_hi,
            "u_minus_u0": self.u_minus_u0,
            "u_minus_u0_lo": self.u_minus_u0_lo,
            "u_minus_u0_hi": self.u_minus_u0_hi,
            "delta_jct_pct": self.delta_jct_pct,
            **self.metrics,
        }
        d["stopper_kind"] = self.stopper_kind
        return d


def suite_stoppers(
    task: str,
    kw: dict[str, Any],
    val_seeds: Sequence[int] = (),
    extra: Sequence[StopperSpec] = (),
) -> list[Stopper]:
    """Every stopper of the suite for one task and price, ``extra`` ones before the references.

    NoStop, each floor family tuned on ``val_seeds`` ("<family> (tuned)"), the
    "Best floor" (the family with the highest validation utility, named in
    its display name "Best floor (<family>)"), the tuned CUSUM, LossPlateau,
    EvalStop(k=2), the extra stoppers, then :func:`references`.
    """
    # A held-out task's floors tune on its train runs (the validation seeds play them).
    tuned = tune_floors(tuning_kwargs(kw), val_seeds)
    best = best_floor(tuned)
    floors = [t for t in tuned.values() if t.family.floor]
    return [
        Stopper(NOSTOP, "NoStop", NoStop()),
        *(Stopper(t.family.key, f"{t.family.label} (tuned)", t.policy) for t in floors),
        Stopper(BEST_FLOOR, f"Best floor ({best.family.label})", best.policy),
        Stopper(CUSUM_TUNED, "CUSUM (tuned)", tuned[CUSUM_TUNED].policy),
        Stopper(LOSS_PLATEAU, "LossPlateau", LossPlateau()),
        Stopper(EVALSTOP, "EvalStop(k=2)", EvalStop(2)),
        *(spec.build(task, kw) for spec in extra),
        *references(kw),
    ]


def score_task(
    task: str,
    factor: float,
    kw: dict[str, Any],
    stoppers: Sequence[Stopper],
    seeds: Sequence[int],
    positions: dict[tuple[str, float, str], tuple[np.ndarray, np.ndarray]] | None = None,
) -> list[ScoreRow]:
    """Rows (one per stopper) of one task at one price: score, CI, ΔJCT and metrics.

    ``stoppers`` must hold NoStop and the task's reference (:func:`reference_for`).
    ``positions``, if given, receives each stopper's stop positions pooled over
    seeds under ``(task, factor, display name)`` (see :func:`stop_positions`).
    """
    runs = play_stoppers(kw, stoppers, seeds)
    if positions is not None:
        for st, rs in zip(stoppers, runs):
            positions[(task, factor, st.name)] = tuple(  # type: ignore[assignment]
                np.concatenate([r["stop_positions"][i] for r in rs]) for i in (0, 1)
            )
    ref = reference_for(kw)
    by_kind, u0, uref, groups, units = reference_sums(kw, seeds, stoppers, runs)
    jct0 = np.mean([r["mean_jct_h"] for r in by_kind[NOSTOP]])
    rows = []
    for st, rs in zip(stoppers, runs):
        u = [r["utility"] for r in rs]
        score_, lo, hi = normalised_score(u, u0, uref)
        diff, dlo, dhi = paired_diff_ci(u, u0)
        if units is not None:
            su = unit_sums(groups, [r["job_terms"] for r in rs])
            _, lo, hi = run_bootstrap_score(su, units[0], units[1])
            diff_runs = run_bootstrap_diff(su, units[0], len(seeds))
            dlo, dhi = diff_runs
        mean = {k: _nanmean([r[k] for r in rs]) for k in METRIC_COLUMNS}
        rows.append(
            ScoreRow(
                task=task,
                price_factor=factor,
                gpu_hour_price=kw["gpu_hour_price"],
                stopper_kind=st.kind,
                stopper=st.name,
                params="privileged" if st.privileged else repr(st.policy),
                reference=ref,
                seeds=len(seeds),
                score=score_,
                score_lo=lo,
                score_hi=hi,
                u_minus_u0=diff,
                u_minus_u0_lo=dlo,
                u_minus_u0_hi=dhi,
                delta_jct_pct=100.0 * (mean["mean_jct_h"] - jct0) / jct0,
                metrics=mean,
                test_seeds=tuple(int(x) for x in seeds),
                per_seed=tuple(zip(u, u0, uref)),
            )
        )
    return rows


def play_stoppers(
    kw: dict[str, Any], stoppers: Sequence[Stopper], seeds: Sequence[int]
) -> list[list[dict[str, Any]]]:
    """Every stopper's episodes on ``seeds`` (:func:`play`; a held-out task's with each job's
    utility term); the Best floor's are its family's tuned floor's, played once."""
    terms = kw if is_heldout(kw) else None
    runs: list[list[dict[str, Any]]] = []
    for n, st in enumerate(stoppers):
        same = _same_floor(st, stoppers[:n])
        if same is not None:  # the Best floor: its family's tuned floor, played above
            runs.append(runs[same])
            continue
        runs.append([play({**kw, **st.env}, s, st.policy, job_terms=terms) for s in seeds])
    return runs


def reference_sums(
    kw: dict[str, Any],
    seeds: Sequence[int],
    stoppers: Sequence[Stopper],
    runs: Sequence[Sequence[dict[str, Any]]],
) -> tuple[
    dict[str, Sequence[dict[str, Any]]],
    list[float],
    list[float],
    list[Any] | None,
    tuple[UnitSums, UnitSums] | None,
]:
    """What every stopper's score on ``kw`` is normalised by, from the played ``runs``.

    Returns the runs by stopper kind, NoStop's and the reference's utilities per seed,
    and on a held-out task the runs of every episode's jobs and NoStop's and the
    reference's per-unit sums (None elsewhere).
    """
    by_kind = {st.kind: rs for st, rs in zip(stoppers, runs)}
    ref_runs = by_kind[REFERENCE_KIND[reference_for(kw)]]
    u0 = [r["utility"] for r in by_kind[NOSTOP]]
    uref = [r["utility"] for r in ref_runs]
    if not is_heldout(kw):
        return by_kind, u0, uref, None, None
    groups = [episode_job_runs(kw, s) for s in seeds]
    t0 = [r["job_terms"] for r in by_kind[NOSTOP]]
    tref = [r["job_terms"] for r in ref_runs]
    return by_kind, u0, uref, groups, (unit_sums(groups, t0), unit_sums(groups, tref))


def _same_floor(st: Stopper, before: Sequence[Stopper]) -> int | None:
    """The index in ``before`` of the tuned floor that ``st`` (the Best floor) is, if any.

    The Best floor plays the very policy object of its family's tuned floor in the same
    env; a floor decides each job from its observation alone, so its episodes on the same
    seeds are the same, and are played once.
    """
    if st.kind != BEST_FLOOR:
        return None
    for i, other in enumerate(before):
        if other.kind in FLOOR_KINDS and other.policy is st.policy and other.env == st.env:
            return i
    return None


def _nanmean(values: Sequence[float]) -> float:
    """Mean over the defined values (NaN, without a warning, when there are none)."""
    x = np.asarray(values, dtype=float)
    x = x[~np.isnan(x)]
    return float(x.mean()) if len(x) else float("nan")
