"""The shortcut's first step, counted over sorted draws, says what the simulated futures say.

``BayesStopper._next_pays`` settles "one more checkpoint pays" from a count per hypothesis
of the first future eval's draws that beat the best eval so far.  The full look-ahead
simulates those futures as (hypotheses, draws) blocks (``_delivered``): whenever the count
says the step pays, the blocks' expected gain must be positive, and whenever the blocks'
gain is clearly positive with no draw near its threshold, the count must find it.
Special values (NaN, infinite evals) never settle anything.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings

from baselines.bayes import SHORTCUT_MARGIN, BayesStopper
from tests.oracles.eval_histories import eval_histories

STOPPERS = {
    "hard-0.12": BayesStopper("hard", 0.12, gpu_hour_price=1.2e-3),
    "hard-0.0": BayesStopper("hard", 0.0, gpu_hour_price=1.2e-3),  # every draw ties
    "paper-final": BayesStopper("paper", 0.05, gpu_hour_price=1.2e-3, deliver="final"),
    "realistic-0.12": BayesStopper("realistic", 0.12, gpu_hour_price=1.2e-3),
    "grounded-0.05": BayesStopper.for_task("grounded-0.05"),  # all hypotheses kept
}


def look_ahead_inputs(stopper: BayesStopper, job_type: int, evals: np.ndarray):
    """What ``decide`` hands the shortcut: prefix, kept weights, kept indices, best checkpoint."""
    pre = stopper._prefix[job_type][len(evals)]
    w = stopper._weights(pre, evals)
    top = stopper._top(job_type, w)
    if top is not None:
        w = w[top] / w[top].sum()
    return pre, w, top, int(evals.argmax())


def block_gain(stopper, job_type, evals, w, top, b):
    """The full look-ahead's gain of one more checkpoint, and the closest draw to a threshold."""
    n = len(evals)
    mean = stopper.posterior(job_type, evals)[1]
    if top is not None:
        mean = mean[top]
    y_best = float(evals[b])
    expected = (
        w @ stopper._delivered(mean, b, y_best, n) - stopper._ramp[job_type][: stopper.k - n + 1]
    )
    nearest = np.abs(mean[:, n : n + 1] + stopper._noise[0] - y_best).min()
    return float(expected[1] - expected[0]), float(nearest)


@settings(max_examples=300, deadline=None)
@given(history=eval_histories(STOPPERS, short_of_k=2))  # not the final checkpoint
def test_first_step_count_agrees_with_the_simulated_futures(history):
    """Sound (a step it settles pays in the full look-ahead) and complete away from ties."""
    key, job_type, evals = history
    stopper = STOPPERS[key]
    pre, w, top, b = look_ahead_inputs(stopper, job_type, evals)
    margin = SHORTCUT_MARGIN * (1.0 + pre.size * (1.0 + np.abs(evals).max()))
    price = stopper._ramp[job_type][1]
    got = stopper._next_pays(pre, evals, w, top, b, float(evals[b]), margin, price)
    gain, nearest = block_gain(stopper, job_type, evals, w, top, b)
    if got:
        assert gain > 0
    if got is None:  # "undecided" only for a draw within the margin of its threshold
        assert nearest <= 2 * margin
    if nearest > 1e-6 and gain > 1e-6:
        assert got


def test_first_step_settles_most_plausible_decisions_to_go_on():
    """On plausible hard-0.12 RLHF evals the count settles many decisions, not all."""
    stopper = STOPPERS["hard-0.12"]
    rng = np.random.default_rng(1)
    settled = 0
    for _ in range(200):
        n = int(rng.integers(1, stopper.k - 1))
        evals = 0.3 + 0.02 * np.arange(n) + 0.12 * rng.standard_normal(n)
        pre, w, top, b = look_ahead_inputs(stopper, 2, evals)
        settled += bool(stopper._next_pays(pre, evals, w, top, b, float(evals[b]), 1e-9, 1e-3))
    assert 50 < settled < 200


def test_first_step_never_settles_on_special_values():
    """A NaN or infinite eval makes the means or weights non-finite: the count settles nothing."""
    with np.errstate(all="ignore"):
        for key, stopper in STOPPERS.items():
            for special in (np.nan, np.inf, -np.inf):
                for n in (1, 4, stopper.k - 2):
                    evals = 0.3 + 0.01 * np.arange(n)
                    evals[n // 2] = special
                    for job_type in sorted(stopper._families):
                        pre, w, top, b = look_ahead_inputs(stopper, job_type, evals)
                        for y_best in (float(evals[b]), 0.3):
                            assert not stopper._next_pays(
                                pre, evals, w, top, b, y_best, 1e-9, 0.0
                            ), (key, special, n, job_type)
