"""The suite's one scoring path: play a stopper, normalise its utility, and score your own.

For a task (``evalstop_gym.suite_task``) at a price (the suite's price times a
factor) every stopper plays the same test seeds through ``EvalStop-v0`` and is
scored by

    score = mean_s (U_s - U0_s) / mean_s (Uref_s - U0_s)

with U the episode's utility (the env's return), U0 NoStop's (a practitioner
who runs every job to the end and keeps its best eval checkpoint) and Uref the
reference: the Bayes stopper on synthetic tasks, the privileged Oracle on
corpus tasks, the privileged CurveOracle on held-out real-run tasks
(``trl-heldout``; named in every row, :class:`Reference`).  The 95 % interval is
a paired percentile bootstrap over seeds; on a held-out task it is a bootstrap
over its test runs (:func:`run_bootstrap_score`: every job that replays a run
moves with it), and its floors tune on its train runs
(:func:`evalstop_gym.suite.tuning_kwargs`).  ΔJCT (mean JCT against NoStop's, %) is
given beside each score: the utility counts a job's own GPU-hours, not the
queueing its stop spares the others.

The floors (:data:`baselines.floors.FLOOR_FAMILIES`: StopAt-p, the
first-eval gate, running-max drop, k declines, level, gain, patience, gated
CUSUM, loss stall, stop-by-type) and the classical CUSUM are tuned on
validation seeds (:data:`VALIDATION_SEEDS`, disjoint from the test seeds),
per task and price, by the utility they would reach; the family with the
highest validation utility is the "Best floor".  Tuning is exact and cheap:
each of these stoppers decides a job from that job's own observations, and a
job's utility term depends only on where it ends, so every candidate of a
family is scored at once from the episode's observation arrays
(:func:`episode_arrays`, the values the observation shows) without running
the cluster.  :func:`job_observations` and :func:`offline_utility` are the
per-call reference the array scores are tested against.

Score your own stopper with :func:`score` (also ``evalstop_experiments.score``)::

    from evalstop_experiments import score
    rows = score(MyStopper(), "hard-0.12", seeds=range(5))
    rows[0].score, rows[0].score_lo, rows[0].score_hi

The stopper is a boundary: it receives observations through ``act(obs)``
(after ``reset()``, and, if it has one, ``check_observation_space`` with a copy
of the space) and returns actions; it never sees the env, the simulator or the
rewards.  On the command line: ``evalstop-gym benchmark --suite --policy
module:Class`` (or ``path/to/file.py:Class``).
"""

from __future__ import annotations

import copy
import csv
import enum
import functools
import importlib
import importlib.util
import math
import os
import secrets
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

import evalstop_gym  # noqa: F401  (registers EvalStop-v0)
from baselines.bayes import BayesStopper
from baselines.binding import for_task
from baselines.changepoint import Cusum
from baselines.curve_oracle import CurveOracle
from baselines.evaluate import check_seeds, play_episode
from baselines.floors import FLOOR_FAMILIES, EpisodeArrays, Family, FirstEvalGate, utilities
from baselines.policies import EvalStop, LossPlateau, NoStop, Policy, StopAtProgress
from evalstop_gym.envs.config import EvalStopConfig
from evalstop_gym.envs.core import BOUNDS
from evalstop_gym.envs.evalstop import EvalStopEnv
from evalstop_gym.envs.tables import observation_rows
from evalstop_gym.errors import ConfigError, is_real
from evalstop_gym.fileio import atomic_open, atomic_write, file_identity
from evalstop_gym.sim.metrics import stop_values
from evalstop_gym.sim.real_curves import corpus_eval_noise, job_runs
from evalstop_gym.sim.workloads import JOB_TYPES
from evalstop_gym.suite import CORPUS_TASKS, HELDOUT_TASKS, is_heldout, suite_task, tuning_kwargs

from .stats import seed_blocks

#: Seeds the floors are tuned on: disjoint from the test seeds 0..n-1 (n < 2000) and
#: from 1000..1005, which earlier tuning runs and audits looked at.
VALIDATION_SEEDS: tuple[int, ...] = tuple(range(2000, 2012))
#: The per-call reference tuning's grids (:func:`tuned_stoppers_per_call`).
STOP_AT_GRID: tuple[float, ...] = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
GATE_QUANTILES: tuple[float, ...] = (0.2, 0.4, 0.6, 0.8)
CUSUM_THRESHOLDS: tuple[float, ...] = (0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5)
CUSUM_DRIFTS: tuple[float, ...] = (0.0, 0.01, 0.03)


@dataclass
class JobObs:
    """The observation sequence of one job (one obs per decision) and its stop values."""

    obs: list[dict[str, np.ndarray]]
    values: np.ndarray  # (K,) utility term if the job ends after checkpoint i


