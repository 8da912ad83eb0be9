"""A task's episodes as the scoring path reads them: env kwargs, observations, arrays, plays.

:func:`env_kwargs` is a suite task's env at a price; :func:`job_observations` and
:func:`episode_arrays` build an episode's observations (per call, and as the arrays
the floor tuning reads) without running the cluster, the arrays cached across the
prices of a task (:func:`built_episode`, keyed by the corpus file's identity);
:func:`play` plays one episode of a stopper, and :func:`utility_terms` and
:func:`episode_job_runs` are what a held-out task's bootstrap over runs groups by.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

import evalstop_gym  # noqa: F401  (registers EvalStop-v0)
from baselines.evaluate import play_episode
from baselines.floors import EpisodeArrays
from baselines.policies import Policy
from evalstop_gym.envs.core import BOUNDS
from evalstop_gym.envs.evalstop import EvalStopEnv
from evalstop_gym.envs.tables import observation_rows
from evalstop_gym.errors import ConfigError
from evalstop_gym.fileio import file_identity
from evalstop_gym.sim.metrics import stop_values
from evalstop_gym.sim.real_curves import job_runs
from evalstop_gym.sim.workloads import JOB_TYPES
from evalstop_gym.suite import suite_task


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
        built_episode(key, seed, _curves_file(kw)) if key is not None else build_episode(kw, seed)
    )
    arrays, (true_eval, obs_eval, gpu_hours, deliver_best, step_frac) = built
    values = stop_values(
        true_eval, obs_eval, gpu_hours, kw["gpu_hour_price"], deliver_best, step_frac
    )
    return Episode(arrays, values)


def _curves_file(kw: dict[str, Any]) -> tuple[int, ...] | None:
    """The identity of ``kw``'s curve corpus file (:func:`evalstop_gym.fileio.file_identity`,
    as the corpus loaders key their caches).

    Part of :func:`built_episode`'s key: an episode cached from a file that has been
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
def built_episode(
    key: tuple, seed: int, curves_file: tuple[int, ...] | None
) -> tuple[EpisodeArrays, tuple]:
    """:func:`build_episode`, kept across the prices of a task (its arrays do not depend on
    it) while its curve corpus file, if any, is the same (``curves_file``)."""
    return build_episode(dict(key), seed)


def build_episode(kw: dict[str, Any], seed: int) -> tuple[EpisodeArrays, tuple]:
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
