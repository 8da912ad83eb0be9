"""The per-job utility V_i of the benchmark, tabulated once per episode.

V_i = Q(delivered if the job ends after checkpoint i) - price x GPU-hours x
(work fraction at i), where the delivered checkpoint is the best observed one
up to i, except that a job reaching K delivers its final checkpoint unless
``deliver_best``.  The env's ``reward="utility"`` pays its differences (return
sum_j V_end - V_1), the Oracle stops at its maximum, ``JobEpisodes`` and the
honest metrics read it.

The quality part, :func:`delivered_quality`, is the one table all of them
use.  The price part is written where it is paid, in three float orders kept
for bit identity with the fixtures: :func:`stop_values` prices the work
fraction at i, the dense reward each interval
(:class:`~evalstop_gym.envs.rewards.DenseUtility`), the delayed reward a job's
work done (:class:`~evalstop_gym.envs.rewards.DelayedUtility`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .checkpoints import best_so_far


def delivered_quality(true_eval: np.ndarray, best: np.ndarray, deliver_best: bool) -> np.ndarray:
    """(n, K): true score of the checkpoint delivered if the job ends after checkpoint i.

    ``best`` is the best-observed table (:func:`~evalstop_gym.sim.checkpoints.best_so_far`,
    the engine's ``best_observed``); column i - 1 delivers ``true_eval[j, best[j, i - 1]]``,
    and the last column the final checkpoint unless ``deliver_best``.
    """
    n, k = true_eval.shape
    q = true_eval.take(best + np.arange(0, n * k, k)[:, None])  # true_eval[j, best[j, i]]
    if not deliver_best:
        q[:, -1] = true_eval[:, -1]
    return q


def stop_values(
    true_eval: np.ndarray,
    obs_eval: np.ndarray,
    gpu_hours_full: np.ndarray,
    price: float,
    deliver_best: bool,
    work_frac: Any = None,
) -> np.ndarray:
    """(n, K): a job's utility term V_i if it ends after checkpoint i (column i - 1).

    V_i = Q(delivered) - price x GPU-hours x (work fraction at i: i / K, or the
    simulator's ``step_frac`` under step-time jitter), delivered = the best
    observed checkpoint up to i (the final one at i = K unless ``deliver_best``):
    the env's ``reward="utility"``, whose return is sum_j V_end - V_1.
    """
    k = true_eval.shape[1]
    q = delivered_quality(true_eval, best_so_far(obs_eval), deliver_best)
    frac = (np.arange(1, k + 1) / k)[None, :] if work_frac is None else np.asarray(work_frac)
    return q - price * gpu_hours_full[:, None] * frac


def continue_gains(
    true_eval: np.ndarray,
    best: np.ndarray,
    *,
    deliver_best: bool = False,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """(n, K) quality change of continuing after checkpoint i (column i - 1): Q(V_{i+1}) - Q(V_i).

    The differences of :func:`delivered_quality` along the checkpoints; the last
    column (no decision after the final checkpoint) is 0.  Written into ``out``
    (an (n, K) float64 array or view) when given, else into a new array.
    """
    q = delivered_quality(true_eval, best, deliver_best)
    if out is None:
        gains = np.zeros(q.shape)
    else:
        gains = out
        gains[:, -1] = 0.0
    np.subtract(q[:, 1:], q[:, :-1], out=gains[:, :-1])
    return gains