def env_kwargs(
    task: str,
    factor: float = 1.0,
    n_jobs: int | None = None,
    curves=None,
    split: str | None = None,
) -> dict:
    """The task's env kwargs at ``factor`` x the suite's price (``split``: a held-out task's side)."""
    kw = suite_task(task, curves=curves, split=split)
    kw["gpu_hour_price"] = kw["gpu_hour_price"] * factor
    if n_jobs is not None:
        kw["n_jobs"] = n_jobs
    return kw


def job_observations(kw: dict[str, Any], seed: int) -> list[JobObs]:
    """Every job's observations, built as the env builds them, without running the cluster."""
    env = gym.make("EvalStop-v0", disable_env_checker=True, **kw)
    env.reset(seed=seed)
    base: EvalStopEnv = env.unwrapped  # type: ignore[assignment]
    sim = base.sim
    assert sim is not None
    c, b = sim.curves, sim.batch
    values = stop_values(
        c.true_eval,
        c.obs_eval,
        b.gpus * b.duration_h,
        kw["gpu_hour_price"],
        sim.deliver_best,
        sim.step_frac,
    )
    out = []
    for j in range(sim.n_jobs):
        seq = [base.observation_at(j, i) for i in range(1, sim.n_ckpt)]
        out.append(JobObs(seq, values[j]))
    env.close()
    return out


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


@dataclass(frozen=True)
class Episode:
    """One validation episode as the array scorers read it.

    Attributes:
        arrays: What the observation shows of every job (:class:`~baselines.floors.EpisodeArrays`).
        values: (n, K) each job's utility term if it ends after checkpoint i, at the price.
    """

    arrays: EpisodeArrays
    values: np.ndarray


def _price_free_key(kw: dict[str, Any]) -> tuple | None:
    """A hashable key of ``kw`` without its price (None: a value is unhashable)."""
    key = tuple(sorted((k, v) for k, v in kw.items() if k != "gpu_hour_price"))
    try:
        hash(key)
    except TypeError:
        return None
    return key


def episode_arrays(kw: dict[str, Any], seed: int) -> Episode:
    """Every job's observed values and stop values of one episode, without running the cluster.

    The arrays are the observation table the env shows (:func:`evalstop_gym.envs.tables.observation_rows`
    on the episode's curves: float32, clipped), read once per job; the stop values
    are :func:`job_observations`'s.  Needs every boundary field and the whole
    history in view (``eval_window`` = K, as every suite task has).
    """
    key = _price_free_key(kw)
    built = (
        _built_episode(key, seed, _curves_file(kw)) if key is not None else _build_episode(kw, seed)
    )
    arrays, (true_eval, obs_eval, gpu_hours, deliver_best, step_frac) = built
    values = stop_values(
        true_eval, obs_eval, gpu_hours, kw["gpu_hour_price"], deliver_best, step_frac
    )
    return Episode(arrays, values)


def _curves_file(kw: dict[str, Any]) -> tuple[int, ...] | None:
    """The identity of ``kw``'s curve corpus file (:func:`evalstop_gym.fileio.file_identity`,
    as the corpus loaders key their caches).

    Part of :func:`_built_episode`'s key: an episode cached from a file that has been
    rewritten since, at the same path, is not reused (None: no such file).
    """
    path = kw.get("curves")
    if not isinstance(path, str | os.PathLike):
        return None
    try:
        return file_identity(path)
    except OSError:
        return None


@functools.lru_cache(maxsize=256)
def _built_episode(
    key: tuple, seed: int, curves_file: tuple[int, ...] | None
) -> tuple[EpisodeArrays, tuple]:
    """:func:`_build_episode`, kept across the prices of a task (its arrays do not depend on
    it) while its curve corpus file, if any, is the same (``curves_file``)."""
    return _build_episode(dict(key), seed)


