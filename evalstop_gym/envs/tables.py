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

import numpy as np

from ..sim.checkpoints import best_so_far, consecutive_declines


def field_widths(window: int, n_types: int) -> dict[str, int]:
    """Width of each boundary field in an observation row."""
    return {
        "job_type": n_types,
        "evals": 2 * window,
        "consecutive_declines": 1,
        "progress": 1,
        "loss": 2 * window,
    }


def _windowed(values: np.ndarray, window: int, lo: float, hi: float) -> np.ndarray:
    """(n, K, 2W) float32: the last W values right-aligned and zero-padded, then the mask."""
    n, k = values.shape
    out = np.zeros((n, k, 2 * window), dtype=np.float32)
    v32 = values.astype(np.float32)
    for d in range(min(window, k)):
        # After checkpoint c + 1, slot W-1-d holds the value of checkpoint c - d.
        out[:, d:, window - 1 - d] = v32[:, : k - d]
        out[:, d:, 2 * window - 1 - d] = 1.0
    np.clip(out[:, :, :window], lo, hi, out=out[:, :, :window])
    return out


def observation_rows(
    fields: tuple[str, ...],
    job_type: np.ndarray,
    obs_eval: np.ndarray,
    loss: np.ndarray,
    window: int,
    n_types: int,
    bounds: dict[str, tuple[float, float]],
) -> np.ndarray:
    """(n, K, D) float32: row [j, i - 1] is job j's observation after checkpoint i.

    The row concatenates ``fields`` in order, with the widths of
    :func:`field_widths`.
    """
    n, k = obs_eval.shape
    parts = []
    for f in fields:
        if f == "job_type":
            onehot = np.eye(n_types, dtype=np.float32)[job_type]
            parts.append(np.broadcast_to(onehot[:, None, :], (n, k, n_types)))
        elif f == "evals":
            parts.append(_windowed(obs_eval, window, *bounds["evals"]))
        elif f == "consecutive_declines":
            parts.append(consecutive_declines(obs_eval).astype(np.float32)[:, :, None])
        elif f == "progress":
            progress = (np.arange(1, k + 1) / k).astype(np.float32)
            parts.append(np.broadcast_to(progress[None, :, None], (n, k, 1)))
        elif f == "loss":
            parts.append(_windowed(loss, window, *bounds["loss"]))
    return np.ascontiguousarray(np.concatenate(parts, axis=2))


def continue_gains(true_eval: np.ndarray, obs_eval: np.ndarray) -> np.ndarray:
    """(n, K) quality change of continuing after checkpoint i (column i - 1).

    V_i delivers the best observed checkpoint up to i; V_{i+1} the final one
    if i + 1 = K, else the best observed up to i + 1.  The last column (no
    decision after the final checkpoint) is 0.
    """
    n, k = true_eval.shape
    best = best_so_far(obs_eval)
    rows = np.arange(n)[:, None]
    now = true_eval[rows, best]
    gains = np.zeros((n, k))
    gains[:, : k - 2] = true_eval[rows, best[:, 1 : k - 1]] - now[:, : k - 2]
    if k >= 2:
        gains[:, k - 2] = true_eval[:, k - 1] - now[:, k - 2]
    return gains
