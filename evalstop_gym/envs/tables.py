"""Per-episode tables: every observation row and every continue reward, built once.

Everything a decision on job j at its i-th checkpoint shows or pays depends on
j's own observed curves up to i only, never on the policy or the scheduler
(the engine draws every checkpoint when the episode is built).  So the env
builds, vectorised over jobs, one float32 row per (job, checkpoint) and one
continue reward per (job, checkpoint), and a step only looks them up.

The tables reproduce the engine's own bookkeeping exactly (same comparisons,
same float operations in the same order): ``tests/test_golden.py`` checks the
env bit for bit against the per-step construction it replaced.
"""

from __future__ import annotations

import functools

import numpy as np


def field_widths(window: int, n_types: int) -> dict[str, int]:
    """Width of each boundary field in an observation row."""
    return {
        "job_type": n_types,
        "evals": 2 * window,
        "consecutive_declines": 1,
        "progress": 1,
        "loss": 2 * window,
    }


@functools.lru_cache(maxsize=64)
def _row_layout(fields: tuple[str, ...], window: int, k: int, n_types: int) -> np.ndarray:
    """(K, D) column indices into the source matrix built by :func:`observation_rows`.

    Source columns: the one-hot type, the evals padded with W zeros on the
    left, the losses likewise, the declines, the progress, a 0 and a 1.
    """
    off_ev = n_types
    off_loss = off_ev + window + k
    off_dec = off_loss + window + k
    off_prog = off_dec + k
    zero, one = off_prog + k, off_prog + k + 1
    rows = []
    for c in range(k):  # after checkpoint c + 1
        row: list[int] = []
        for f in fields:
            if f == "job_type":
                row += range(n_types)
            elif f in ("evals", "loss"):
                off = off_ev if f == "evals" else off_loss
                # The last W values, right-aligned: padded positions c+1 .. c+W.
                row += [off + c + 1 + s for s in range(window)]
                row += [one if c + 1 + s >= window else zero for s in range(window)]
            elif f == "consecutive_declines":
                row.append(off_dec + c)
            elif f == "progress":
                row.append(off_prog + c)
        rows.append(row)
    return np.asarray(rows, dtype=np.intp)


def _padded(values: np.ndarray, window: int, lo: float, hi: float) -> np.ndarray:
    """(n, W + K) float32: W zeros, then the values (cast as the per-step code did), clipped."""
    n, k = values.shape
    padded = np.zeros((n, window + k), dtype=np.float32)
    padded[:, window:] = values
    if padded.size and (padded.max() > hi or padded.min() < lo):  # rare: clip only when needed
        np.clip(padded, lo, hi, out=padded)
    return padded


def observation_rows(
    fields: tuple[str, ...],
    job_type: np.ndarray,
    declines: np.ndarray,
    obs_eval: np.ndarray,
    loss: np.ndarray,
    window: int,
    n_types: int,
    bounds: dict[str, tuple[float, float]],
) -> np.ndarray:
    """(n, K, D) float32: row [j, i - 1] is job j's observation after checkpoint i.

    The row concatenates ``fields`` in order, with the widths of
    :func:`field_widths`; ``declines`` is the engine's table of consecutive
    declines (n, K).  Built as one gather from a small per-job source matrix.
    """
    n, k = obs_eval.shape
    source = np.concatenate(
        [
            np.eye(n_types, dtype=np.float32)[job_type],
            _padded(obs_eval, window, *bounds["evals"]),
            _padded(loss, window, *bounds["loss"]),
            declines.astype(np.float32),
            np.broadcast_to((np.arange(1, k + 1) / k).astype(np.float32), (n, k)),
            np.broadcast_to(np.array([0.0, 1.0], np.float32), (n, 2)),
        ],
        axis=1,
    )
    # np.take, unlike source[:, layout], returns a C-ordered table: each row contiguous
    # (one cache line run to copy, and a buffer bytes.join can read).
    return np.take(source, _row_layout(fields, window, k, n_types), axis=1)


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
