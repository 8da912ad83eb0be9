"""Per-episode tables: every observation row, built once.

Everything a decision on job j at its i-th checkpoint shows or pays depends on
j's own observed curves up to i only, never on the policy or the scheduler
(the engine draws every checkpoint when the episode is built).  So the env
builds, vectorised over jobs, one float32 row per (job, checkpoint), and a
step only looks it up (the rewards' tables are :mod:`evalstop_gym.sim.utility`'s).

The tables reproduce the engine's own bookkeeping exactly (same comparisons,
same float operations in the same order): ``tests/sim/test_golden.py`` checks the
env bit for bit against the per-step construction it replaced.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

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


def observed(window: np.ndarray) -> np.ndarray:
    """The present values of a padded window field ``[values..., mask...]``, oldest first.

    The reader of the layout :func:`observation_rows` writes (``evals`` and ``loss``).
    """
    w = len(window) // 2
    return window[:w][window[w:] > 0.5]


@functools.lru_cache(maxsize=64)
def _mask(window: int, k: int) -> np.ndarray:
    """(K, W) float32: row c - 1 marks the slots of a W-window filled after checkpoint c."""
    filled = np.arange(1, k + 1)[:, None] + np.arange(window)[None, :] >= window
    mask = filled.astype(np.float32)
    mask.flags.writeable = False
    return mask


def _padded(values: np.ndarray, window: int, lo: float, hi: float) -> np.ndarray:
    """(n, W + K) float32: W zeros, then the values (cast as the per-step code did), clipped."""
    n, k = values.shape
    padded = np.zeros((n, window + k), dtype=np.float32)
    padded[:, window:] = values
    if padded.size and (padded.max() > hi or padded.min() < lo):  # rare: clip only when needed
        np.clip(padded, lo, hi, out=padded)
    return padded


def _windows(padded: np.ndarray, window: int, k: int) -> np.ndarray:
    """(n, K, W) view of ``padded``: row c - 1 is its slots c .. c + W - 1 (the last W values)."""
    step = padded.strides[1]
    return np.ndarray(
        (padded.shape[0], k, window),
        padded.dtype,
        padded,
        offset=step,
        strides=(padded.strides[0], step, step),
    )


def _field_parts(
    table: np.ndarray, fields: tuple[str, ...], window: int, n_types: int
) -> list[tuple[str, np.ndarray]]:
    """(field, its columns of ``table``) for each field, in row order."""
    widths = field_widths(window, n_types)
    parts, col = [], 0
    for f in fields:
        parts.append((f, table[:, :, col : col + widths[f]]))
        col += widths[f]
    return parts


def new_table(fields: tuple[str, ...], n: int, k: int, window: int, n_types: int) -> np.ndarray:
    """An (n, K, D) float32 table holding the columns no episode changes.

    The masks of the eval and loss windows and the progress depend on the
    checkpoint only; :func:`observation_rows` writes the rest, episode after episode.
    """
    widths = field_widths(window, n_types)
    table = np.zeros((n, k, sum(widths[f] for f in fields)), dtype=np.float32)
    write_constant_columns(table, fields, window, n_types)
    return table


def write_constant_columns(
    table: np.ndarray, fields: tuple[str, ...], window: int, n_types: int
) -> None:
    """Write the columns of an (n, K, D) table that no episode changes (see :func:`new_table`)."""
    k = table.shape[1]
    for f, part in _field_parts(table, fields, window, n_types):
        if f in ("evals", "loss"):
            part[:, :, window:] = _mask(window, k)
        elif f == "progress":
            part[:, :, 0] = (np.arange(1, k + 1) / k).astype(np.float32)


def observation_rows(
    fields: tuple[str, ...],
    job_type: np.ndarray,
    declines: np.ndarray,
    obs_eval: np.ndarray,
    loss: np.ndarray,
    window: int,
    n_types: int,
    bounds: dict[str, tuple[float, float]],
    table: np.ndarray | None = None,
) -> np.ndarray:
    """(n, K, D) float32: row [j, i - 1] is job j's observation after checkpoint i.

    The row concatenates ``fields`` in order, with the widths of
    :func:`field_widths`; ``declines`` is the engine's table of consecutive
    declines (n, K).  Written into ``table`` (a :func:`new_table` of this
    shape: its constant columns are kept) when given, else into a new one.
    Each field is one strided copy; the table is C-ordered, each row
    contiguous (a buffer ``bytes.join`` can read).
    """
    n, k = obs_eval.shape
    if table is None:
        table = new_table(fields, n, k, window, n_types)
    for f, part in _field_parts(table, fields, window, n_types):
        if f == "job_type":
            # One type column at a time: a copy along the checkpoints is several
            # times faster than broadcasting an n_types-wide one-hot into each row.
            for t in range(n_types):
                part[:, :, t] = (job_type == t)[:, None]
        elif f in ("evals", "loss"):
            padded = _padded(obs_eval if f == "evals" else loss, window, *bounds[f])
            part[:, :, :window] = _windows(padded, window, k)
        elif f == "consecutive_declines":
            part[:, :, 0] = declines
    return table


class SharedRows:
    """The observation rows of N episodes in one float32 table, read a batch at a time.

    What the vector env steps: one ``take`` of N rows a step instead of N row
    views joined, and per episode a table slot written in place instead of a
    table of its own.  Slot i is the rows ``bases[i]`` onwards: its row 0 is
    all zeros (the terminal observation), then job j's row after checkpoint c
    at ``j * K + c`` (c from 1: :meth:`EpisodeCore.step_key
    <evalstop_gym.envs.core.EpisodeCore.step_key>`), so a key of 0 is the end
    of an episode.  A slot holds ``cap`` jobs; an episode with more grows every
    slot (keys keep their meaning: they are relative to the slot).

    Args:
        n_slots: N.
        k: Checkpoints per job K.
        width: The row's length D.
        init: Writes the columns no episode changes into an (n, K, D) view.
    """

    def __init__(
        self, n_slots: int, k: int, width: int, init: Callable[[np.ndarray], None]
    ) -> None:
        """Empty slots (they grow to the first episode's jobs)."""
        self.n_slots, self.k, self.width = n_slots, k, width
        self._init = init
        self.cap = 0
        self._table = np.zeros((n_slots, 1, width), np.float32)
        self._flat = self._table.reshape(-1, width)
        #: The first row of each slot.
        self.bases = np.arange(n_slots, dtype=np.intp)

    def slot(self, i: int, n: int) -> np.ndarray:
        """Slot i's (n, K, D) rows for an episode of n jobs, to be written in place."""
        if n > self.cap:
            self._grow(n)
        k = self.k
        return self._table[i, 1 : 1 + n * k].reshape(n, k, self.width)

    def _grow(self, cap: int) -> None:
        """Slots of ``cap`` jobs, each keeping its rows at the same keys."""
        old, k, width = self._table, self.k, self.width
        table = np.zeros((self.n_slots, 1 + cap * k, width), np.float32)
        for i in range(self.n_slots):
            self._init(table[i, 1:].reshape(cap, k, width))
        table[:, : old.shape[1]] = old
        self._table, self._flat, self.cap = table, table.reshape(-1, width), cap
        self.bases = np.arange(self.n_slots, dtype=np.intp) * (1 + cap * k)

    def take(self, keys: list[int], out: np.ndarray | None = None) -> np.ndarray:
        """The (N, D) rows of ``keys`` (one per slot, in slot order): a fresh array, or ``out``."""
        idx = np.fromiter(keys, np.intp, self.n_slots)  # cheaper than converting the list
        idx += self.bases
        if out is None:
            return self._flat.take(idx, axis=0)
        return self._flat.take(idx, axis=0, out=out, mode="clip")
