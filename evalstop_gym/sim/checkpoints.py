"""What each eval checkpoint reveals, tabulated once per episode.

The engine draws every checkpoint's observed eval when the episode is built,
so the bookkeeping a platform does at a checkpoint (the best observed
checkpoint so far, the run of consecutive declines) depends on the job's own
observed curve only, never on the policy or the scheduler.  Computing it for
every (job, checkpoint) at once, vectorised over jobs, is exact and saves
the engine that work at every event.
"""

from __future__ import annotations

import numpy as np


def best_so_far(obs_eval: np.ndarray) -> np.ndarray:
    """Index of the best observed checkpoint after each checkpoint, shape (n, K).

    The first checkpoint, then a later one only when strictly better (so ties
    and NaN keep the earlier one): column i - 1 is what a platform keeping
    "the best checkpoint so far" holds after checkpoint i.
    """
    n, k = obs_eval.shape
    best = np.zeros((n, k), dtype=np.int64)
    rows = np.arange(n)
    for c in range(1, k):
        prev = best[:, c - 1]
        best[:, c] = np.where(obs_eval[:, c] > obs_eval[rows, prev], c, prev)
    return best


def consecutive_declines(obs_eval: np.ndarray) -> np.ndarray:
    """Evals in a row lower than the one before, after each checkpoint, shape (n, K)."""
    n, k = obs_eval.shape
    dec = np.zeros((n, k), dtype=np.int64)
    for c in range(1, k):
        dec[:, c] = np.where(obs_eval[:, c] < obs_eval[:, c - 1], dec[:, c - 1] + 1, 0)
    return dec
