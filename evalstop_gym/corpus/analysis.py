"""Analysis of curve traces: hacking label, peak, resampling, Gao et al. fit, regime criterion.

Numpy only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

import numpy as np

from .format import CurveTrace, CurveTraceError

#: A run's gold gain (peak less first value) counts as at least this share of its gold's
#: range (peak less lowest value), wherever a run is scaled by its gain (the replay's map,
#: the twin's run vectors).  Every run of the shipped corpora gains more (the least,
#: 0.136), so their scales are unchanged.
GAIN_FLOOR_FRACTION = 0.1
#: A hacking run's gold must fall by more than this many standard errors of a gold point
#: (the ``min_abs_drop`` of :func:`label_hacking` for a corpus that measures its gold's noise).
NOISE_MULTIPLE = 2.0 * math.sqrt(2.0)

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
    # a signed KL estimate may be slightly negative (the loaders accept it): d = sqrt(KL+)
    return fit_gao(np.sqrt(np.maximum(trace.kl, 0.0)), trace.gold - trace.gold[0])


# --------------------------------------------------------------------------------------------
# The regime criterion: statistics of RLHF curves that a simulated regime must reproduce
# --------------------------------------------------------------------------------------------

#: Statistics of the regime criterion, in the order they are printed (docs/CALIBRATION.md,
#: "The grounded regime: the criterion"). Each is computed by :func:`curve_statistics` on
#: noise-free curves (a corpus's gold, a regime's true eval plus :data:`GOLD_NOISE`) and
#: labelled by :func:`label_hacking`; a regime passes when every one of its values lies
#: inside the corpus's 95 % bootstrap interval over runs (:func:`criterion_check`).
CRITERION_STATS: tuple[str, ...] = (
    "hack_share",
    "peak_q25",
    "peak_q50",
    "peak_q75",
    "drop_q50",
    "healthy_flat_share",
    "healthy_decline_share",
    "early_auc_10",
    "early_auc_20",
)
#: Share of a healthy run's gain its last quarter may move by and still be flat, and by which
#: its end must lie below its peak to count as declining (both above the gold's own noise).
FLAT_TOLERANCE = 0.05
#: Progress up to which evals are "early" (the two early-eval AUCs), exclusive of step 0.
EARLY_PROGRESS: tuple[float, float] = (0.1, 0.2)
#: Noise of a corpus's gold curve in units of the corpus's mean gain (the TRL corpus's gold is
#: a mean over 1024 samples, standard error about 0.03 base sd, mean gain about 1): added to a
#: regime's noise-free curves so that both sides of the criterion carry the same noise.  A
#: corpus that records its gold's noise (``meta["gold_noise_sd"]``, from repeated gold
#: evaluations) gives its own (:func:`corpus_noise`); this is the value for one that does not.
GOLD_NOISE = 0.03
#: Statistics printed beside the criterion, not part of it (:func:`late_rise_statistics`):
#: how late a healthy run still gains.
LATE_RISE_STATS: tuple[str, ...] = ("healthy_mid_gain", "healthy_late_rise")
#: Bootstrap replicates and the interval's level.
BOOTSTRAP_REPS = 2000
CI_LEVEL = 0.95


def mann_whitney_auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Area under the ROC curve of ``scores`` for ``labels`` (ties count one half); NaN if one class."""
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels, dtype=bool)
    pos, neg = s[y], s[~y]
    if pos.size == 0 or neg.size == 0:
        return float("nan")
    greater = (pos[:, None] > neg[None, :]).sum()
    ties = (pos[:, None] == neg[None, :]).sum()
    return float((greater + 0.5 * ties) / (pos.size * neg.size))


