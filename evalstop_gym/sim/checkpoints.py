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
    ev = np.ascontiguousarray(obs_eval.T)  # checkpoint-major: each step is one contiguous row
    best = np.zeros((k, n), dtype=np.int64)
    best_value = ev[0].copy()
    for c in range(1, k):
        better = ev[c] > best_value
        best[c] = best[c - 1]
        best[c][better] = c
        np.copyto(best_value, ev[c], where=better)
    return best.T


def consecutive_declines(obs_eval: np.ndarray) -> np.ndarray:
    """Evals in a row lower than the one before, after each checkpoint, shape (n, K)."""
    n, k = obs_eval.shape
    ev = np.ascontiguousarray(obs_eval.T)
    dec = np.zeros((k, n), dtype=np.int64)
    for c in range(1, k):
        np.add(dec[c - 1], 1, out=dec[c], where=ev[c] < ev[c - 1])
    return dec.T
