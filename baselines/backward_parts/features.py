"""What a backward-induction model reads of a decision: its features and the task settings.

The features of a job's boundary observation (:data:`FEATURES`, and the trend averages
of :data:`SMOOTH_FEATURES`), computed for many jobs at one decision
(:func:`feature_matrix`, :func:`features_at`); the decision bucket a decision falls in
(:func:`bucket_of`); and the task settings a platform knows (:data:`SETTINGS`,
:func:`settings_for_task`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..floors import EpisodeArrays

#: The task settings a model reads besides the observation (a platform knows them).
SETTINGS: tuple[str, ...] = ("eval_noise", "gpu_hour_price")
#: The features of one decision, in column order.
FEATURES: tuple[str, ...] = (
    "progress",
    "evals_seen",
    "evals_per_run",
    "eval_noise",
    "price_milli",
    "remaining_cost",
    "type_lora",
    "type_dpo",
    "type_rlhf",
    "gain_last",
    "gain_max",
    "gap",
    "gap_z",
    "gain_max_z",
    "gain_last_z",
    "tail3_minus_max",
    "tail5_minus_max",
    "since_best",
    "declines",
    "slope3",
    "slope5",
    "slope3_z",
    "rel2",
    "rel3",
    "rel4",
    "rel5",
    "rel6",
    "loss_last",
    "loss_change3",
)
#: Smoothed trend features (the ``smoothed`` set appends them to :data:`FEATURES`): one
#: eval is as noisy as a whole fall at sigma 0.12, so a decline shows only in averages.
#: ``olsW_z``: the least-squares slope of the last W evals; ``meanA_prevA_z``: the mean of
#: the last A evals minus the mean of the A before; ``ma3_*``: the 3-eval moving average's
#: gap below its own max and the evals since that max; then the mean of every eval minus
#: the first and the last three's mean minus it (``_z``: in noise units); the first and
#: the last three evals' mean, the mean of every eval and the moving average's max as
#: levels (regimes start, rise to and end at different levels).
SMOOTH_FEATURES: tuple[str, ...] = (
    "ols4_z",
    "ols6_z",
    "ols10_z",
    "mean3_prev3_z",
    "mean5_prev5_z",
    "ma3_gap_z",
    "ma3_since_best",
    "mean_minus_first_z",
    "tail3_minus_mean_z",
    "first3_mean",
    "last3_mean",
    "mean_level",
    "ma3_max_level",
)
#: The feature sets a model may declare (its metadata ``features`` is one of these lists):
#: ``boundary`` the single-eval features alone, ``smoothed`` with the trend averages.
FEATURE_SETS: dict[str, tuple[str, ...]] = {
    "boundary": FEATURES,
    "smoothed": FEATURES + SMOOTH_FEATURES,
}
#: The feature set :func:`fit_backward` trains on unless told otherwise.
DEFAULT_FEATURES = "smoothed"
#: The noise level below which noise-scaled features use this floor (noise-free tasks).
NOISE_FLOOR = 0.01
#: Decision buckets of a model: decision i of a K-checkpoint job is bucket round(i * G / K).
DEFAULT_GRID = 20


def feature_matrix(
    evals: np.ndarray,
    loss: np.ndarray,
    job_type: np.ndarray,
    progress: float,
    declines: np.ndarray,
    eval_noise: float,
    gpu_hour_price: float,
    smoothed: bool = False,
) -> np.ndarray:
    """(n, F) features of n jobs at one decision, each with ``i`` evals seen.

    Args:
        evals: (n, i) the evals observed so far, oldest first (the whole history).
        loss: (n, i) the losses observed so far.
        job_type: (n,) job type indices.
        progress: The declared progress i / K (as the observation carries it).
        declines: (n,) the ``consecutive_declines`` field.
        eval_noise: The task's eval-noise level.
        gpu_hour_price: The task's price of a GPU-hour.
        smoothed: Append :data:`SMOOTH_FEATURES` (F = 42; else :data:`FEATURES`, F = 29).

    A value a short history cannot give (a slope over 5 evals after 3) is NaN;
    the trees route it as they learned to.
    """
    e = np.asarray(evals, dtype=float)
    n, i = e.shape
    lo = np.asarray(loss, dtype=float)
    t = np.asarray(job_type)
    sig = max(float(eval_noise), NOISE_FLOOR)
    k = round(i / progress) if progress > 0 else i
    e0, last = e[:, 0], e[:, -1]
    m = e.max(axis=1)
    since = (i - 1 - np.argmax(e, axis=1)).astype(float)
    nan = np.full(n, np.nan)

    def tail(q: int) -> np.ndarray:
        return e[:, -min(q, i) :].mean(axis=1)

    def back(q: int) -> np.ndarray:  # the q-th last eval, NaN if fewer were seen
        return e[:, -q] if i >= q else nan

    slope3 = (last - back(3)) / 2.0
    slope5 = (last - back(5)) / 4.0
    cols = [
        np.full(n, float(progress)),
        np.full(n, float(i)),
        np.full(n, float(k)),
        np.full(n, float(eval_noise)),
        np.full(n, 1e3 * float(gpu_hour_price)),
        np.full(n, 1e3 * float(gpu_hour_price) * (1.0 - float(progress))),
        (t == 0).astype(float),
        (t == 1).astype(float),
        (t == 2).astype(float),
        last - e0,
        m - e0,
        m - last,
        (m - last) / sig,
        (m - e0) / sig,
        (last - e0) / sig,
        tail(3) - m,
        tail(5) - m,
        since,
        np.asarray(declines, dtype=float),
        slope3,
        slope5,
        slope3 / sig,
        *(back(q) - m for q in (2, 3, 4, 5, 6)),
        lo[:, -1] if lo.shape[1] else nan,
        lo[:, -1] - lo[:, -3] if lo.shape[1] >= 3 else nan,
    ]
    if smoothed:
        cols += _smooth_columns(e, sig)
    return np.stack(cols, axis=1)


def _smooth_columns(e: np.ndarray, sig: float) -> list[np.ndarray]:
    """The :data:`SMOOTH_FEATURES` columns of an (n, i) eval history, noise level ``sig``."""
    n, i = e.shape
    nan = np.full(n, np.nan)

    def ols(w: int) -> np.ndarray:  # least-squares slope of the last min(w, i) evals
        if i < 3:
            return nan
        w = min(w, i)
        t = np.arange(w) - (w - 1) / 2.0
        return (e[:, -w:] * t).sum(axis=1) / (t * t).sum() / sig

    def window(a: int, b: int) -> np.ndarray:  # mean of the evals a..b-1 back from the last
        return e[:, i - b : i - a].mean(axis=1) if i >= b else nan

    if i >= 3:
        ma = (e[:, 2:] + e[:, 1:-1] + e[:, :-2]) / 3.0
        ma_max = ma.max(axis=1)
        ma_gap = (ma_max - ma[:, -1]) / sig
        ma_since = (ma.shape[1] - 1 - np.argmax(ma, axis=1)).astype(float)
    else:
        ma_max = ma_gap = ma_since = nan
    mean = e.mean(axis=1)
    return [
        ols(4),
        ols(6),
        ols(10),
        (window(0, 3) - window(3, 6)) / sig,
        (window(0, 5) - window(5, 10)) / sig,
        ma_gap,
        ma_since,
        (mean - e[:, 0]) / sig,
        (e[:, -min(3, i) :].mean(axis=1) - mean) / sig,
        e[:, : min(3, i)].mean(axis=1),
        e[:, -min(3, i) :].mean(axis=1),
        mean,
        ma_max,
    ]


def bucket_of(i: int, k: int, grid: int) -> int:
    """The decision bucket of decision ``i`` (evals seen) of a ``k``-checkpoint job."""
    return round(i * grid / k)


def features_at(
    arrays: EpisodeArrays,
    rows: np.ndarray,
    i: int,
    settings: Mapping[str, float],
    smoothed: bool = False,
) -> np.ndarray:
    """The features of jobs ``rows`` of an episode at decision ``i`` (i evals seen)."""
    return feature_matrix(
        arrays.evals[rows, :i],
        arrays.loss[rows, :i],
        arrays.job_type[rows],
        float(arrays.progress[i - 1]),
        arrays.declines[rows, i - 1],
        settings["eval_noise"],
        settings["gpu_hour_price"],
        smoothed,
    )


def settings_for_task(kw: Mapping[str, Any], price_factor: float = 1.0) -> dict[str, float]:
    """The settings (:data:`SETTINGS`) a model is told of the task of env kwargs ``kw``.

    The task's eval noise and its GPU-hour price times ``price_factor``.  On real runs
    (``curves``) a measured eval carries noise of its own: at least the Bayes stopper's
    floor for one (:data:`baselines.bayes.REAL_CURVE_NOISE`) and, on a held-out task,
    the median measured eval sd of its train runs (the figure the suite's scoring tells
    both Bayes stoppers there; a test run's own is never read).
    """
    from evalstop_gym.envs.config import EvalStopConfig

    from ..bayes import assumed_eval_noise

    config = EvalStopConfig.from_kwargs(**kw)
    noise = assumed_eval_noise(config.sim_config)
    return {"eval_noise": noise, "gpu_hour_price": float(config.gpu_hour_price) * price_factor}