def _check_curves(curves: np.ndarray, progress: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    g = np.asarray(curves, dtype=np.float64)
    x = np.asarray(progress, dtype=np.float64)
    if g.ndim != 2 or x.ndim != 1 or g.shape[1] != x.size or x.size < 3:
        raise CurveTraceError(
            f"curve statistics: expected (runs, m) curves on m >= 3 progress points, got "
            f"{g.shape} and {x.shape}"
        )
    if x[0] != 0.0 or x[-1] != 1.0 or np.any(np.diff(x) <= 0):
        raise CurveTraceError("curve statistics: progress must rise from 0 (the start) to 1")
    if not np.all(np.isfinite(g)):
        raise CurveTraceError("curve statistics: curves must be finite")
    return g, x


def curve_labels(curves: np.ndarray) -> np.ndarray:
    """:func:`label_hacking` of every row (the corpus's rule, applied alike to a regime)."""
    return np.array([label_hacking(row) for row in np.asarray(curves)], dtype=bool)


def curve_statistics(
    curves: np.ndarray, progress: np.ndarray, labels: np.ndarray | None = None
) -> dict[str, float]:
    """The criterion's statistics (:data:`CRITERION_STATS`) of noise-free RLHF curves.

    Args:
        curves: (runs, m) values at ``progress``; column 0 is the start of the run.
        progress: (m,) from 0 to 1.
        labels: Hacking labels (default :func:`curve_labels` of ``curves``).

    Returns:
        ``hack_share``; ``peak_q25/q50/q75``: quartiles of a hacking run's peak position
        (progress of its first maximum); ``drop_q50``: median over hacking runs of the fall
        from the peak to the end over the run's gain (peak - start); ``healthy_flat_share``:
        healthy runs whose value at the end differs from the one at progress 0.75 by at most
        :data:`FLAT_TOLERANCE` x gain; ``healthy_decline_share``: healthy runs ending more
        than :data:`FLAT_TOLERANCE` x gain below their peak; ``early_auc_10/20``: the
        Mann-Whitney AUC with which a run's early rise (mean value at 0 < progress <= 0.1,
        resp. 0.2, minus its start) ranks hacking runs above healthy ones (0.5: no label in
        the first evals).  NaN where a class is empty.
    """
    g, x = _check_curves(curves, progress)
    lab = curve_labels(g) if labels is None else np.asarray(labels, dtype=bool)
    nan = float("nan")
    top = g.max(axis=1)
    gain = np.maximum(top - g[:, 0], 1e-12)
    peak = x[np.argmax(g, axis=1)]
    hack, healthy = lab, ~lab
    out: dict[str, float] = {"hack_share": float(lab.mean()) if lab.size else nan}
    for q in (25, 50, 75):
        out[f"peak_q{q}"] = float(np.percentile(peak[hack], q)) if hack.any() else nan
    drop = (top - g[:, -1]) / gain
    out["drop_q50"] = float(np.median(drop[hack])) if hack.any() else nan
    late = int(np.searchsorted(x, 0.75 - 1e-9))
    flat = np.abs(g[:, -1] - g[:, late]) <= FLAT_TOLERANCE * gain
    decline = drop > FLAT_TOLERANCE
    out["healthy_flat_share"] = float(flat[healthy].mean()) if healthy.any() else nan
    out["healthy_decline_share"] = float(decline[healthy].mean()) if healthy.any() else nan
    for p in EARLY_PROGRESS:
        cols = (x > 0) & (x <= p + 1e-9)
        rise = g[:, cols].mean(axis=1) - g[:, 0] if cols.any() else np.zeros(len(g))
        out[f"early_auc_{round(p * 100)}"] = mann_whitney_auc(rise, lab)
    return out


def late_rise_statistics(
    curves: np.ndarray, progress: np.ndarray, labels: np.ndarray | None = None
) -> dict[str, float]:
    """How late healthy runs still gain (:data:`LATE_RISE_STATS`; printed beside the criterion).

    ``healthy_mid_gain``: median over healthy runs of (value at progress 0.5 - start) / gain
    (0.5 for a straight rise, near 1 for one that saturates early); ``healthy_late_rise``:
    median of (end - value at progress 0.75) / gain (0.25 for a straight rise).  Gain is
    peak - start, as in :func:`curve_statistics`; NaN without healthy runs.
    """
    g, x = _check_curves(curves, progress)
    lab = curve_labels(g) if labels is None else np.asarray(labels, dtype=bool)
    healthy = ~lab
    if not healthy.any():
        return dict.fromkeys(LATE_RISE_STATS, float("nan"))
    gain = np.maximum(g.max(axis=1) - g[:, 0], 1e-12)
    mid, late = (int(np.searchsorted(x, p - 1e-9)) for p in (0.5, 0.75))
    return {
        "healthy_mid_gain": float(np.median(((g[:, mid] - g[:, 0]) / gain)[healthy])),
        "healthy_late_rise": float(np.median(((g[:, -1] - g[:, late]) / gain)[healthy])),
    }


def bootstrap_statistics(
    curves: np.ndarray,
    progress: np.ndarray,
    *,
    reps: int = BOOTSTRAP_REPS,
    level: float = CI_LEVEL,
    seed: int = 0,
    statistic: Callable[..., dict[str, float]] = curve_statistics,
) -> dict[str, tuple[float, float, float]]:
    """Each statistic of ``statistic`` (:func:`curve_statistics`) with its percentile bootstrap interval over runs.

    Runs are resampled with replacement (labels travel with their run); a replicate in which a
    statistic is undefined (a class empty) is left out of that statistic's interval.

    Returns:
        ``{stat: (value, low, high)}``.
    """
    g, x = _check_curves(curves, progress)
    lab = curve_labels(g)
    point = statistic(g, x, lab)
    rng = np.random.default_rng(seed)
    reps_out = {k: [] for k in point}
    for _ in range(reps):
        idx = rng.integers(0, len(g), size=len(g))
        for k, v in statistic(g[idx], x, lab[idx]).items():
            if np.isfinite(v):
                reps_out[k].append(v)
    a = (1 - level) / 2
    out = {}
    for k, v in point.items():
        r = np.asarray(reps_out[k])
        lo, hi = np.quantile(r, [a, 1 - a]) if r.size else (np.nan, np.nan)
        out[k] = (v, float(lo), float(hi))
    return out


def corpus_curves(traces: Sequence[CurveTrace]) -> tuple[np.ndarray, np.ndarray]:
    """(gold curves, progress) of a corpus whose runs share their checkpoint steps.

    Raises:
        CurveTraceError: A run has no gold, or the runs' progress grids differ.
    """
    if not traces:
        raise CurveTraceError("corpus_curves: an empty corpus")
    rows, grid = [], None
    for t in traces:
        if t.gold is None:
            raise CurveTraceError(f"trace {t.run_id!r}: the criterion needs a 'gold' curve")
        x = np.asarray(t.step, dtype=np.float64) / float(t.step[-1])
        if grid is None:
            grid = x
        elif x.shape != grid.shape or not np.allclose(x, grid):
            raise CurveTraceError(
                f"trace {t.run_id!r}: its checkpoints differ from the first run's; resample first"
            )
        rows.append(np.asarray(t.gold, dtype=np.float64))
    assert grid is not None
    return np.array(rows), grid


class CorpusNoise(NamedTuple):
    """A corpus's noise in units of its mean gain (gain = a gold curve's peak - its start).

    Attributes:
        gold: Sd of its gold curve's noise (recorded ``gold_noise_sd``, else :data:`GOLD_NOISE`).
        eval: Sd of its measured eval's noise (recorded ``eval_noise_sd``; NaN if not recorded).
        gold_recorded: Whether the gold's noise was recorded by the corpus.
    """

    gold: float
    eval: float
    gold_recorded: bool


def corpus_noise(traces: Sequence[CurveTrace]) -> CorpusNoise:
    """The noise a corpus records for its runs (mean sd over runs) over its mean gain.

    The sds come from each run's ``meta`` (``gold_noise_sd``, ``eval_noise_sd``: the spread
    of repeated gold evaluations at a checkpoint); a noise no run records is
    :data:`GOLD_NOISE` (gold) or NaN (eval).
    """
    gold, _ = corpus_curves(traces)
    gain = float(np.mean(gold.max(axis=1) - gold[:, 0]))

    def recorded(key: str) -> float | None:
        v = [t.meta.get(key) for t in traces if isinstance(t.meta, Mapping)]
        v = [float(x) for x in v if isinstance(x, int | float)]
        return float(np.mean(v)) / gain if v and len(v) == len(traces) and gain > 0 else None

    g, e = recorded("gold_noise_sd"), recorded("eval_noise_sd")
    return CorpusNoise(
        GOLD_NOISE if g is None else g, float("nan") if e is None else e, g is not None
    )


def criterion_check(
    corpus: Mapping[str, tuple[float, float, float]], regime: Mapping[str, float]
) -> dict[str, bool]:
    """Whether each regime value lies inside the corpus's interval (the criterion, per statistic)."""
    return {k: bool(corpus[k][1] <= regime[k] <= corpus[k][2]) for k in CRITERION_STATS}
