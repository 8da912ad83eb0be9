"""Means with 95 % confidence intervals, and paired changes against a baseline."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from evalstop_gym.errors import ConfigError


def mean_ci(values: Sequence[float], level: float = 0.95) -> tuple[float, float, int]:
    """Mean, half-width of the Student-t confidence interval, and n (NaNs dropped).

    The half-width is NaN with fewer than two values; the mean is NaN with none.
    """
    x = np.asarray([v for v in values if v is not None and not math.isnan(v)], dtype=float)
    n = len(x)
    if n == 0:
        return float("nan"), float("nan"), 0
    if n == 1:
        return float(x[0]), float("nan"), 1
    # Imported here: scipy.stats takes about 1.5 s of CPU to import, which every CLI
    # call paid through this module whether it computed an interval or not.
    from scipy import stats

    sem = float(np.std(x, ddof=1)) / math.sqrt(n)
    half = float(stats.t.ppf(0.5 + level / 2, n - 1)) * sem
    return float(x.mean()), half, n


def pct_change(value: float, baseline: float) -> float:
    """100 x (value - baseline) / baseline; NaN when the baseline is 0 or NaN."""
    if baseline == 0 or math.isnan(baseline) or math.isnan(value):
        return float("nan")
    return 100.0 * (value - baseline) / baseline


def fmt_ci(mean: float, half: float, scale: float = 1.0, digits: int = 1) -> str:
    """'12.3 ± 0.4' (scaled), '12.3' without an interval, '–' for NaN."""
    if math.isnan(mean):
        return "–"
    if math.isnan(half):
        return f"{mean * scale:.{digits}f}"
    return f"{mean * scale:.{digits}f} ± {half * scale:.{digits}f}"


def seed_blocks(n: int, blocks: int) -> list[np.ndarray]:
    """Indices 0..n-1 split in order into ``blocks`` near-equal blocks (sizes differ by <= 1)."""
    if not isinstance(blocks, int) or isinstance(blocks, bool) or not 1 <= blocks <= max(n, 1):
        raise ConfigError("blocks", blocks, f"an integer in [1, {max(n, 1)}]")
    return list(np.array_split(np.arange(n), blocks))
