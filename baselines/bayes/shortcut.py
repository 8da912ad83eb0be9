"""The shortcut of the Bayes stopper's look-ahead: "go on" settled from a few checkpoints.

On one ``hard-0.12`` episode, one more checkpoint already pays in 78 % of the decisions
to go on, two or three in 20 % more.  :class:`Shortcut` (a base of
:class:`~baselines.bayes.BayesStopper`) asks the look-ahead's first
:data:`SHORTCUT_STEPS` columns first, with a margin that leaves every close call to the
full look-ahead, so a decision it takes is the full look-ahead's.  On tabled runs it reads
the tabled posterior (:class:`~baselines.bayes.posterior.Prefix`); on runs served from
moments, one more checkpoint's count on the means the look-ahead would weigh.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .families import FUTURES
from .posterior import Prefix, einsum

#: Future checkpoints the shortcut of :meth:`BayesStopper.decide` looks ahead before the
#: full look-ahead: on one ``hard-0.12`` episode, one more checkpoint already pays in 78 %
#: of the decisions to go on, two or three in 20 % more.
SHORTCUT_STEPS = 3
#: The shortcut's margin, relative to the size of the numbers it adds: orders of magnitude
#: above their rounding (about 1e-16 of that size per operation), so a gain it finds is the
#: sign of the full look-ahead's gain, however BLAS rounds.
SHORTCUT_MARGIN = 1e-9


class Shortcut:
    """The shortcut's two steps, on a stopper's tables (its ``_draw_tiles``, ``_ramp``, ...)."""

    deliver_best: bool
    k: int
    _first_draws: np.ndarray
    _beat_share: np.ndarray
    _noise_size: float
    _ramp_end: float
    _ramp: dict[int, np.ndarray]
    _step_cost: dict[int, float]

    def _goes_on(
        self,
        job_type: int,
        pre: Prefix,
        evals: np.ndarray,
        w: np.ndarray,
        top: np.ndarray | None,
        b: int,
    ) -> bool:
        """Whether the look-ahead's first :data:`SHORTCUT_STEPS` checkpoints settle "go on".

        They are the first columns of :meth:`_delivered` (the running best and the
        delivered checkpoint after future eval j depend on the evals before it only), on
        the hypotheses ``top`` of weights ``w``.  The few mean-curve columns they need
        come from one BLAS call that rounds otherwise than :meth:`_means`, and the sums
        run in another order: so a gain counts only beyond :data:`SHORTCUT_MARGIN` of the
        size of the numbers, and a simulated eval within that margin of the best before it
        (where the full look-ahead's comparison could go the other way) leaves the
        decision to the full look-ahead.  NaN fails every test, so it goes there too.
        """
        n = len(evals)
        steps = min(self.k - n, SHORTCUT_STEPS)
        ramp = self._ramp[job_type]
        # A NaN eval is the argmax (numpy's argmax takes the first NaN), so y_best is NaN and
        # so is the margin, whatever Python's min makes of the NaN.
        values = evals.tolist()
        y_best, lowest = values[b], min(values)
        margin = SHORTCUT_MARGIN * (
            1.0 + pre.size * (1.0 + max(y_best, -lowest)) + self._noise_size + self._ramp_end
        )
        if not math.isfinite(margin):  # a NaN or infinite eval: the full look-ahead decides
            return False
        # Whether _next_pays answers for the first step (not for a completed job's last).
        # Its "no" is not re-asked below; nor is a "go on" it missed by its margin, which
        # only leaves the decision to the full look-ahead.
        first = self.deliver_best or n + 1 < self.k
        if first:
            price = self._step_cost[job_type]  # ramp[1], as a Python float
            pays = self._next_pays(pre, evals, w, top, b, y_best, margin, price)
            if pays is None:  # a first draw near its threshold: the full look-ahead decides
                return False
            if pays or steps == 1:
                return pays
        h = pre.by_checkpoint_offset.shape[1]
        # Checkpoints b .. n + steps - 1 (those between b and n too: one call, not two).
        cols = pre.by_checkpoint[b * h : (n + steps) * h].dot(evals).reshape(-1, h)
        cols += pre.by_checkpoint_offset[b : n + steps]
        if top is not None:
            cols = cols.take(top, axis=1)
        stop_now = w.dot(cols[0])
        # Checkpoint b's means moved next to the future ones (over checkpoint n - 1's, not
        # needed here), then each mean repeated over its hypothesis's draws: the steps below
        # are calls on contiguous rows of h * FUTURES, without numpy's broadcasting machinery.
        cols[n - b - 1] = cols[0]
        tiles = cols[n - b - 1 :].repeat(FUTURES, axis=1)  # (1 + steps, h * FUTURES)
        y = tiles[1:] + self._draw_tiles(len(w))[:steps]  # future eval j on each simulated future
        w_draws = w.repeat(FUTURES)  # the weight of each simulated future
        best: Any = y_best
        q = tiles[0]  # the delivered score while no future eval beats y_best: checkpoint b's
        for j in range(steps):
            # The first step after _next_pays: its draws are clear and its gain was counted.
            counted = first and j == 0
            if not counted:
                gap = y[j] - best
                better = gap > 0
                if not np.minimum.reduce(np.abs(gap, out=gap)) > margin:
                    return False
            else:
                better = y[j] > best
            np.putmask(q, better, tiles[j + 1])
            if not counted:
                if not self.deliver_best and n + j + 1 == self.k:
                    value = w.dot(cols[-1])  # a completed job delivers its final checkpoint
                else:
                    value = q.dot(w_draws) / FUTURES
                if value - ramp[j + 1] - stop_now > margin:
                    return True
            if j + 1 < steps:
                best = np.maximum(best, y[j], out=y[j])  # y[j] is not needed after this step
        return False

    def _next_pays(
        self,
        pre: Prefix,
        evals: np.ndarray,
        w: np.ndarray,
        top: np.ndarray | None,
        b: int,
        y_best: float,
        margin: float,
        price: float,
    ) -> bool | None:
        """Whether one more checkpoint already pays: :meth:`_goes_on`'s first step, counted.

        The same test on the same simulated futures, written per hypothesis i: future eval 0
        beats the best so far on the draws above ``t_i = y_best - mean_i[n]``, so with
        ``c_i`` of them the gain over stopping now is ``sum_i w_i c_i (mean_i[n] -
        mean_i[b]) / FUTURES``: a count over the sorted draws and a few calls on vectors
        instead of (hypotheses, draws) blocks.  As in :meth:`_goes_on`, a draw within
        ``margin`` of its threshold (where rounding could turn the comparison) returns None,
        which leaves the decision to the full look-ahead; a gain within ``margin`` of the
        price returns False, and :meth:`_goes_on` looks further, its first step's draws
        known clear of their thresholds; a NaN or infinite mean makes the gain NaN or
        infinite, which never counts.
        """
        rows, offset = pre.next_step[b]
        means = rows.dot(evals).reshape(offset.shape)
        means += offset
        if top is not None:
            means = means.take(top, axis=1)
        # means[1]: mean_i[n] - mean_i[b]
        return self._first_gain_pays(means[0], means[1], w, y_best, margin, price)

    def _first_gain_pays(
        self,
        mean_next: np.ndarray,
        gain_next: np.ndarray,
        w: np.ndarray,
        y_best: float,
        margin: float,
        price: float,
    ) -> bool | None:
        """:meth:`_next_pays`'s count, given each hypothesis's next mean and its gain over b's."""
        # Draws below t_i - margin, and below t_i + margin: equal counts iff none is near t_i.
        # (Two calls on the thresholds cost less than one on a (2, h) block built for them.)
        draws = self._first_draws
        below = draws.searchsorted((y_best - margin) - mean_next)
        near = draws.searchsorted((y_best + margin) - mean_next)
        # below <= near slot by slot, so the counts are equal iff the rows are.
        if below.tobytes() != near.tobytes():
            return None
        # One three-operand sum instead of a product and a dot.
        gain = einsum("h,h,h->", w, gain_next, self._beat_share.take(near))
        return bool(price + margin < gain < np.inf)

    def _next_point_pays(
        self, mean: np.ndarray, w: np.ndarray, y_best: float, price: float
    ) -> bool:
        """A run served from moments: whether one more checkpoint surely pays ("go on").

        ``mean`` (h, 1 + f): the posterior means at checkpoint b and at the look-ahead's
        future points, the first of which is always the next checkpoint alone, with the
        first future eval's draws (:meth:`BayesStopper._future_points`).  The look-ahead's
        second column beats its first beyond the margin, which the full look-ahead answers
        with "go on" (the value of stopping after one more checkpoint is a lower bound of
        every branch's value of going on); anything closer, or not finite, is left to it.
        """
        now, nxt = mean[:, 0], mean[:, 1]
        size = float(np.abs(mean[:, :2]).max(initial=0.0))
        margin = SHORTCUT_MARGIN * (
            1.0 + max(size, abs(y_best)) + self._noise_size + self._ramp_end
        )
        if not math.isfinite(margin):
            return False
        return bool(self._first_gain_pays(nxt, nxt - now, w, y_best, margin, price))
