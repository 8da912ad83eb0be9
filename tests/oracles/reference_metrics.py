"""FROZEN REFERENCE, never edited with the code: episode metrics, the continue-gain and
checkpoint tables as written before the per-episode fixed-cost work.

Kept verbatim as the reference the leaner versions are tested against
(``tests/sim/test_lean_episode_code.py``): one NumPy call per mask and
count, as the code read at commit e0ed0e9.
"""

from __future__ import annotations

import numpy as np

from evalstop_gym.sim._fastmath import linear_percentiles
from evalstop_gym.sim._fastmath import mean as _mean
from evalstop_gym.sim.metrics import EpisodeRecord, _count, _ratio, _sum
from evalstop_gym.sim.workloads import JOB_TYPES


def episode_metrics(r: EpisodeRecord) -> dict[str, float]:
    """Compute the flat metrics dict of one finished episode."""
    if np.isnan(r.finish).any():
        raise ValueError("episode_metrics needs a finished episode: some jobs have not ended")
    n = len(r.arrival)
    jct = r.finish - r.arrival
    hack, flag = r.hacking.astype(bool), r.stopped.astype(bool)
    tp = _count(hack & flag)
    fp = _count(~hack & flag)
    fn = _count(hack & ~flag)
    precision = _ratio(tp, tp + fp)
    recall = _ratio(tp, tp + fn)
    f1 = _ratio(2 * tp, 2 * tp + fp + fn)
    end_progress = r.ckpt_done / r.n_ckpt
    after_peak = np.where(hack, np.maximum(end_progress - r.peak_progress, 0.0), 0.0)
    wasted = float(_sum(r.gpus * r.duration * after_peak))
    tp_mask = hack & flag
    late = tp_mask & (end_progress >= r.peak_progress)
    delay = (end_progress - r.peak_progress) * r.n_ckpt
    delivered_q = r.true_eval[np.arange(n), r.delivered]
    regret = r.true_eval.max(axis=1) - delivered_q
    makespan = float(r.finish.max() - r.arrival.min())
    gpu_hours = float(_sum(r.gpu_hours))
    p50, p95 = linear_percentiles(jct, (50, 95))
    m: dict[str, float] = {
        "n_jobs": float(n),
        "n_hacking": float(_count(hack)),
        "n_stopped": float(_count(flag)),
        "mean_jct_h": _mean(jct),
        "p50_jct_h": p50,
        "p95_jct_h": p95,
        "mean_jct_h_completed": _mean(jct[~flag]),
        "mean_wait_h": _mean(r.first_start - r.arrival),
        "makespan_h": makespan,
        "utilisation": _ratio(gpu_hours, r.num_gpus * makespan),
        "gpu_hours": gpu_hours,
        "wasted_gpu_hours": wasted,
        "precision": precision,
        "recall": recall,
        "fpr": _ratio(fp, n - _count(hack)),
        "f1": f1,
        "tp": float(tp),
        "fp": float(fp),
        "fn": float(fn),
        "detection_delay_evals": _mean(delay[late]),
        "stops_before_peak": float(_count(tp_mask & (end_progress < r.peak_progress))),
        "mean_delivered_quality": _mean(delivered_q),
        "mean_regret": _mean(regret),
    }
    for t, name in enumerate(JOB_TYPES):
        m[f"mean_jct_h_{name}"] = _mean(jct[r.job_type == t])
    return m


def continue_gains(
    true_eval: np.ndarray, best: np.ndarray, *, deliver_best: bool = False
) -> np.ndarray:
    """(n, K) quality change of continuing after checkpoint i (column i - 1).

    V_i delivers the best observed checkpoint up to i (``best``, the engine's
    table, column i - 1); V_{i+1} the best observed up to i + 1, except that a
    job reaching K delivers its final checkpoint unless ``deliver_best``
    (``deliver="best"``).  The last column (no decision after the final
    checkpoint) is 0.
    """
    n, k = true_eval.shape
    rows = np.arange(n)[:, None]
    now = true_eval[rows, best]
    gains = np.zeros((n, k))
    gains[:, : k - 2] = true_eval[rows, best[:, 1 : k - 1]] - now[:, : k - 2]
    if k >= 2:
        final = true_eval[np.arange(n), best[:, k - 1]] if deliver_best else true_eval[:, k - 1]
        gains[:, k - 2] = final - now[:, k - 2]
    return gains


def best_so_far(obs_eval: np.ndarray) -> np.ndarray:
    """The best-so-far table, one checkpoint at a time."""
    n, k = obs_eval.shape
    ev = np.ascontiguousarray(obs_eval.T)
    best = np.zeros((k, n), dtype=np.int64)
    best_value = ev[0].copy()
    for c in range(1, k):
        better = ev[c] > best_value
        best[c] = best[c - 1]
        best[c][better] = c
        np.copyto(best_value, ev[c], where=better)
    return best.T


def consecutive_declines(obs_eval: np.ndarray) -> np.ndarray:
    """The declines table, one checkpoint at a time."""
    n, k = obs_eval.shape
    ev = np.ascontiguousarray(obs_eval.T)
    dec = np.zeros((k, n), dtype=np.int64)
    for c in range(1, k):
        np.add(dec[c - 1], 1, out=dec[c], where=ev[c] < ev[c - 1])
    return dec.T
