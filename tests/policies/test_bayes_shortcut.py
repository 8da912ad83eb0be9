"""The Bayes stopper's shortcut never changes a decision.

``BayesStopper.decide`` first tries to settle "go on" from the look-ahead's first few
checkpoints (``_goes_on``) with a margin far above rounding, and otherwise runs the full
look-ahead.  With the shortcut switched off every decision goes through the full
look-ahead: both must answer the same for any evals, on every family (the published
``gao``/``rise-decline`` ones over their heaviest hypotheses, the grounded one over all
of them with its probes) and both delivery modes.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
from hypothesis import given, settings

from baselines.bayes import BayesStopper
from tests.oracles.eval_histories import eval_histories
from tests.oracles.reference_bayes import ReferenceBayes

STOPPERS = {
    "hard-0.12": BayesStopper("hard", 0.12, gpu_hour_price=1.2e-3),
    "hard-0.0": BayesStopper("hard", 0.0, gpu_hour_price=1.2e-3),  # every draw ties
    "paper-final": BayesStopper("paper", 0.05, gpu_hour_price=1.2e-3, deliver="final"),
    "realistic-0.12": BayesStopper("realistic", 0.12, gpu_hour_price=1.2e-3),
    "grounded-0.05": BayesStopper.for_task("grounded-0.05"),
    "grounded-final": BayesStopper("grounded", 0.05, gpu_hour_price=2.2e-3, deliver="final"),
}


def without_shortcut(stopper: BayesStopper) -> BayesStopper:
    """A copy of ``stopper`` that runs the full look-ahead at every decision."""
    full = copy.copy(stopper)
    full._shortcut = False
    return full


FULL = {key: without_shortcut(s) for key, s in STOPPERS.items()}


@settings(max_examples=150, deadline=None)
@given(history=eval_histories(STOPPERS, short_of_k=1))
def test_shortcut_takes_the_full_look_ahead_decision(history):
    """Any evals, any job type: the same decision with the shortcut and without."""
    key, job_type, evals = history
    stopper = STOPPERS[key]
    assert stopper.decide(job_type, evals) == FULL[key].decide(job_type, evals)


def test_shortcut_settles_most_decisions_and_leaves_the_rest():
    """On plausible evals the shortcut settles many decisions, but not all of them."""
    stopper = STOPPERS["hard-0.12"]
    rng = np.random.default_rng(0)
    settled = 0
    for _ in range(200):
        n = int(rng.integers(1, stopper.k))
        evals = 0.3 + 0.02 * np.arange(n) + 0.12 * rng.standard_normal(n)
        pre = stopper._prefix[2][n]
        w = stopper._weights(pre, evals)
        top = stopper._top(2, w)
        w = w[top] / w[top].sum()
        settled += stopper._goes_on(2, pre, evals, w, top, int(evals.argmax()))
    assert 50 < settled < 200


@pytest.mark.parametrize("special", [np.nan, np.inf, -np.inf])
def test_shortcut_leaves_special_values_to_the_full_look_ahead(special):
    """NaN and infinite evals fail the shortcut's tests: the full look-ahead decides."""
    with np.errstate(all="ignore"):
        check_special_values(special)


def check_special_values(special: float) -> None:
    """Every stopper, job type and a few eval counts, with one eval set to ``special``."""
    for key, stopper in STOPPERS.items():
        for n in (1, 4, stopper.k - 1):
            evals = 0.3 + 0.01 * np.arange(n)
            evals[n // 2] = special
            for job_type in sorted(stopper._families):
                pre = stopper._prefix[job_type][n]
                w = stopper._weights(pre, evals)
                top = stopper._top(job_type, w)
                if top is not None:
                    w = w[top] / w[top].sum()
                b = int(evals.argmax())
                assert not stopper._goes_on(job_type, pre, evals, w, top, b), key
                got = stopper.decide(job_type, evals)
                assert got == FULL[key].decide(job_type, evals), key


def test_weights_keep_the_bits_of_the_posterior_as_first_written():
    """The in-place weights equal ``exp(log_w - max)`` normalised, bit for bit."""
    rng = np.random.default_rng(5)
    for stopper in (STOPPERS["hard-0.12"], STOPPERS["grounded-0.05"]):
        for _ in range(100):
            job_type = int(rng.choice(sorted(stopper._families)))
            n = int(rng.integers(1, stopper.k + 1))
            y = rng.standard_normal(n) * rng.choice([0.01, 0.3, 3.0])
            pre = stopper._prefix[job_type][n]
            z = (pre.whiten @ y).reshape(pre.whiten_offset.shape) - pre.whiten_offset
            log_w = pre.log_norm - 0.5 * np.einsum("hn,hn->h", z, z)
            want = np.exp(log_w - log_w.max())
            want /= want.sum()
            got = stopper._weights(pre, y)
            assert (got.view(np.uint64) == want.view(np.uint64)).all()


def test_the_frozen_reference_runs_the_full_look_ahead():
    """A subclass that replaces the look-ahead never takes the shortcut of the base one."""
    assert STOPPERS["hard-0.12"]._shortcut
    assert not ReferenceBayes("hard", 0.12)._shortcut