def _build_episode(kw: dict[str, Any], seed: int) -> tuple[EpisodeArrays, tuple]:
    """(the episode's arrays, the inputs of its stop values but the price)."""
    env = gym.make("EvalStop-v0", disable_env_checker=True, **kw)
    try:
        env.reset(seed=seed)
        base: EvalStopEnv = env.unwrapped  # type: ignore[assignment]
        sim = base.sim
        assert sim is not None
        layout, c, b = base.layout, sim.curves, sim.batch
        k = sim.n_ckpt
        missing = [f for f in ("job_type", "evals", "consecutive_declines", "progress", "loss")
                   if f not in layout.fields]  # fmt: skip
        if missing:
            raise ConfigError(
                "obs_fields", layout.fields, "every boundary field (floor tuning reads them)"
            )
        if layout.window != k:
            raise ConfigError(
                "eval_window", layout.window, f"the whole history ({k}) for floor tuning"
            )
        table = observation_rows(
            layout.fields, b.job_type, sim.declines, c.obs_eval, c.loss, layout.window,
            len(JOB_TYPES), BOUNDS,
        )  # fmt: skip
        col = {f: a for f, a, _ in layout.slices}
        w = layout.window
        evals32 = np.ascontiguousarray(table[:, k - 1, col["evals"] : col["evals"] + w])
        arrays = EpisodeArrays(
            evals=evals32.astype(float),
            loss=table[:, k - 1, col["loss"] : col["loss"] + w].astype(float),
            job_type=np.asarray(b.job_type, dtype=np.int64),
            progress=(np.arange(1, k + 1) / k).astype(np.float32).astype(float),
            declines=table[:, :, col["consecutive_declines"]].astype(float),
            evals32=evals32,
        )
        inputs = (c.true_eval, c.obs_eval, b.gpus * b.duration_h, sim.deliver_best, sim.step_frac)
    finally:
        env.close()
    return arrays, inputs


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


def stop_positions(record: Any) -> tuple[np.ndarray, np.ndarray]:
    """(end − true-peak progress of each hacking run, end progress of each healthy run)."""
    end = record.ckpt_done / record.n_ckpt
    hack = record.hacking.astype(bool)
    return end[hack] - record.peak_progress[hack], end[~hack]


def play(
    kw: dict[str, Any],
    seed: int,
    policy: Policy | None,
    job_terms: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One episode of ``policy`` (None: the privileged Oracle): utility, metrics, stop positions.

    The episode is :func:`baselines.evaluate.play_episode`'s (the policy sees
    observations only, and a copy of the observation space); ``stop_positions``
    holds :func:`stop_positions` of its record.  ``job_terms``: the task's env kwargs,
    to add ``row["job_terms"]``, each job's utility term V_end − V_1 (they sum to the
    utility), which a held-out task's bootstrap over runs groups by run.
    """
    row, record = play_episode(policy, seed, kw)
    row["stop_positions"] = stop_positions(record)
    if job_terms is not None:
        row["job_terms"] = utility_terms(episode_arrays(job_terms, seed).values, record.ckpt_done)
    return row


def utility_terms(values: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Each job's utility term V_end − V_1 (n,), from the episode's values (n, K) and the
    checkpoint (1..K) each job ended after."""
    ends = np.asarray(ends)
    return values[np.arange(len(ends)), ends - 1] - values[:, 0]


def episode_job_runs(kw: dict[str, Any], seed: int) -> list[str | None]:
    """The corpus run each job of an episode replays (None: a synthetic job)."""
    key = _price_free_key(kw)
    return list(_job_runs(key, seed)) if key is not None else list(_read_job_runs(kw, seed))


@functools.lru_cache(maxsize=256)
def _job_runs(key: tuple, seed: int) -> tuple[str | None, ...]:
    return _read_job_runs(dict(key), seed)


