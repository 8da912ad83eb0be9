"""E12's normalised scores: the detectors played as the suite scores them, on the held-out runs.

:func:`heldout_task` is the task the held-out runs are scored on, :func:`train_task` the
one a utility-tuned detector is tuned for; :func:`score_rows` gives each detector's
normalised score from its jobs' first stops (:func:`per_job_runs`), the references played.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from baselines import NoStop
from baselines.curve_oracle import CurveOracle
from baselines.signals import decides_per_job, stop_flags
from evalstop_gym.corpus import CurveTrace, write_traces
from evalstop_gym.suite import HELDOUT_TASKS, is_heldout, suite_task

from ...scoring import (
    CURVE_ORACLE,
    EXTRA,
    NOSTOP,
    ORACLE,
    JobObs,
    Stopper,
    episode_arrays,
    job_observations,
    normalised_score,
    play,
    reference_sums,
    run_bootstrap_score,
    unit_sums,
    utility_terms,
)
from .tuning import Detector

#: The corpus task whose env settings the held-out score uses (and whose K the runs take).
BASE_TASK = "trl-gao"


def heldout_task(
    test: Sequence[CurveTrace], folder: Path, corpus: str = ""
) -> tuple[str, dict[str, Any]]:
    """(name, env kwargs) of the task the held-out runs are scored on.

    The suite's held-out task of a packaged corpus (``evalstop_gym.suite.HELDOUT_TASKS``:
    the test side of the same split, CurveOracle its reference); for any other corpus
    ``trl-gao``'s settings on the held-out runs alone, written to ``folder/heldout.jsonl``.
    """
    for name, packaged in HELDOUT_TASKS.items():
        if packaged == corpus:
            return name, suite_task(name, split="test")
    path = folder / "heldout.jsonl"
    write_traces(test, path)
    return f"{BASE_TASK} on the held-out runs", suite_task(BASE_TASK, curves=str(path))


def train_task(corpus: str = "") -> dict[str, Any]:
    """The env kwargs whose price and scale a utility-tuned detector is tuned for.

    The train side of the corpus's held-out task (``evalstop_gym.suite.HELDOUT_TASKS``), or
    ``trl-gao``'s settings for any other corpus (each run on its own scale).
    """
    for name, packaged in HELDOUT_TASKS.items():
        if packaged == corpus:
            return suite_task(name, split="train")
    return suite_task(BASE_TASK)


def score_stoppers(detectors: Sequence[Detector]) -> list[Stopper]:
    """The stoppers :func:`score_rows` scores: NoStop, every detector, both references."""
    stoppers = [Stopper(NOSTOP, "NoStop", NoStop())]
    for d in detectors:
        env = {"obs_fields": list(d.obs_fields)} if d.obs_fields else {}
        stoppers.append(Stopper(EXTRA, d.name, d.policy, env))
    # Both privileged references: a held-out task is normalised to the CurveOracle,
    # another corpus task to the Oracle (scoring.reference_for).
    stoppers.append(Stopper(CURVE_ORACLE, "CurveOracle", CurveOracle()))
    stoppers.append(Stopper(ORACLE, "Oracle", None))
    return stoppers


def score_rows(
    detectors: Sequence[Detector], kw: dict[str, Any], seeds: Sequence[int]
) -> dict[str, tuple[float, float, float]]:
    """Detector name -> (normalised score, CI low, CI high) on the env kwargs ``kw``.

    The numbers :func:`~evalstop_experiments.scoring.score_task` gives for
    :func:`score_stoppers` (a test compares them), without playing the per-job
    detectors: each job's end is its first stop on the observations the env shows it
    (:func:`per_job_runs`); only the privileged references are played.
    """
    stoppers = score_stoppers(detectors)
    heldout = is_heldout(kw)
    runs = []
    observations: dict[Any, list[JobObs]] = {}
    for st in stoppers:
        if decides_per_job(st.policy):
            runs.append(per_job_runs(st, kw, seeds, heldout, observations))
        else:
            terms = kw if heldout else None
            runs.append([play({**kw, **st.env}, s, st.policy, job_terms=terms) for s in seeds])
    _, u0, uref, groups, units = reference_sums(kw, seeds, stoppers, runs)
    out: dict[str, tuple[float, float, float]] = {}
    for st, rs in zip(stoppers, runs):
        u = [r["utility"] for r in rs]
        got = normalised_score(u, u0, uref)
        if units is not None:
            su = unit_sums(groups, [r["job_terms"] for r in rs])
            got = (got[0], *run_bootstrap_score(su, units[0], units[1])[1:])
        out[st.name] = got
    return out


def per_job_runs(
    st: Stopper,
    kw: dict[str, Any],
    seeds: Sequence[int],
    heldout: bool,
    observations: dict[Any, list[JobObs]] | None = None,
) -> list[dict[str, Any]]:
    """Per seed, the ``utility`` (and with ``heldout`` the ``job_terms``) a played episode of
    the per-job stopper ``st`` gives, from each job's first stop on its observations.

    A job's observations are the env's rows (:func:`~evalstop_experiments.scoring.job_observations`
    with the stopper's own ``env``), decided as ``act`` decides them
    (:func:`baselines.signals.stop_flags`); a job never stopped ends at its last checkpoint
    (the env asks every job after each checkpoint but its last: no truncation).  The utility is the episode's
    (:func:`evalstop_gym.sim.metrics.honest_metrics`: the terms V_end - V_1 summed by
    ``np.sum``), the job terms :func:`~evalstop_experiments.scoring.play`'s.
    ``observations`` keeps the jobs' observations by env and seed for the next stopper.
    """
    out = []
    cache = {} if observations is None else observations
    play_kw = {**kw, **st.env}
    for s in seeds:
        key = (repr(sorted(play_kw.items())), int(s))
        if key not in cache:
            cache[key] = job_observations(play_kw, int(s))
        jobs = cache[key]
        values = episode_arrays(kw, int(s)).values
        ends = np.full(len(jobs), values.shape[1])
        for j, job in enumerate(jobs):
            fired = np.flatnonzero(stop_flags(st.policy, job.obs))
            if len(fired):
                ends[j] = fired[0] + 1
        terms = utility_terms(values, ends)
        row: dict[str, Any] = {"utility": float(np.sum(terms))}
        if heldout:
            row["job_terms"] = terms
        out.append(row)
    return out
