"""FROZEN REFERENCE, never edited with the code: the Bayes stopper's look-ahead as first written.

A Python loop over the future checkpoints on (hypotheses, draws) blocks, before the
look-ahead was vectorised.  ``tests/policies/test_bayes_speed_equivalence.py`` checks the
stopper's ``_delivered`` against it bit for bit, and ``benchmarks/speed/bench_bayes.py`` times
the stopper against :class:`ReferenceBayes`.
"""

from __future__ import annotations

import numpy as np

from baselines.bayes import FUTURES, BayesStopper


def reference_delivered(
    stopper: BayesStopper, mean: np.ndarray, b: int, y_best: float, n: int
) -> np.ndarray:
    """The look-ahead's first form: one step of the running best per future checkpoint."""
    f = stopper.k - n
    mu = mean[:, n:]
    out = np.empty((mean.shape[0], f + 1))
    out[:, 0] = mean[:, b]
    best = np.full((mean.shape[0], FUTURES), y_best)
    q = np.repeat(mean[:, b : b + 1], FUTURES, axis=1)
    for j in range(f):
        y = mu[:, j : j + 1] + stopper._noise[j]
        better = y > best
        np.maximum(best, y, out=best)
        np.copyto(q, mu[:, j : j + 1], where=better)
        out[:, j + 1] = q.sum(axis=1)
    out[:, 1:] /= FUTURES
    if not stopper.deliver_best:
        out[:, -1] = mean[:, -1]
    return out


class ReferenceBayes(BayesStopper):
    """The stopper with the loop look-ahead: the decisions the fast one must repeat."""

    def _delivered(self, mean: np.ndarray, b: int, y_best: float, n: int) -> np.ndarray:
        return reference_delivered(self, mean, b, y_best, n)