def _read_job_runs(kw: dict[str, Any], seed: int) -> tuple[str | None, ...]:
    env = gym.make("EvalStop-v0", disable_env_checker=True, **kw)
    try:
        env.reset(seed=seed)
        return tuple(job_runs(env.unwrapped.sim.curves))  # type: ignore[attr-defined]
    finally:
        env.close()


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
def _boot_weights(n_runs: int, n_seeds: int, n_boot: int, seed: int) -> tuple[np.ndarray, ...]:
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
    the runs and, apart, the seeds (:func:`_boot_weights`), numerator and denominator
    paired by unit."""
    wr, ws = _boot_weights(len(num_r), len(num_s), n_boot, seed)
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
    wr, ws = _boot_weights(len(names), len(num_s), n_boot, seed)
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


#: The stopper kind that plays each reference.
REFERENCE_KIND = {
    Reference.BAYES: BAYES,
    Reference.ORACLE: ORACLE,
    Reference.CURVE_ORACLE: CURVE_ORACLE,
}


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


@dataclass(frozen=True)
class PolicySource:
    """A policy class named ``module:Class`` or ``path/to/file.py:Class``, built with no arguments.

    Picklable (it holds the spec, not the class), so it builds the policy in the
    process that plays.  A learned stopper's spec (``pretrained:NAME``,
    ``model:PATH``) is :func:`baselines.learned.from_spec`'s.
    """

    spec: str

    def __post_init__(self) -> None:
        """Refuse a malformed spec, or one whose class (or model) cannot be loaded, at once."""
        from baselines.learned import SPEC_PREFIXES, from_spec

        if self.spec.partition(":")[0] in SPEC_PREFIXES:
            from_spec(self.spec)  # a bad name or a tampered model fails before any episode
        else:
            self.load()

    def load(self) -> Callable[[], Policy]:
        """The class (or zero-argument factory) the spec names."""
        from baselines.learned import SPEC_PREFIXES, from_spec

        if self.spec.partition(":")[0] in SPEC_PREFIXES:
            return functools.partial(from_spec, self.spec)
        where, sep, attr = self.spec.rpartition(":")
        if not sep or not where or not attr.isidentifier():
            raise ConfigError(
                "policy",
                self.spec,
                "'module:Class', 'path/to/file.py:Class', 'pretrained:NAME' or 'model:PATH'",
            )
        try:
            module = _load_module(where)
        except (ImportError, OSError, SyntaxError) as e:
            raise ConfigError("policy", self.spec, f"an importable module or file ({e})") from None
        obj = getattr(module, attr, None)
        if not callable(obj):
            raise ConfigError("policy", self.spec, f"a class {attr!r} defined in {where}")
        if isinstance(obj, type) and getattr(obj, "privileged", False):
            check_boundary_policy(obj, self.spec)  # refused before one is built
        return obj

    def __call__(self, task: str, kw: dict[str, Any]) -> Policy:
        """A fresh policy; one with ``check_observation_space`` must accept the task's space."""
        policy = for_task(self.load()(), kw)
        check = getattr(policy, "check_observation_space", None)
        if check is not None:
            try:
                check(copy.deepcopy(EvalStopEnv(**kw).observation_space))
            except ValueError as e:
                raise ValueError(f"--policy {self.spec} cannot play task {task}: {e}") from None
        return policy


def _load_module(where: str) -> Any:
    """A module by dotted name, or a ``.py`` file by path (loaded once per process)."""
    if not where.endswith(".py"):
        return importlib.import_module(where)
    path = Path(where).resolve()
    if not path.is_file():
        raise OSError(f"no file {where}")
    name = f"_evalstop_user_{abs(hash(str(path)))}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {where}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def isolated_spec(spec: str, name: str | None = None) -> StopperSpec:
    """The :class:`StopperSpec` of an untrusted stopper: it plays from its own process.

    The stopper's code is imported only in a child interpreter that receives
    observations and returns actions (:class:`~evalstop_experiments.isolated.IsolatedSource`),
    so it cannot reach the env, the simulator or this process's memory.  Use it with
    fresh test seeds (``seeds="fresh"``): isolation alone does not stop a stopper that
    recognises a public seed from its first observation.
    """
    from .isolated import IsolatedSource

    return StopperSpec(name or spec, IsolatedSource(spec))


def stopper_spec(spec: str) -> StopperSpec:
    """The :class:`StopperSpec` a command-line ``--policy`` spec names (checked now)."""
    return StopperSpec(spec, PolicySource(spec))


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
    from .regime_fit import fit_prior_on_task

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


def score(
    policy: Policy | StopperSpec | str,
    task: str,
    *,
    seeds: Iterable[int] | str = range(30),
    prices: Sequence[float] = (1.0,),
    n_jobs: int | None = None,
    curves: str | None = None,
    name: str | None = None,
    isolated: bool = False,
) -> list[ScoreRow]:
    """Your stopper's normalised score on a suite task, one row per price factor.

    Args:
        policy: A policy object (``reset()`` and ``act(obs) -> 0/1``), a
            :class:`StopperSpec`, or a spec string: ``module:Class``,
            ``path/to/file.py:Class`` (built with no arguments), ``pretrained:NAME``
            or ``model:PATH``.
        task: A suite task (``hard-0.12``, ``paper-0.05``, ``trl-gao``, ``trl-heldout``, ...).
        seeds: Test seeds; NoStop and the reference play the same ones.  The default,
            30, is the fewest the benchmark reports a score on; tune your stopper on
            other seeds (the suite's floors tune on :data:`VALIDATION_SEEDS`).
            ``"fresh"``: 30 seeds drawn now from OS entropy over the whole 64-bit
            seed space (:func:`fresh_seeds`; each row's ``test_seeds`` lists them),
            so no stopper can have seen them.
        prices: Factors of the suite's GPU-hour price.
        n_jobs: Jobs per episode (default: the task's).
        curves: The corpus of a corpus task (``micro-rlhf``), or one a held-out task
            replays in place of its own (its test runs scored, its train runs tuned on).
        name: Its display name (default: its class name or spec).
        isolated: Play the stopper from its own process (:func:`isolated_spec`; ``policy``
            must then be a spec string).  In-process scoring is not a sandbox: an
            untrusted stopper's ``act`` can walk the call stack to the env.  Pair it
            with ``seeds="fresh"``.

    Returns:
        One :class:`ScoreRow` per price: the score against :class:`Reference`
        (Bayes on synthetic tasks, the Oracle on corpus tasks, the CurveOracle on
        held-out tasks, whose CI is over test runs) with its 95 % CI,
        U − U0 with its CI, ΔJCT and the honest metrics.
    """
    spec = _as_spec(policy, name, isolated)
    check_run_arguments(task, prices, curves)
    seeds = resolve_seeds(seeds)
    rows = []
    for factor in prices:
        kw = env_kwargs(task, factor, n_jobs, curves)
        stoppers = [
            Stopper(NOSTOP, "NoStop", NoStop()),
            spec.build(task, kw),
            reference_stopper(kw),
        ]
        rows.append(score_task(task, factor, kw, stoppers, seeds)[1])
    return rows


