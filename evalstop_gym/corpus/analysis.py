"""Analysis of curve traces: the hacking label, peak position, resampling and the Gao et al. fit.

Numpy only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from .format import CurveTrace, CurveTraceError

# --------------------------------------------------------------------------------------------
# Labels, resampling, Gao et al. law
# --------------------------------------------------------------------------------------------


def label_hacking(
    gold_or_eval: Sequence[float] | np.ndarray,
    *,
    min_drop: float = 0.2,
    min_tail: float = 0.1,
    min_abs_drop: float = 0.0,
) -> bool:
    """Whether a run is *hacking*: its gold curve peaks clearly before the end (module doc rule).

    Hacking iff, with ``k`` the first argmax of the ``n`` values ``g``:
    ``k / (n - 1) <= 1 - min_tail`` and ``g[k] - g[-1] >= max(min_drop * (max g - min g),
    min_abs_drop)`` and ``g[k] > g[-1]``.

    Args:
        gold_or_eval: The gold curve at successive checkpoints (an eval curve only if no gold
            exists, and then with ``min_abs_drop`` set above its noise).
        min_drop: Required fall from the peak to the end, as a fraction of the curve's range.
        min_tail: Required fraction of the run after the peak.
        min_abs_drop: Required fall in absolute units.

    Returns:
        True for hacking, False for healthy (also for curves of fewer than 3 points, which cannot
        show a peak before the end).
    """
    g = np.asarray(gold_or_eval, dtype=np.float64)
    if g.ndim != 1 or not np.all(np.isfinite(g)):
        raise CurveTraceError("label_hacking: expected a finite 1-D curve")
    if g.size < 3:
        return False
    k = int(np.argmax(g))
    drop = g[k] - g[-1]
    return bool(
        k / (g.size - 1) <= 1.0 - min_tail
        and drop > 0
        and drop >= min_drop * (g.max() - g.min())
        and drop >= min_abs_drop
    )


def peak_progress(curve: Sequence[float] | np.ndarray, step: Sequence[int] | np.ndarray) -> float:
    """Position of the (first) maximum of a curve as a fraction of the run, in [0, 1].

    Args:
        curve: Values at the checkpoints.
        step: Steps of the checkpoints (progress = step / last step).

    Returns:
        ``step[argmax] / step[-1]`` (1.0 for a single checkpoint at step 0).
    """
    s = np.asarray(step, dtype=np.float64)
    return float(s[int(np.argmax(curve))] / s[-1]) if s[-1] > 0 else 1.0


def resample(
    trace: CurveTrace, n_points: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """Put a trace onto ``n_points`` evenly spaced checkpoints at progress ``i / n_points``.

    Progress of a recorded checkpoint is its normalised step ``step / step[-1]``; values at the
    new checkpoints are linearly interpolated in progress. Progress before the first recorded
    checkpoint takes the first value (no extrapolation).

    Args:
        trace: The trace (last step must be > 0).
        n_points: Number of checkpoints wanted, >= 1.

    Returns:
        ``(progress, eval, loss, gold)`` arrays of length ``n_points``; ``progress[i] = (i+1)/n``
        and ``gold`` is ``None`` when the trace has none.
    """
    if n_points < 1:
        raise ValueError(f"resample: n_points must be >= 1, got {n_points}")
    if trace.step[-1] <= 0:
        raise CurveTraceError(f"trace {trace.run_id!r}: cannot resample a run whose last step is 0")
    x = trace.step.astype(np.float64) / float(trace.step[-1])
    progress = np.arange(1, n_points + 1, dtype=np.float64) / n_points
    gold = None if trace.gold is None else np.interp(progress, x, trace.gold)
    return progress, np.interp(progress, x, trace.eval), np.interp(progress, x, trace.loss), gold


class GaoFit(NamedTuple):
    """Least-squares fit of Gao et al.'s RL law ``R(d) = d (alpha - beta ln d)``.

    Attributes:
        alpha: Initial slope coefficient.
        beta: Over-optimisation coefficient (> 0: the curve turns over, at
            ``d = exp(alpha / beta - 1)``).
        r2: Coefficient of determination of the fit on the points used (``nan`` if the targets
            are constant).
    """

    alpha: float
    beta: float
    r2: float


def fit_gao(d: Sequence[float] | np.ndarray, r: Sequence[float] | np.ndarray) -> GaoFit:
    """Fit ``R(d) = d (alpha - beta ln d)`` by linear least squares.

    The law is linear in ``(alpha, beta)``: ``R = alpha * d - beta * d ln d``. Points with
    ``d <= 0`` are excluded (the law gives 0 there by definition and ``ln d`` is undefined).

    Args:
        d: Distances ``sqrt(KL)`` from the initial policy.
        r: Gold gain over the initial policy at each distance.

    Returns:
        The fit.

    Raises:
        ValueError: Arrays of different shape, or fewer than 2 usable points.
    """
    d = np.asarray(d, dtype=np.float64)
    r = np.asarray(r, dtype=np.float64)
    if d.shape != r.shape or d.ndim != 1:
        raise ValueError(f"fit_gao: d and r must be 1-D of equal length, got {d.shape}, {r.shape}")
    keep = (d > 0) & np.isfinite(d) & np.isfinite(r)
    d, r = d[keep], r[keep]
    if d.size < 2:
        raise ValueError("fit_gao: need at least 2 points with d > 0")
    design = np.column_stack([d, -d * np.log(d)])
    (alpha, beta), *_ = np.linalg.lstsq(design, r, rcond=None)
    resid = r - design @ np.array([alpha, beta])
    ss_tot = float(np.sum((r - r.mean()) ** 2))
    r2 = 1.0 - float(np.sum(resid**2)) / ss_tot if ss_tot > 0 else float("nan")
    return GaoFit(float(alpha), float(beta), r2)


def fit_gao_trace(trace: CurveTrace) -> GaoFit:
    """Fit Gao et al.'s law to a trace's gold gain over its first checkpoint vs ``sqrt(KL)``.

    Args:
        trace: A trace with ``gold`` and ``kl``.

    Returns:
        The fit of ``gold - gold[0]`` against ``sqrt(kl)``.

    Raises:
        CurveTraceError: The trace lacks gold or KL.
    """
    if trace.gold is None or trace.kl is None:
        raise CurveTraceError(f"trace {trace.run_id!r}: the Gao fit needs 'gold' and 'kl' curves")
    return fit_gao(np.sqrt(trace.kl), trace.gold - trace.gold[0])
