"""Floor tuning: every floor family and the classical CUSUM tuned on the validation seeds.

Each of these stoppers decides a job from that job's own observations, so every
candidate of a family is scored at once from an episode's arrays
(:func:`family_utilities`); :func:`tune_floors` tunes every family of
:data:`~baselines.floors.FLOOR_FAMILIES` and :func:`best_floor` picks the "Best floor".
:func:`offline_utility`, :func:`tune` and :func:`tuned_stoppers_per_call` are the
per-call reference the array scores are tested against.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from baselines.changepoint import Cusum
from baselines.floors import FLOOR_FAMILIES, Family, FirstEvalGate, utilities
from baselines.policies import Policy, StopAtProgress

from .episodes import Episode, JobObs, episode_arrays, job_observations

#: Seeds the floors are tuned on: disjoint from the test seeds 0..n-1 (n < 2000) and
#: from 1000..1005, which earlier tuning runs and audits looked at.
VALIDATION_SEEDS: tuple[int, ...] = tuple(range(2000, 2012))
#: The per-call reference tuning's grids (:func:`tuned_stoppers_per_call`).
STOP_AT_GRID: tuple[float, ...] = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
GATE_QUANTILES: tuple[float, ...] = (0.2, 0.4, 0.6, 0.8)
CUSUM_THRESHOLDS: tuple[float, ...] = (0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5)
CUSUM_DRIFTS: tuple[float, ...] = (0.0, 0.01, 0.03)


def offline_utility(policy: Policy, jobs: Sequence[JobObs]) -> float:
    """The utility ``policy`` reaches on these jobs (exact for a per-job stopper)."""
    total = 0.0
    for job in jobs:
        end = len(job.values)
        for i, obs in enumerate(job.obs, start=1):
            if policy.act(obs):
                end = i
                break
        total += job.values[end - 1] - job.values[0]
    return total


def tune(candidates: Iterable[Policy], episodes: Sequence[Sequence[JobObs]]) -> Policy:
    """The candidate with the highest utility summed over the validation episodes."""
    best, best_u = None, -math.inf
    for pol in candidates:
        u = sum(offline_utility(pol, jobs) for jobs in episodes)
        if u > best_u:
            best, best_u = pol, u
    assert best is not None
    return best


def gate_candidates(episodes: Sequence[Sequence[JobObs]]) -> list[Policy]:
    """First-eval gates: every stop progress x thresholds at quantiles of the first evals."""
    firsts = [
        float(np.mean(FirstEvalGate(0.5, 0.0).first_evals(j.obs[-1])))
        for jobs in episodes
        for j in jobs
        if int(np.argmax(j.obs[0]["job_type"])) == 2
    ]
    thresholds = np.quantile(firsts, GATE_QUANTILES) if firsts else [0.0]
    return [FirstEvalGate(p, float(t)) for p in STOP_AT_GRID for t in thresholds]


def tuned_stoppers_per_call(kw: dict[str, Any], val_seeds: Sequence[int]) -> dict[str, Policy]:
    """StopAt-p, the gate and CUSUM tuned by per-call ``act`` (the reference the arrays replace)."""
    episodes = [job_observations(kw, s) for s in val_seeds]
    return {
        "StopAt (tuned)": tune((StopAtProgress(p) for p in STOP_AT_GRID), episodes),
        "Gate (tuned)": tune(gate_candidates(episodes), episodes),
        "CUSUM (tuned)": tune(
            (Cusum(h, d) for h in CUSUM_THRESHOLDS for d in CUSUM_DRIFTS), episodes
        ),
    }


def family_utilities(
    family: Family, candidates: Sequence[Policy], episodes: Sequence[Episode]
) -> np.ndarray:
    """(P,): each candidate's utility summed over ``episodes``, from the arrays (no ``act``).

    Equal to ``sum(offline_utility(c, jobs) for jobs in episodes)`` bit for bit
    (the same terms added in the same order).
    """
    total: Any = 0
    for ep in episodes:
        total = total + utilities(family.ends(candidates, ep.arrays), ep.values)
    return np.asarray(total, dtype=float) * np.ones(len(candidates))


@dataclass(frozen=True)
class TunedFloor:
    """A family's tuned member and the utility it reached on the validation episodes."""

    family: Family
    policy: Policy
    utility: float


def tune_family(family: Family, episodes: Sequence[Episode]) -> TunedFloor:
    """The family's candidate with the highest validation utility (the first on a tie)."""
    candidates = family.grid([ep.arrays for ep in episodes])
    u = family_utilities(family, candidates, episodes)
    best = int(np.argmax(u))
    return TunedFloor(family, candidates[best], float(u[best]))


def tune_floors(kw: dict[str, Any], val_seeds: Sequence[int]) -> dict[str, TunedFloor]:
    """Every family of :data:`~baselines.floors.FLOOR_FAMILIES` tuned on ``val_seeds``; by key."""
    episodes = [episode_arrays(kw, int(s)) for s in val_seeds]
    return {f.key: tune_family(f, episodes) for f in FLOOR_FAMILIES}


def best_floor(tuned: dict[str, TunedFloor]) -> TunedFloor:
    """The floor family with the highest validation utility (the first on a tie)."""
    floors = [t for t in tuned.values() if t.family.floor]
    best = floors[0]
    for t in floors[1:]:
        if t.utility > best.utility:
            best = t
    return best


def tuned_stoppers(kw: dict[str, Any], val_seeds: Sequence[int]) -> dict[str, Policy]:
    """Every floor family and CUSUM, tuned on ``val_seeds`` for these env kwargs; by display name."""
    return {f"{t.family.label} (tuned)": t.policy for t in tune_floors(kw, val_seeds).values()}