def check_run_arguments(task: str, prices: Any, curves: Any) -> None:
    """Refuse, before any episode, price factors or a corpus that :func:`score` cannot use.

    ``prices``: a non-empty sequence of finite numbers > 0 (at price 0 stopping saves
    nothing and a score is undefined).  ``curves``: only for a corpus or held-out task.
    """
    if (
        isinstance(prices, str | bytes)
        or not isinstance(prices, Sequence)
        or not prices
        or not all(is_real(f) and math.isfinite(f) and f > 0 for f in prices)
    ):
        raise ConfigError("prices", prices, "a non-empty sequence of price factors > 0")
    if curves is not None and task not in CORPUS_TASKS and task not in HELDOUT_TASKS:
        suite_task(task)  # an unknown name is refused as such first
        raise ConfigError(
            "curves",
            curves,
            f"None for the synthetic task {task!r} (a corpus or held-out task replays one)",
        )


def _as_spec(
    policy: Policy | StopperSpec | str, name: str | None, isolated: bool, arg: str = "policy"
) -> StopperSpec:
    """The :class:`StopperSpec` of what :func:`score` accepts as a policy (checked now)."""
    if not isinstance(isolated, bool):
        raise ConfigError("isolated", isolated, "True or False")
    if isolated and not isinstance(policy, str):
        raise ConfigError(arg, policy, "a spec string ('file.py:Class', ...) with isolated=True")
    if isolated:
        return isolated_spec(policy, name)  # type: ignore[arg-type]
    if isinstance(policy, str):
        return StopperSpec(name or policy, PolicySource(policy))
    if isinstance(policy, StopperSpec):
        return policy
    shown = name or getattr(policy, "name", None) or type(policy).__name__
    check_boundary_policy(policy, str(shown))
    return StopperSpec(str(shown), _Given(policy))


@dataclass(frozen=True)
class Comparison:
    """Two stoppers on the same episodes of one task at one price, and their paired difference.

    ``score_a`` and ``score_b`` are each one's :func:`score` (against ``reference``);
    ``diff`` is ``score_a - score_b`` (``mean(U_a - U_b) / mean(Uref - U0)``) with its
    95 % paired interval ``[diff_lo, diff_hi]``: a bootstrap over seeds, on a held-out
    task over its test runs (the same resampling as the scores').  ``u_diff`` is the mean
    per-episode utility difference ``U_a - U_b`` with its interval, in the env's units.
    An interval that excludes 0 says which stopper is ahead on this task and price.
    """

    task: str
    price_factor: float
    reference: Reference
    seeds: int
    a: str
    b: str
    score_a: float
    score_b: float
    diff: float
    diff_lo: float
    diff_hi: float
    u_diff: float
    u_diff_lo: float
    u_diff_hi: float

    def as_dict(self) -> dict[str, Any]:
        """The fields, the reference by name."""
        d = dict(vars(self))
        d["reference"] = self.reference.value
        return d


def compare(
    a: Policy | StopperSpec | str,
    b: Policy | StopperSpec | str,
    task: str,
    *,
    seeds: Iterable[int] | str = range(30),
    prices: Sequence[float] = (1.0,),
    n_jobs: int | None = None,
    curves: str | None = None,
    names: tuple[str | None, str | None] = (None, None),
    isolated: bool = False,
) -> list[Comparison]:
    """Is ``a`` ahead of ``b`` on a suite task?  One :class:`Comparison` per price factor.

    Both play the same test seeds beside NoStop and the task's reference, as in
    :func:`score` (``a`` and ``b`` take what its ``policy`` takes; ``isolated`` applies to
    both), and their difference is scored paired, episode by episode (run by run on a
    held-out task), which is narrower than comparing two scores' separate intervals.
    :func:`compare_each` compares several stoppers with several others in one play.
    """
    if not isinstance(names, tuple) or len(names) != 2:
        raise ConfigError("names", names, "a pair (name of a or None, name of b or None)")
    spec_a = _as_spec(a, names[0], isolated, "a")
    spec_b = _as_spec(b, names[1], isolated, "b")
    return compare_each(
        [spec_a], [spec_b], task, seeds=seeds, prices=prices, n_jobs=n_jobs, curves=curves
    )


