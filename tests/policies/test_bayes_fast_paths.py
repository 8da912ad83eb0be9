"""The Bayes stopper's faster forms give what the plainer forms they replaced give.

``BayesStopper`` computes its matrix-vector products with ``ndarray.dot`` (the same BLAS
call as ``@``, without the generalised-ufunc machinery around it), reduces the weights'
maximum and sum into 0-d arrays instead of NumPy scalars, and takes its shortcut's
look-ahead steps (``_goes_on``) on rows of (hypotheses x draws) repeated up front instead
of on broadcast (hypotheses, draws) blocks.  The posterior weights and mean curves must
keep their bits, and the shortcut must answer exactly as the broadcasting loop did, for
any evals: plausible ones, rounded ones that tie, and NaN, infinite, huge and subnormal
ones.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from baselines.bayes import FUTURES, SHORTCUT_MARGIN, SHORTCUT_STEPS, BayesStopper, _einsum
from evalstop_gym.sim.boundary import JobView
from tests.oracles.eval_histories import eval_histories

STOPPERS = {
    "hard-0.12": BayesStopper("hard", 0.12, gpu_hour_price=1.2e-3),
    "hard-0.0": BayesStopper("hard", 0.0, gpu_hour_price=1.2e-3),  # every draw ties
    "paper-final": BayesStopper("paper", 0.05, gpu_hour_price=1.2e-3, deliver="final"),
    "grounded-0.05": BayesStopper.for_task("grounded-0.05"),  # all hypotheses kept
}

#: Values one eval may be replaced by (None: none is).
SPECIAL = [None, np.nan, np.inf, -np.inf, 1e150, -1e150, 1e-310, -0.0, 0.0]


@st.composite
def hostile_histories(draw: st.DrawFn, short_of_k: int) -> tuple[str, int, np.ndarray]:
    """``eval_histories``, with one eval sometimes replaced by a special value."""
    key, job_type, evals = draw(eval_histories(STOPPERS, short_of_k=short_of_k))
    special = draw(st.sampled_from(SPECIAL))
    if special is not None:
        evals = evals.copy()
        evals[draw(st.integers(0, len(evals) - 1))] = special
    return key, job_type, evals


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal shapes and equal bit patterns (NaN payloads and signed zeros included)."""
    return a.shape == b.shape and a.tobytes() == b.tobytes()


def matmul_weights(pre: Any, y: np.ndarray) -> np.ndarray:
    """``BayesStopper._weights`` as it was written: ``@``, and NumPy scalars as operands."""
    z = (pre.whiten @ y).reshape(pre.whiten_offset.shape)
    np.subtract(z, pre.whiten_offset, out=z)
    w = _einsum("hn,hn->h", z, z)
    w *= -0.5
    w += pre.log_norm
    w -= np.maximum.reduce(w)
    np.exp(w, out=w)
    w /= np.add.reduce(w)
    return w


@settings(max_examples=300, deadline=None)
@given(history=hostile_histories(short_of_k=0))
def test_posterior_keeps_the_bits_of_matmul(history):
    """Weights and mean curves: ``ndarray.dot`` gives the bits ``@`` gave, specials included."""
    key, job_type, evals = history
    stopper = STOPPERS[key]
    pre = stopper._prefix[job_type][len(evals)]
    with np.errstate(all="ignore"):
        w, mean = stopper.posterior(job_type, evals)
        want_w = matmul_weights(pre, evals)
        want_mean = (pre.curve @ evals).reshape(pre.curve_offset.shape) + pre.curve_offset
    assert same_bits(w, want_w)
    assert same_bits(mean, want_mean)


def test_by_checkpoint_holds_the_rows_of_curve():
    """``by_checkpoint`` is ``curve`` reordered checkpoint-major, the same floats."""
    for stopper in STOPPERS.values():
        for prefixes in stopper._prefix.values():
            for pre in prefixes[1:]:
                h, k = pre.curve_offset.shape
                n = pre.curve.shape[1]
                by_hypothesis = pre.curve.reshape(h, k, n)
                assert same_bits(pre.by_checkpoint, by_hypothesis.transpose(1, 0, 2).reshape(-1, n))
                assert same_bits(pre.by_checkpoint_offset, pre.curve_offset.T.copy())


