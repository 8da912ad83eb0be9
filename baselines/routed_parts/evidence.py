"""Regime evidence: where a job adds it, the regimes' probabilities, the averaged gain.

A job adds its regime evidence once, at :func:`evidence_index`; the classifiers' raw
scores become floored log-probabilities (:func:`regime_log_probs`), and the experts'
gains of continuing are averaged under the posterior (:func:`averaged_gain`).
"""

from __future__ import annotations

import numpy as np

#: A regime's probability is floored here before its log is pooled: one confident
#: misreading cannot rule a regime out for the rest of the episode.
PROB_FLOOR = 1e-6
#: Experts whose posterior weight is below this are not evaluated (their share of the
#: average is below it too).
MIN_WEIGHT = 1e-6


def evidence_index(k: int, share: float) -> int:
    """The decision (evals seen) of a ``k``-checkpoint job at which it adds its evidence."""
    return min(k - 1, max(1, round(share * k)))


def regime_log_probs(raw: np.ndarray) -> np.ndarray | None:
    """(n, R) floored log-probabilities of the regimes from their raw scores (-inf: a regime
    without a classifier; None: no regime has one)."""
    if not np.isfinite(raw).any():
        return None
    raw = raw - raw.max(axis=1, keepdims=True)
    p = np.exp(raw)
    p /= p.sum(axis=1, keepdims=True)
    return np.log(np.maximum(p, PROB_FLOOR))


def averaged_gain(gains: np.ndarray, weights: np.ndarray) -> np.ndarray | None:
    """(n,) the experts' gains (n, R; NaN: no expert) averaged under ``weights`` (n, R),
    weights below :data:`MIN_WEIGHT` dropped and the rest renormalised (None: no expert)."""
    q, w = np.zeros(len(gains)), np.zeros(len(gains))
    for r in range(gains.shape[1]):
        wr = weights[:, r]
        if np.isnan(gains[:, r]).all() or not (wr >= MIN_WEIGHT).any():
            continue
        wr = np.where(wr >= MIN_WEIGHT, wr, 0.0)
        q += wr * gains[:, r]
        w += wr
    if not (w > 0).any():
        return None
    return np.where(w > 0, q / np.where(w > 0, w, 1.0), np.inf)
