"""Episode metrics (SPEC section 6), computed from per-job outcome arrays.

Definitions (positive = a hacking run; flagged = stopped by the policy):

* ``jct``: finish (or stop) time - arrival, hours.  Mean, p50, p95, per type,
  and ``mean_jct_h_completed`` over the jobs that ran to the end (what the
  jobs that were not stopped gain from the GPUs the stopped ones freed).
* ``makespan_h``: last finish - first arrival.  ``utilisation``: GPU-hours
  consumed / (GPUs x makespan).
* ``gpu_hours``: GPU-hours consumed.  ``wasted_gpu_hours``: GPU-hours a hacking
  job ran after its true peak, GPUs x duration x (end progress - peak progress)+;
  zero for a healthy job.
* ``precision`` = TP / flagged, ``recall`` = TP / positives, ``fpr`` = FP /
  all non-hacking jobs (any type), ``f1``.  NaN where the denominator is 0.
* ``detection_delay_evals``: over true positives stopped after the peak, the
  mean of (stop progress - peak progress) x checkpoints, i.e. evals after the
  true peak.  ``stops_before_peak``: flagged hacking jobs stopped before it.
* ``mean_delivered_quality``: true (noise-free) eval score of the delivered
  checkpoint, the best observed one for a stopped job, the final one otherwise.
  ``mean_regret``: best true score over the job's checkpoints - delivered.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ._fastmath import linear_percentiles, mean
from .utility import stop_values
from .workloads import JOB_TYPES, RLHF

#: Keys every episode's metrics hold (the env's ``info["episode_metrics"]``).
METRIC_KEYS: tuple[str, ...] = (
    "n_jobs",
    "n_hacking",
    "n_stopped",
    "mean_jct_h",
    "p50_jct_h",
    "p95_jct_h",
    "mean_jct_h_completed",
    "mean_wait_h",
    "makespan_h",
    "utilisation",
    "gpu_hours",
    "wasted_gpu_hours",
    "precision",
    "recall",
    "fpr",
    "f1",
    "tp",
    "fp",
    "fn",
    "detection_delay_evals",
    "stops_before_peak",
    "mean_delivered_quality",
    "mean_regret",
    *(f"mean_jct_h_{t}" for t in JOB_TYPES),
)


@dataclass
class EpisodeRecord:
    """Outcome of every job of an episode (hidden fields included)."""

    num_gpus: int
    n_ckpt: int
    arrival: np.ndarray
    finish: np.ndarray
    first_start: np.ndarray
    job_type: np.ndarray
    gpus: np.ndarray
    duration: np.ndarray
    hacking: np.ndarray
    peak_progress: np.ndarray
    stopped: np.ndarray
    ckpt_done: np.ndarray
    delivered: np.ndarray  # index (0-based) of the delivered checkpoint
    true_eval: np.ndarray  # (n, K)
    gpu_hours: np.ndarray


def _ratio(num: float, den: float) -> float:
    """num / den, NaN where the denominator is 0."""
    return float(num / den) if den > 0 else float("nan")


# The ufunc reductions ndarray.sum / max / min call, without their Python-level wrappers.
_sum = np.add.reduce
_max = np.maximum.reduce
_min = np.minimum.reduce
_count = np.count_nonzero


def episode_metrics(r: EpisodeRecord) -> dict[str, float]:
    """Compute the flat metrics dict of one finished episode.

    It runs once an episode, so it is written for few NumPy calls: the four
    confusion counts come from one ``bincount``, a NaN finish time shows in
    the makespan (``max`` propagates it), and ``end - peak`` is computed once
    for the waste and the delay.  Every value is the same bits as the plain
    formulas (``tests/sim/test_metrics.py`` checks it against them).
    """
    n = len(r.arrival)
    makespan = float(_max(r.finish) - _min(r.arrival))
    if makespan != makespan and np.isnan(r.finish).any():
        raise ValueError("episode_metrics needs a finished episode: some jobs have not ended")
    jct = r.finish - r.arrival
    hack, flag = r.hacking.astype(bool, copy=False), r.stopped.astype(bool, copy=False)
    # (hacking, flagged) as 2 h + f: counts of TN, FP, FN, TP
    _, fp, fn, tp = np.bincount(hack * 2 + flag, minlength=4).tolist()
    n_hack = fn + tp
    end_progress = r.ckpt_done / r.n_ckpt
    past_peak = end_progress - r.peak_progress
    after_peak = np.where(hack, np.maximum(past_peak, 0.0), 0.0)
    tp_mask = hack & flag
    late = tp_mask & (end_progress >= r.peak_progress)
    delivered_q = r.true_eval[np.arange(n), r.delivered]
    gpu_hours = float(_sum(r.gpu_hours))
    p50, p95 = linear_percentiles(jct, (50, 95))
    m: dict[str, float] = {
        "n_jobs": float(n),
        "n_hacking": float(n_hack),
        "n_stopped": float(fp + tp),
        "mean_jct_h": mean(jct),
        "p50_jct_h": p50,
        "p95_jct_h": p95,
        "mean_jct_h_completed": mean(jct[~flag]),
        "mean_wait_h": mean(r.first_start - r.arrival),
        "makespan_h": makespan,
        "utilisation": _ratio(gpu_hours, r.num_gpus * makespan),
        "gpu_hours": gpu_hours,
        "wasted_gpu_hours": float(_sum(r.gpus * r.duration * after_peak)),
        "precision": _ratio(tp, tp + fp),
        "recall": _ratio(tp, tp + fn),
        "fpr": _ratio(fp, n - n_hack),
        "f1": _ratio(2 * tp, 2 * tp + fp + fn),
        "tp": float(tp),
        "fp": float(fp),
        "fn": float(fn),
        # (end - peak) x K over the true positives stopped at or after the peak
        "detection_delay_evals": mean(past_peak[late] * r.n_ckpt),
        "stops_before_peak": float(_count(tp_mask & (end_progress < r.peak_progress))),
        "mean_delivered_quality": mean(delivered_q),
        "mean_regret": mean(_max(r.true_eval, axis=1) - delivered_q),
    }
    for t, name in enumerate(JOB_TYPES):
        m[f"mean_jct_h_{name}"] = mean(jct[r.job_type == t])
    return m


# --------------------------------------------------------------------------------------------
# The benchmark's utility and the honest metrics beside the paper's
# --------------------------------------------------------------------------------------------


#: The keys :func:`honest_metrics` returns: metrics that do not flatter killing (SPEC
#: section 9), carried by every ``baselines.evaluate`` row beside :data:`METRIC_KEYS`.
HONEST_METRIC_KEYS: tuple[str, ...] = (
    "fpr_rlhf",
    "killed_healthy_gpu_hours",
    "total_gpu_hours",
    "recall_after_peak",
    "stops_before_peak_frac",
    "utility",
    "oracle_utility",
    "regret_vs_oracle",
)


def honest_metrics(
    r: EpisodeRecord,
    obs_eval: np.ndarray,
    price: float,
    deliver_best: bool,
    work_frac: Any = None,
) -> dict[str, float]:
    """Metrics that do not flatter killing, beside the paper's (SPEC section 9).

    * ``fpr_rlhf``: stopped healthy RLHF runs / healthy RLHF runs.
    * ``killed_healthy_gpu_hours``: GPU-hours spent on healthy jobs that were stopped
      (their work is lost to the platform, whatever checkpoint they delivered).
    * ``total_gpu_hours``: all GPU-hours consumed (the paper's "-21.8 %" compares
      with its change, not with post-peak waste).
    * ``recall_after_peak``: hacking runs stopped at or after their true peak /
      hacking runs; ``stops_before_peak_frac``: those stopped before it, apart.
    * ``utility``: sum_j V_end - V_1 (see :func:`stop_values`), the env's return.
    * ``regret_vs_oracle``: the privileged per-job optimum's utility minus ``utility``.
    """
    hack, flag = r.hacking.astype(bool), r.stopped.astype(bool)
    rlhf = r.job_type == RLHF
    healthy_rl = rlhf & ~hack
    end_progress = r.ckpt_done / r.n_ckpt
    values = stop_values(r.true_eval, obs_eval, r.gpus * r.duration, price, deliver_best, work_frac)
    rows = np.arange(len(hack))
    v_end = values[rows, r.ckpt_done - 1]
    utility = float(np.sum(v_end - values[:, 0]))
    oracle = float(np.sum(values.max(axis=1) - values[:, 0]))
    n_hack = int(hack.sum())
    return {
        "fpr_rlhf": _ratio(int(np.sum(healthy_rl & flag)), int(healthy_rl.sum())),
        "killed_healthy_gpu_hours": float(np.sum(r.gpu_hours[~hack & flag])),
        "total_gpu_hours": float(r.gpu_hours.sum()),
        "recall_after_peak": _ratio(
            int(np.sum(hack & flag & (end_progress >= r.peak_progress))), n_hack
        ),
        "stops_before_peak_frac": _ratio(
            int(np.sum(hack & flag & (end_progress < r.peak_progress))), n_hack
        ),
        "utility": utility,
        "oracle_utility": oracle,
        "regret_vs_oracle": oracle - utility,
    }


#: Keys of :func:`cluster_metrics` (deprioritisation and the costs of a real cluster).
CLUSTER_METRIC_KEYS: tuple[str, ...] = (
    "preemptions",
    "max_preemptions_per_job",
    "restore_gpu_hours",
    "eval_gpu_hours",
    "n_deprioritized",
    "deprioritized_gpu_hours",
    "deprioritized_gpu_hours_after_peak",
    "deprioritized_mean_wait_h",
    "deprioritized_max_wait_h",
    "deprioritized_mean_delivered_quality",
)


def cluster_metrics(
    r: EpisodeRecord,
    preemptions: np.ndarray,
    demoted: dict[int, tuple[float, float]],
    restore_gpu_hours: float,
    eval_cost_h: float,
) -> dict[str, float]:
    """Preemptions, paid costs and what deprioritised jobs cost the cluster.

    * ``preemptions``: total over the jobs; ``max_preemptions_per_job``.
    * ``restore_gpu_hours``: GPU-hours spent restoring preempted jobs;
      ``eval_gpu_hours``: GPU-hours of the evals completed (checkpoints x GPUs x cost).
    * Over the ``n_deprioritized`` jobs (``demoted``: job id -> (time, GPU-hours
      consumed) at deprioritisation): ``deprioritized_gpu_hours`` consumed after
      it; ``deprioritized_gpu_hours_after_peak``, GPUs x duration x (end progress
      - peak progress)+ (the resources the prior work's demotion keeps occupied);
      ``deprioritized_mean_wait_h`` / ``max``: hours spent queued after it (the
      starvation), i.e. time to the end minus time holding GPUs; and
      ``deprioritized_mean_delivered_quality``, true score of what they deliver.
      NaN where no job was deprioritised.
    """
    ids = np.fromiter(demoted, dtype=np.int64, count=len(demoted))
    at = np.array([demoted[j][0] for j in ids], dtype=float)
    used_at = np.array([demoted[j][1] for j in ids], dtype=float)
    used_after = r.gpu_hours[ids] - used_at
    held_h = used_after / r.gpus[ids]
    wait = (r.finish[ids] - at) - held_h
    end_progress = r.ckpt_done[ids] / r.n_ckpt
    after_peak = np.maximum(end_progress - r.peak_progress[ids], 0.0)
    quality = r.true_eval[ids, r.delivered[ids]]
    return {
        "preemptions": float(_sum(preemptions)),
        "max_preemptions_per_job": float(preemptions.max()) if preemptions.size else 0.0,
        "restore_gpu_hours": float(restore_gpu_hours),
        "eval_gpu_hours": float(_sum(r.gpus * r.ckpt_done)) * eval_cost_h,
        "n_deprioritized": float(ids.size),
        "deprioritized_gpu_hours": float(_sum(used_after)),
        "deprioritized_gpu_hours_after_peak": float(
            _sum(r.gpus[ids] * r.duration[ids] * after_peak)
        ),
        "deprioritized_mean_wait_h": mean(wait),
        "deprioritized_max_wait_h": float(wait.max()) if wait.size else float("nan"),
        "deprioritized_mean_delivered_quality": mean(quality),
    }
