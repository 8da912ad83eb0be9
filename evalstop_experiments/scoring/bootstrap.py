"""The scores' intervals: paired bootstraps over seeds, and over runs on a held-out task.

:func:`normalised_score` and :func:`paired_diff_ci` resample seeds; on a held-out task
:func:`run_bootstrap_score` and :func:`run_bootstrap_diff` resample its test runs (every
job that replays a run moves with it, summed per run by :func:`unit_sums`) and, apart,
the seeds for the synthetic jobs, with weights drawn once per shape and seed
(:func:`boot_weights`).  The ``*_score_diff`` functions are the paired difference of two
stoppers' scores.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class UnitSums:
    """A stopper's utility terms summed per bootstrap unit of a held-out task.

    Attributes:
        runs: ``{run_id: sum over seeds of its RLHF jobs' terms}`` (the test runs).
        seeds: (S,) each seed's sum over its synthetic (LoRA/DPO) jobs.
    """

    runs: dict[str, float]
    seeds: np.ndarray


def unit_sums(groups: Sequence[Sequence[str | None]], terms: Sequence[np.ndarray]) -> UnitSums:
    """Sum per-job terms by the run each job replays, and the synthetic jobs by seed."""
    runs: dict[str, float] = {}
    seeds = np.zeros(len(terms))
    for s, (group, t) in enumerate(zip(groups, terms)):
        for run, v in zip(group, t):
            if run is None:
                seeds[s] += float(v)
            else:
                runs[run] = runs.get(run, 0.0) + float(v)
    return UnitSums(runs, seeds)


@functools.lru_cache(maxsize=16)
def boot_weights(n_runs: int, n_seeds: int, n_boot: int, seed: int) -> tuple[np.ndarray, ...]:
    """(B, R) and (B, S) multiplicities of resampled runs and seeds (read-only).

    Drawn once per shape and seed: every stopper of a task (and the difference CIs) is
    resampled with the same weights, which are a function of these arguments alone.
    """
    rng = np.random.default_rng(seed)
    wr = rng.multinomial(n_runs, np.full(n_runs, 1 / n_runs), size=n_boot)
    ws = rng.multinomial(n_seeds, np.full(n_seeds, 1 / n_seeds), size=n_boot)
    wr.flags.writeable = False
    ws.flags.writeable = False
    return wr, ws


def run_bootstrap_score(
    u: UnitSums, u0: UnitSums, uref: UnitSums, n_boot: int = 2000, seed: int = 0
) -> tuple[float, float, float]:
    """(score, low, high): the normalised score and its 95 % bootstrap CI over runs.

    Each replicate resamples the test runs (every job that replays a run moves with
    it) and, apart, the seeds for the synthetic jobs; the three stoppers' sums are
    paired by unit.  The point score is the plain ratio of sums.
    """
    names = sorted(set(u.runs) | set(u0.runs) | set(uref.runs))
    num_r = np.array([u.runs.get(r, 0.0) - u0.runs.get(r, 0.0) for r in names])
    den_r = np.array([uref.runs.get(r, 0.0) - u0.runs.get(r, 0.0) for r in names])
    num_s, den_s = u.seeds - u0.seeds, uref.seeds - u0.seeds
    return _run_ratio(num_r, num_s, den_r, den_s, n_boot, seed)


def _sum_ratio(num_r: np.ndarray, num_s: np.ndarray, den_r: np.ndarray, den_s: np.ndarray) -> float:
    """The ratio of the sums over runs and seeds."""
    return float((num_r.sum() + num_s.sum()) / (den_r.sum() + den_s.sum()))


def _run_ratio(
    num_r: np.ndarray,
    num_s: np.ndarray,
    den_r: np.ndarray,
    den_s: np.ndarray,
    n_boot: int,
    seed: int,
) -> tuple[float, float, float]:
    """(ratio, low, high): :func:`_sum_ratio` and its 95 % CI, each replicate resampling
    the runs and, apart, the seeds (:func:`boot_weights`), numerator and denominator
    paired by unit."""
    wr, ws = boot_weights(len(num_r), len(num_s), n_boot, seed)
    boot = (wr @ num_r + ws @ num_s) / (wr @ den_r + ws @ den_s)
    lo, hi = np.percentile(boot, [2.5, 97.5])
    return _sum_ratio(num_r, num_s, den_r, den_s), float(lo), float(hi)


def _seed_ratio(
    num: np.ndarray, den: np.ndarray, n_boot: int, seed: int
) -> tuple[float, float, float]:
    """(ratio, low, high): ``mean(num) / mean(den)`` and its 95 % bootstrap CI over seeds,
    the two arrays resampled together (paired by seed)."""
    idx = np.random.default_rng(seed).integers(0, len(num), size=(n_boot, len(num)))
    boot = num[idx].mean(axis=1) / den[idx].mean(axis=1)
    lo, hi = np.percentile(boot, [2.5, 97.5])
    return float(num.mean() / den.mean()), float(lo), float(hi)


def run_bootstrap_diff(
    u: UnitSums, u0: UnitSums, n_seeds: int, n_boot: int = 2000, seed: int = 0
) -> tuple[float, float]:
    """The 95 % CI over runs (and seeds, for the synthetic jobs) of mean_s(U − U0)."""
    names = sorted(set(u.runs) | set(u0.runs))
    num_r = np.array([u.runs.get(r, 0.0) - u0.runs.get(r, 0.0) for r in names])
    num_s = u.seeds - u0.seeds
    wr, ws = boot_weights(len(names), len(num_s), n_boot, seed)
    lo, hi = np.percentile((wr @ num_r + ws @ num_s) / n_seeds, [2.5, 97.5])
    return float(lo), float(hi)


def run_bootstrap_score_diff(
    ua: UnitSums, ub: UnitSums, u0: UnitSums, uref: UnitSums, n_boot: int = 2000, seed: int = 0
) -> tuple[float, float, float, float, float]:
    """(score_a, score_b, diff, low, high): two stoppers' scores on the same held-out
    episodes and the 95 % CI over runs (and seeds, for synthetic jobs) of their difference,
    resampled as :func:`run_bootstrap_score` resamples one score."""
    names = sorted(set(ua.runs) | set(ub.runs) | set(u0.runs) | set(uref.runs))
    a, b, zero, ref = (np.array([u.runs.get(r, 0.0) for r in names]) for u in (ua, ub, u0, uref))
    den_r, den_s = ref - zero, uref.seeds - u0.seeds
    sa = _sum_ratio(a - zero, ua.seeds - u0.seeds, den_r, den_s)
    sb = _sum_ratio(b - zero, ub.seeds - u0.seeds, den_r, den_s)
    return (sa, sb, *_run_ratio(a - b, ua.seeds - ub.seeds, den_r, den_s, n_boot, seed))


def paired_score_diff(
    ua: Sequence[float],
    ub: Sequence[float],
    u0: Sequence[float],
    uref: Sequence[float],
    n_boot: int = 2000,
    seed: int = 0,
) -> tuple[float, float, float, float, float]:
    """(score_a, score_b, diff, low, high): two stoppers' scores on the same seeds and the
    95 % paired bootstrap CI over seeds of ``mean(Ua - Ub) / mean(Uref - U0)``."""
    ua, ub, u0, uref = (np.asarray(x, dtype=float) for x in (ua, ub, u0, uref))
    d = (uref - u0).mean()
    sa, sb = float((ua - u0).mean() / d), float((ub - u0).mean() / d)
    return (sa, sb, *_seed_ratio(ua - ub, uref - u0, n_boot, seed))


def normalised_score(
    u: Sequence[float],
    u0: Sequence[float],
    uref: Sequence[float],
    n_boot: int = 2000,
    seed: int = 0,
) -> tuple[float, float, float]:
    """(score, low, high): mean(U - U0) / mean(Uref - U0) and its 95 % paired bootstrap CI.

    Seeds are resampled together (the three arrays are paired by seed).
    """
    u, u0, uref = (np.asarray(a, dtype=float) for a in (u, u0, uref))
    return _seed_ratio(u - u0, uref - u0, n_boot, seed)


def paired_diff_ci(
    u: Sequence[float], u0: Sequence[float], n_boot: int = 2000, seed: int = 0
) -> tuple[float, float, float]:
    """Mean of U - U0 over seeds and its 95 % bootstrap CI."""
    d = np.asarray(u, dtype=float) - np.asarray(u0, dtype=float)
    idx = np.random.default_rng(seed).integers(0, len(d), size=(n_boot, len(d)))
    lo, hi = np.percentile(d[idx].mean(axis=1), [2.5, 97.5])
    return float(d.mean()), float(lo), float(hi)