def compare_each(
    stoppers: Sequence[Policy | StopperSpec | str],
    against: Sequence[Policy | StopperSpec | str],
    task: str,
    *,
    seeds: Iterable[int] | str = range(30),
    prices: Sequence[float] = (1.0,),
    n_jobs: int | None = None,
    curves: str | None = None,
    isolated: bool = False,
) -> list[Comparison]:
    """:func:`compare` of every one of ``stoppers`` with every one of ``against``.

    Each stopper plays the test seeds once per price (not once per pair), beside NoStop
    and the task's reference, so a stopper's score is the same in all its pairs.
    Returns the comparisons price by price, then in the order of ``stoppers``, then of
    ``against``.
    """
    for arg, given in (("stoppers", stoppers), ("against", against)):
        if isinstance(given, str | bytes) or not isinstance(given, Sequence) or not given:
            raise ConfigError(arg, given, "a non-empty list of stoppers (objects or specs)")
    specs = [_as_spec(p, None, isolated, "stoppers") for p in stoppers]
    specs += [_as_spec(p, None, isolated, "against") for p in against]
    check_run_arguments(task, prices, curves)
    n_a = len(stoppers)
    seeds = resolve_seeds(seeds)
    out = []
    for factor in prices:
        kw = env_kwargs(task, factor, n_jobs, curves)
        nostop, ref = Stopper(NOSTOP, "NoStop", NoStop()), reference_stopper(kw)
        built = [spec.build(task, kw) for spec in specs]
        stoppers_played = [nostop, *built, ref]
        runs = play_stoppers(kw, stoppers_played, seeds)
        _, u0, uref, groups, units = reference_sums(kw, seeds, stoppers_played, runs)
        played = runs[1:-1]
        utils = [[r["utility"] for r in rs] for rs in played]
        sums = None
        if units is not None:
            sums = [unit_sums(groups, [r["job_terms"] for r in rs]) for rs in played]
        for i in range(n_a):
            for j in range(n_a, len(built)):
                out.append(
                    _comparison(task, factor, kw, seeds, built, utils, sums, u0, uref, units, i, j)
                )
    return out


def _comparison(
    task: str,
    factor: float,
    kw: dict[str, Any],
    seeds: Sequence[int],
    built: Sequence[Stopper],
    utils: Sequence[Sequence[float]],
    sums: Sequence[Any] | None,
    u0: Sequence[float],
    uref: Sequence[float],
    units: tuple[UnitSums, UnitSums] | None,
    i: int,
    j: int,
) -> Comparison:
    """The :class:`Comparison` of played stopper ``i`` with played stopper ``j``."""
    ua, ub = utils[i], utils[j]
    u_diff = paired_diff_ci(ua, ub)  # as score_task takes U - U0; over runs when held out
    if units is None or sums is None:
        scores = paired_score_diff(ua, ub, u0, uref)
    else:
        scores = run_bootstrap_score_diff(sums[i], sums[j], *units)
        u_diff = (u_diff[0], *run_bootstrap_diff(sums[i], sums[j], len(seeds)))
    return Comparison(
        task=task,
        price_factor=factor,
        reference=reference_for(kw),
        seeds=len(seeds),
        a=built[i].name,
        b=built[j].name,
        score_a=scores[0],
        score_b=scores[1],
        diff=scores[2],
        diff_lo=scores[3],
        diff_hi=scores[4],
        u_diff=u_diff[0],
        u_diff_lo=u_diff[1],
        u_diff_hi=u_diff[2],
    )


#: How many seeds ``seeds="fresh"`` draws.
FRESH_SEEDS = 30


