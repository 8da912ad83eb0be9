"""The Bayes stopper's vectorised look-ahead gives the loop's floats and decisions exactly.

``tests.oracles.reference_bayes.reference_delivered`` is the look-ahead as it was written first (a Python loop
over the future checkpoints on (hypotheses, draws) blocks); the stopper's
``_delivered`` must return the same bits for any mean curves, best checkpoint and
number of evals, and whole episodes must take the same decisions.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from baselines.bayes import BayesStopper
from evalstop_gym import SimConfig, Simulator
from tests.oracles.reference_bayes import ReferenceBayes, reference_delivered


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal shapes and equal bit patterns (so -0.0 != 0.0 and NaN == NaN of one kind)."""
    return a.shape == b.shape and bool((a.view(np.uint64) == b.view(np.uint64)).all())


STOPPERS = {
    ("hard", 0.12, "best"): BayesStopper("hard", 0.12),
    ("hard", 0.0, "best"): BayesStopper("hard", 0.0),  # no noise: every draw ties
    ("paper", 0.05, "final"): BayesStopper("paper", 0.05, deliver="final"),
    ("grounded", 0.08, "best"): BayesStopper("grounded", 0.08),
}


@settings(max_examples=300, deadline=None)
@given(
    key=st.sampled_from(sorted(STOPPERS)),
    h=st.integers(1, 40),
    data=st.data(),
    seed=st.integers(0, 2**32 - 1),
    scale=st.sampled_from([1e-3, 0.1, 1.0, 30.0]),
    rounded=st.booleans(),
)
def test_delivered_matches_the_loop_bit_for_bit(key, h, data, seed, scale, rounded):
    """Any mean curves, best checkpoint and eval count: the same array, bit for bit."""
    stopper = STOPPERS[key]
    n = data.draw(st.integers(1, stopper.k - 1), label="n")
    b = data.draw(st.integers(0, n - 1), label="b")
    rng = np.random.default_rng(seed)
    mean = rng.standard_normal((h, stopper.k)) * scale
    if rounded:  # repeated values, so future evals tie with each other and the best
        mean = np.round(mean, 1)
    y_best = float(mean[int(rng.integers(h)), b]) if rng.random() < 0.5 else float(mean.max())
    got = stopper._delivered(mean, b, y_best, n)
    want = reference_delivered(stopper, mean, b, y_best, n)
    assert same_bits(got, want)


def test_delivered_keeps_the_loop_on_special_values():
    """Infinite and NaN means and bests propagate as the loop propagates them."""
    stopper = STOPPERS[("hard", 0.12, "best")]
    rng = np.random.default_rng(3)
    for special in (np.inf, -np.inf, np.nan):
        for n in (1, 5, stopper.k - 1):
            mean = rng.standard_normal((6, stopper.k))
            mean[2, n:] = special
            mean[4, min(n + 2, stopper.k - 1)] = special
            for y_best in (0.0, special, 10.0):
                got = stopper._delivered(mean, 0, y_best, n)
                assert same_bits(got, reference_delivered(stopper, mean, 0, y_best, n))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"calibration": "hard", "eval_noise": 0.12},
        {"calibration": "grounded", "eval_noise": 0.08},
        {"calibration": "paper", "eval_noise": 0.12, "deliver": "final"},
    ],
    ids=["hard-0.12", "grounded-0.08", "paper-final"],
)
def test_episodes_take_the_same_decisions(kwargs):
    """Whole 60-job episodes: every decision of the fast stopper equals the loop's."""
    cfg = SimConfig(n_jobs=60, **kwargs)
    args = {"calibration": kwargs["calibration"], "eval_noise": kwargs["eval_noise"]}
    args["deliver"] = kwargs.get("deliver", "best")
    fast, ref = (
        BayesStopper(**args, gpu_hour_price=1e-3),
        ReferenceBayes(**args, gpu_hour_price=1e-3),
    )
    for seed in range(2):
        taken: list[list[bool]] = [[], []]
        for out, stopper in zip(taken, (fast, ref)):
            sim = Simulator(cfg, seed)

            def record(view, stopper=stopper, out=out):
                out.append(stopper(view))
                return out[-1]

            m = sim.run(record)
            assert m["n_decisions"] == len(out)
        assert taken[0] == taken[1]
        assert any(taken[0]) and not all(taken[0])