def broadcast_goes_on(
    stopper: BayesStopper,
    job_type: int,
    pre: Any,
    evals: np.ndarray,
    w: np.ndarray,
    top: np.ndarray | None,
    b: int,
) -> bool:
    """``BayesStopper._goes_on`` as it was written: a loop over (hypotheses, draws) blocks.

    The same preamble, first step and mean columns; then each step's evals broadcast from a
    column of means and a row of draws, and the delivered scores chosen by ``np.where`` and
    ``np.copyto``.
    """
    n = len(evals)
    steps = min(stopper.k - n, SHORTCUT_STEPS)
    ramp = stopper._ramp[job_type]
    y_best, lowest = float(evals[b]), min(evals.tolist())
    margin = SHORTCUT_MARGIN * (
        1.0 + pre.size * (1.0 + max(y_best, -lowest)) + stopper._noise_size + stopper._ramp_end
    )
    if not np.isfinite(margin):
        return False
    first = stopper.deliver_best or n + 1 < stopper.k
    if first:
        pays = stopper._next_pays(pre, evals, w, top, b, y_best, margin, ramp[1])
        if pays is None:
            return False
        if pays or steps == 1:
            return pays
    h = pre.by_checkpoint_offset.shape[1]
    cols = pre.by_checkpoint[b * h : (n + steps) * h].dot(evals).reshape(-1, h)
    cols += pre.by_checkpoint_offset[b : n + steps]
    if top is not None:
        cols = cols.take(top, axis=1)
    stop_now = w @ cols[0]
    mean_b = cols[0][:, None]
    w_draws = w.repeat(FUTURES)
    best: Any = y_best
    q = None
    for j in range(steps):
        col = cols[n - b + j][:, None]
        y = col + stopper._noise[j]
        counted = first and j == 0
        if not counted:
            gap = y - best
            better = gap > 0
            if not np.minimum.reduce(np.abs(gap, out=gap), axis=None) > margin:
                return False
        else:
            better = y > best
        if q is None:
            q = np.where(better, col, mean_b)
        else:
            np.copyto(q, col, where=better)
        if not counted:
            if not stopper.deliver_best and n + j + 1 == stopper.k:
                value = w @ cols[-1]
            else:
                value = (q.ravel() @ w_draws) / FUTURES
            if value - ramp[j + 1] - stop_now > margin:
                return True
        if j + 1 < steps:
            best = np.maximum(best, y, out=y)
    return False


def shortcut_inputs(stopper: BayesStopper, job_type: int, evals: np.ndarray):
    """What ``decide`` hands the shortcut: prefix, kept weights, kept indices, best checkpoint."""
    pre = stopper._prefix[job_type][len(evals)]
    w = stopper._weights(pre, evals)
    top = stopper._top(job_type, w)
    if top is not None:
        w = w.take(top)
        w /= np.add.reduce(w)
    return pre, w, top, int(evals.argmax())


@settings(max_examples=400, deadline=None)
@given(history=hostile_histories(short_of_k=1))
def test_shortcut_answers_as_the_broadcast_loop(history):
    """Any evals, any job type and delivery: the shortcut's answer equals the loop's."""
    key, job_type, evals = history
    stopper = STOPPERS[key]
    with np.errstate(all="ignore"):
        pre, w, top, b = shortcut_inputs(stopper, job_type, evals)
        got = stopper._goes_on(job_type, pre, evals, w, top, b)
        want = broadcast_goes_on(stopper, job_type, pre, evals, w, top, b)
    assert got == want


def test_shortcut_steps_are_exercised_and_agree():
    """Plausible histories reach the steps after the first (both answers), and agree there."""
    rng = np.random.default_rng(7)
    reached = {True: 0, False: 0}
    for key, stopper in STOPPERS.items():
        for _ in range(150):
            n = int(rng.integers(1, stopper.k))
            job_type = int(rng.choice(sorted(stopper._families)))
            evals = 0.3 + 0.015 * np.arange(n) + 0.1 * rng.standard_normal(n)
            pre, w, top, b = shortcut_inputs(stopper, job_type, evals)
            y_best = float(evals[b])
            margin = SHORTCUT_MARGIN * (1.0 + pre.size * (1.0 + np.abs(evals).max()))
            price = float(stopper._ramp[job_type][1])
            got = stopper._goes_on(job_type, pre, evals, w, top, b)
            assert got == broadcast_goes_on(stopper, job_type, pre, evals, w, top, b), key
            if stopper._next_pays(pre, evals, w, top, b, y_best, margin, price) is False:
                reached[got] += 1
    assert reached[True] > 10 and reached[False] > 10


def test_call_reads_the_view_as_decide_reads_an_array():
    """The simulator's interface converts the view's tuple of evals to the same floats."""
    stopper = STOPPERS["hard-0.12"]
    rng = np.random.default_rng(3)
    for _ in range(60):
        n = int(rng.integers(1, stopper.k))
        job_type = int(rng.integers(0, 3))
        evals = tuple((0.3 + 0.02 * np.arange(n) + 0.1 * rng.standard_normal(n)).tolist())
        view = JobView(job_type, evals, 0, n / stopper.k, ())
        assert stopper(view) == stopper.decide(job_type, np.array(evals, dtype=float))
