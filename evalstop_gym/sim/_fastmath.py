"""Bit-for-bit re-implementations of NumPy calls on the per-episode paths.

Each returns exactly the bits of the NumPy call it names (the same float
operations, in the same order), without the general-path overhead NumPy
spends per call, which dominates on arrays of a few hundred jobs: building
and scoring an episode calls them once or a few times each.

They exist because the golden fixtures (``tests/sim/test_golden.py``) pin every
result to the bit, so a plainer formula that rounds differently is a change
of results, not an optimisation.  Tests pin each one against NumPy:

* :func:`linear_percentiles` = ``np.percentile``:
  ``tests/sim/test_fast_paths.py::test_linear_percentiles_equal_numpys_bit_for_bit``;
* :func:`mean` = ``ndarray.mean``: ``tests/sim/test_metrics.py`` and the golden fixtures;
* :func:`uniform_rows` = ``Generator.uniform``: ``tests/sim/test_vectorised_draws.py``
  (against the per-family draws of ``tests/oracles/reference_draws.py``);
* :func:`running_max` = ``ufunc.accumulate``: ``tests/sim/test_lean_episode_code.py``
  (the checkpoint tables against the step-by-step loops).

Change one only with its operation order kept, or as a deliberate change of
results that regenerates the fixtures and says so in its commit.
"""

from __future__ import annotations

import math

import numpy as np

from .workloads import cache_if_hashable


def mean(x: np.ndarray) -> float:
    """``float(x.mean())`` of a float array, NaN if empty, without ``mean``'s per-call overhead.

    ndarray.mean of a float64 array is ``np.add.reduce(x) / x.size``: the same
    operations, so the same bits.
    """
    return float(np.add.reduce(x)) / x.size if x.size else float("nan")


def linear_percentiles(x: np.ndarray, percents: tuple[int, ...]) -> list[float]:
    """``np.percentile(x, percents).tolist()`` (method "linear") of a NaN-free 1-D array, bit for bit.

    The same float operations as NumPy's (virtual index (n - 1) q, its floor,
    then ``_lerp``'s two-sided interpolation), so the same bits, without the
    ~20 array operations NumPy spends per call on a few hundred values.
    """
    n = x.size
    if n == 0:
        raise ValueError("percentiles of an empty array")
    s = np.sort(x)
    # Sorted, so a zero is where 0.0 would be inserted (NaN-free: nothing unordered).
    at = int(s.searchsorted(0.0))
    if at < n and s.item(at) == 0.0:
        # 0.0 and -0.0 tie, and which one NumPy's partition leaves where is its own.
        return np.percentile(x, percents).tolist()
    out = []
    for p in percents:
        v = (n - 1) * (p / 100)
        # At or past the last index NumPy takes the last value on both sides, with
        # its index -1 in the weight.
        i, j, lo = (-1, -1, -1.0) if v >= n - 1 else (int(v), int(v) + 1, float(math.floor(v)))
        a, b = s.item(i), s.item(j)
        gamma = v - lo
        diff = b - a
        out.append(b - diff * (1 - gamma) if gamma >= 0.5 else a + diff * gamma)
    return out


def uniform_rows(
    rng: np.random.Generator, ranges: tuple[tuple[float, float], ...], n: int
) -> np.ndarray:
    """``rng.uniform(lo, hi, size=(len(ranges), n))`` with lo, hi the ranges' columns, bit for bit.

    ``Generator.uniform`` draws ``low + (high - low) * u`` with u from
    ``random()``, element by element in C order: one ``random`` call and the
    same two float operations give the very same numbers, without its
    broadcasting path (a few times slower on a few hundred jobs).
    """
    lo, span = _bounds(ranges)
    return lo + span * rng.random((len(ranges), n))


@cache_if_hashable(maxsize=64)
def _bounds(ranges: tuple[tuple[float, float], ...]) -> tuple[np.ndarray, np.ndarray]:
    """(lows, highs - lows) of ``ranges`` as (R, 1) columns, computed as ``uniform`` does."""
    bounds = np.array(ranges, dtype=float)
    lo, span = bounds[:, :1], bounds[:, 1:] - bounds[:, :1]
    if not np.isfinite(span).all():
        raise OverflowError("Range exceeds valid bounds")  # what Generator.uniform raises
    lo.flags.writeable = span.flags.writeable = False
    return lo, span


def running_max(rows: np.ndarray, op: np.ufunc) -> None:
    """Row c becomes ``op`` of rows 0..c, in place (K calls of n elements: cheaper than
    ``op.accumulate`` along a short axis)."""
    for c in range(1, len(rows)):
        op(rows[c - 1], rows[c], out=rows[c])