def fresh_seeds(n: int = FRESH_SEEDS) -> list[int]:
    """``n`` test seeds from OS entropy, uniform over the 64-bit seed space (``reset(seed=...)``)."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ConfigError("seeds", n, "a number of fresh seeds >= 1")
    return [secrets.randbits(64) for _ in range(n)]


def resolve_seeds(seeds: Iterable[int] | str) -> list[int]:
    """The test seeds of ``seeds``: the integers given, or :func:`fresh_seeds` for ``"fresh"``."""
    allowed = "a non-empty iterable of distinct ints in [0, 2**64), or 'fresh'"
    if isinstance(seeds, str):
        if seeds != "fresh":
            raise ConfigError("seeds", seeds, allowed)
        return fresh_seeds(FRESH_SEEDS)
    if isinstance(seeds, int | np.integer):
        # A count where seeds were meant (the command line's --seeds N is a count).
        hint = f" (range({seeds}): the first {seeds} seeds)" if seeds >= 1 else ""
        raise ConfigError("seeds", seeds, allowed + hint)
    return check_seeds(seeds, allowed, limit=2**64)


@dataclass(frozen=True)
class _Given:
    """A factory that hands out the one policy object it was given, told the task
    (:func:`baselines.binding.for_task`: a model that reads the task's noise and price
    is told each task's and each price's, as a spec's model is)."""

    policy: Policy

    def __call__(self, task: str, kw: dict[str, Any]) -> Policy:
        return for_task(self.policy, kw)


def _nanmean(values: Sequence[float]) -> float:
    """Mean over the defined values (NaN, without a warning, when there are none)."""
    x = np.asarray(values, dtype=float)
    x = x[~np.isnan(x)]
    return float(x.mean()) if len(x) else float("nan")


def fmt(x: float, digits: int = 2) -> str:
    """``x`` with ``digits`` decimals ("–" for None or NaN)."""
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def markdown_table(rows: Sequence[dict[str, Any]]) -> str:
    """The suite table: one line per task and stopper, one score column per price.

    ``rows``: :meth:`ScoreRow.as_dict` rows; a stopper is found by its kind, not its name.
    """
    factors = sorted({r["price_factor"] for r in rows})
    head = ["task", "ref", "stopper"] + [f"score @ {f:g}× [95 % CI]" for f in factors]
    head += [f"ΔJCT % @ {f:g}×" for f in factors]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    keyed = {(r["task"], _key(r), r["price_factor"]): r for r in rows}
    weak = unreliable_prices(rows)
    seen: list[tuple[str, tuple[str, str]]] = []
    for r in rows:
        if (r["task"], _key(r)) not in seen:
            seen.append((r["task"], _key(r)))
    for task, key in seen:
        first = next(keyed[(task, key, f)] for f in factors if (task, key, f) in keyed)
        best = key[0] == BEST_FLOOR
        cells = [task, first["reference"], "Best floor" if best else first["stopper"]]
        for f in factors:
            r = keyed.get((task, key, f))
            if r is None:
                cells.append("–")
                continue
            named = f" ({best_family(r)})" if best else ""
            if (task, f) in weak:
                cells.append("n/a" + named)
            else:
                cell = f"{fmt(r['score'])} [{fmt(r['score_lo'])}, {fmt(r['score_hi'])}]"
                cells.append(cell + named)
        for f in factors:
            r = keyed.get((task, key, f))
            cells.append("–" if r is None else fmt(r["delta_jct_pct"], 1))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def best_family(row: dict[str, Any]) -> str:
    """The family a "Best floor" row plays (its display name is "Best floor (<family>)")."""
    return str(row["stopper"]).removeprefix("Best floor (").removesuffix(")")


#: The stoppers whose scores the CI-coverage check splits into blocks of seeds.
COVERAGE_KINDS: tuple[str, ...] = (BEST_FLOOR, CUSUM_TUNED, EVALSTOP, EXTRA, CURVE_ORACLE, ORACLE)


def coverage_check(rows: Sequence[ScoreRow], blocks: int = 3) -> list[dict[str, Any]]:
    """Each stopper's score on blocks of its test seeds, beside the full run's 95 % CI.

    The seeds are split in order into ``blocks`` near-equal blocks
    (:func:`~evalstop_experiments.stats.seed_blocks`, e.g. 3 blocks of 10 of 30);
    each block is scored as the full run is (:func:`normalised_score` on its
    seeds).  ``inside`` says whether each block's score falls in the full run's
    interval: a CI that covers its run's blocks poorly is too narrow for the
    seed-to-seed spread.  Rows of :data:`COVERAGE_KINDS` with per-seed data only,
    and only with at least 2 seeds a block.
    """
    out = []
    for r in rows:
        if r.stopper_kind not in COVERAGE_KINDS or len(r.per_seed) < 2 * blocks:
            continue
        u, u0, uref = (np.array(x) for x in zip(*r.per_seed))
        parts = [normalised_score(u[b], u0[b], uref[b]) for b in seed_blocks(len(u), blocks)]
        out.append(
            {
                "task": r.task,
                "price_factor": r.price_factor,
                "stopper": r.stopper,
                "seeds": r.seeds,
                "score": r.score,
                "score_lo": r.score_lo,
                "score_hi": r.score_hi,
                "blocks": parts,
                "inside": [r.score_lo <= b[0] <= r.score_hi for b in parts],
            }
        )
    return out


def coverage_table(checks: Sequence[dict[str, Any]]) -> str:
    """The CI-coverage check as Markdown: full score and CI, each block's score and CI."""
    if not checks:
        return "CI coverage: too few seeds to split into blocks.\n"
    n = len(checks[0]["blocks"])
    head = ["task", "price", "stopper", "score [95 % CI]"]
    head += [f"block {i + 1}" for i in range(n)] + ["blocks inside CI"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for c in checks:
        cells = [c["task"], f"{c['price_factor']:g}×", c["stopper"]]
        cells.append(f"{fmt(c['score'])} [{fmt(c['score_lo'])}, {fmt(c['score_hi'])}]")
        cells += [f"{fmt(b[0])} [{fmt(b[1])}, {fmt(b[2])}]" for b in c["blocks"]]
        cells.append(f"{sum(c['inside'])}/{len(c['inside'])}")
        lines.append("| " + " | ".join(cells) + " |")
    inside = sum(sum(c["inside"]) for c in checks)
    total = sum(len(c["inside"]) for c in checks)
    seeds = checks[0]["seeds"]
    return (
        f"CI coverage: the test seeds in {n} blocks of ~{seeds // n}, each scored alone; "
        f"{inside} of {total} block scores fall inside their full run's 95 % CI.\n\n"
        + "\n".join(lines)
        + "\n"
    )


def unreliable_prices(rows: Sequence[dict[str, Any]]) -> set[tuple[str, float]]:
    """The (task, price factor) pairs whose reference does not beat NoStop significantly.

    There the score's denominator, mean(Uref − U0), has a 95 % interval that reaches 0, so
    every ratio can blow up (a quick run on few seeds shows -350 [-805, 859]): the tables
    show "n/a" instead of a number, and the CSV keeps the numbers.
    """
    return {
        (r["task"], r["price_factor"])
        for r in rows
        if r["stopper_kind"] == REFERENCE_KIND[Reference(r["reference"])]
        and not r["u_minus_u0_lo"] > 0
    }


#: What a table of normalised scores means (E8.md, E7_scores.md, REPORT.md).
SCORE_LEGEND = (
    "Normalised score (U − U0) / (Uref − U0): 0 = NoStop keeping each run's best "
    "checkpoint, 1 = the reference (`ref`: Bayes on synthetic tasks, the privileged "
    "Oracle on real corpora); 95 % paired bootstrap CI over seeds. n/a: the "
    "reference's own gain over NoStop is not significant at that price (its 95 % CI "
    "reaches 0), so no ratio is shown (the CSV keeps it). ΔJCT: mean JCT against NoStop's."
)
#: What a held-out real-run table's intervals mean (added to :data:`SCORE_LEGEND`).
HELDOUT_LEGEND = (
    "Held-out real-run tasks (`ref` CurveOracle): floors and CUSUM tuned on the corpus's "
    "train runs, scores on its test runs, each episode with fresh measurement noise; the "
    "95 % interval is a bootstrap over test runs (every job replaying a run resampled with "
    "it; the synthetic LoRA/DPO jobs by seed), not over seeds."
)


def write_scores(
    out: str | Path,
    rows: Sequence[dict[str, Any]],
    stem: str,
    title: str,
    figures: Sequence[Path] = (),
    notes: str = "",
) -> list[Path]:
    """Write ``<stem>.csv`` (every column but ``stopper_kind``) and ``<stem>.md``.

    The Markdown holds the table, then ``notes`` (Markdown), then ``figures``.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    csv_path, md_path = out / f"{stem}.csv", out / f"{stem}.md"
    columns = [c for c in rows[0] if c != "stopper_kind"]
    with atomic_open(csv_path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=columns, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    atomic_write(
        md_path,
        f"# {title}\n\n{SCORE_LEGEND}\n\n"
        + (f"{HELDOUT_LEGEND}\n\n" if _any_heldout(rows) else "")
        + markdown_table(rows)
        + (f"\n{notes}" if notes else "")
        + "".join(f"\n![{p.stem}]({p.name})\n" for p in figures),
    )
    return [csv_path, md_path]


def _any_heldout(rows: Sequence[dict[str, Any]]) -> bool:
    """Whether any row is normalised to the CurveOracle (a held-out real-run task's)."""
    return any(r.get("reference") == Reference.CURVE_ORACLE.value for r in rows)


def _key(r: dict[str, Any]) -> tuple[str, str]:
    """A score row's stopper identity (:attr:`ScoreRow.key`) from its dict."""
    kind = r["stopper_kind"]
    return (kind, r["stopper"] if kind == EXTRA else "")
