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

from ._fastmath import running_max


def best_so_far(obs_eval: np.ndarray) -> np.ndarray:
    """Index of the best observed checkpoint after each checkpoint, shape (n, K).

    The first checkpoint, then a later one only when strictly better (so ties
    and NaN keep the earlier one): column i - 1 is what a platform keeping
    "the best checkpoint so far" holds after checkpoint i.
    """
    return checkpoint_tables(obs_eval)[0]


def consecutive_declines(obs_eval: np.ndarray) -> np.ndarray:
    """Evals in a row lower than the one before, after each checkpoint, shape (n, K)."""
    return checkpoint_tables(obs_eval)[1]


def checkpoint_tables(obs_eval: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(:func:`best_so_far`, :func:`consecutive_declines`) of ``obs_eval``, in one pass.

    Both are running maxima along the checkpoints, taken row by row on the
    checkpoint-major copy (each step one contiguous row of n jobs):

    * checkpoint c is a new best when it beats the running maximum of the
      earlier ones (``fmax`` skips a NaN, as the comparison does; a NaN first
      checkpoint is never beaten, so it counts as +inf), and the best after c
      is the last new best: the running maximum of ``c`` at the new bests;
    * the declines after c are c minus the last checkpoint that was not lower
      than the one before it (a NaN is no decline).

    Integers and maxima only, so exact; ``tests/sim/test_lean_episode_code.py``
    checks them against the step-by-step loops they replaced.

    The two integer tables are the halves of one (K, 2n) array, so that their
    multiplication by the checkpoint and their running maximum are one pass each
    (elementwise: the same integers as two arrays).
    """
    n, k = obs_eval.shape
    ev = np.ascontiguousarray(obs_eval.T)
    idx = np.arange(k)[:, None]
    top = ev.copy()
    np.copyto(top[0], np.inf, where=np.isnan(top[0]))
    running_max(top, np.fmax)
    marks = np.zeros((k, 2 * n), dtype=np.int64)
    best, last_up = marks[:, :n], marks[:, n:]
    np.greater(ev[1:], top[:-1], out=best[1:], casting="unsafe")  # 1 at a new best
    np.less(ev[1:], ev[:-1], out=last_up[1:], casting="unsafe")
    np.subtract(1, last_up, out=last_up)  # 1 where no decline
    marks *= idx
    running_max(marks, np.maximum)
    np.subtract(idx, last_up, out=last_up)
    return best.T, last_up.T
