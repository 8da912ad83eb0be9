"""Bayes on runs longer than its tables: the same posterior, the same decisions, any length.

Runs of at most ``TABLED_CHECKPOINTS`` are served from tables built at construction; longer
ones from sufficient statistics at each decision (``posterior.Moments``), and beyond
``EXACT_LOOKAHEAD`` checkpoints the look-ahead weighs the far future in blocks.  The
fixture holds every decision of 20-job episodes at K = 50, 100 and 150, recorded with the
stopper that tabled every prefix of every K (2.1 GB at K = 100, 7 GB at 150).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from baselines.bayes import (
    EXACT_LOOKAHEAD,
    LOOKAHEAD_POINTS,
    MODEL_JITTER,
    NEAR_CHECKPOINTS,
    TABLED_CHECKPOINTS,
    BayesStopper,
)
from baselines.bayes.posterior import Moments, tabled_means, tabled_weights
from evalstop_gym.sim import SimConfig
from evalstop_gym.sim.calibration import get_calibration
from evalstop_gym.sim.engine import Simulator
from evalstop_gym.suite import suite_config

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "bayes_long_decisions.json"


def long_case(name: str, noise: float, k: int, deliver: str, price: float):
    """The stopper and the simulator config of a family at ``k`` checkpoints a job, 20 jobs."""
    if name == "grounded":
        task = suite_config("grounded-0.05")
        cal = replace(get_calibration(task.sim_config.calibration), evals_per_job=k)
        sim_cfg = replace(task.sim_config, n_jobs=20, deliver=deliver, calibration=cal)
        return BayesStopper.from_config(replace(task, sim_config=sim_cfg), price), sim_cfg
    cal = replace(get_calibration(name), evals_per_job=k)
    sim_cfg = SimConfig(n_jobs=20, calibration=cal, eval_noise=noise, deliver=deliver)
    return BayesStopper(cal, noise, gpu_hour_price=1.2e-3 * price, deliver=deliver), sim_cfg


def decisions(name: str, noise: float, k: int, deliver: str, price: float) -> str:
    """Every decision of seed 0's episode, in order, as a string of 0 (go on) and 1 (stop)."""
    stopper, sim_cfg = long_case(name, noise, k, deliver, price)
    bits: list[bool] = []

    def record(view) -> bool:
        bits.append(stopper(view))
        return bits[-1]

    Simulator(sim_cfg, 0).run(record)
    return "".join("1" if b else "0" for b in bits)


def _key(name, noise, k, deliver, price) -> str:
    return f"{name}-{noise}-{deliver}-x{price}-K{k}"


def _slow(case) -> list:
    """Near 5 s on a loaded machine: the grounded family (every hypothesis simulated,
    probes) at K = 100."""
    return [pytest.mark.slow] if case[0] == "grounded" and case[2] > 50 else []


CASES = [
    pytest.param(*case, marks=_slow(case), id=_key(*case))
    for case in [
        ("paper", 0.12, 50, "best", 1.0),
        ("paper", 0.05, 50, "final", 1.0),
        ("hard", 0.12, 50, "best", 1.0),
        ("realistic", 0.12, 50, "best", 1.0),
        ("grounded", 0.05, 50, "best", 1.0),
        ("grounded", 0.05, 50, "final", 2.0),
        ("hard", 0.12, 100, "best", 1.0),
        ("paper", 0.05, 100, "final", 1.0),
        ("grounded", 0.05, 100, "best", 1.0),
        ("hard", 0.12, 150, "best", 1.0),
        ("paper", 0.12, 150, "best", 1.0),
    ]
]


@pytest.mark.parametrize(("name", "noise", "k", "deliver", "price"), CASES)
def test_long_runs_take_the_decisions_of_the_tabled_stopper(name, noise, k, deliver, price):
    want = json.loads(FIXTURE.read_text())[_key(name, noise, k, deliver, price)]
    got = decisions(name, noise, k, deliver, price)
    assert len(got) == len(want)
    assert got == want
    assert "1" in got and "0" in got  # the episode exercises both answers


STOPPERS = {
    "hard-0.12": BayesStopper("hard", 0.12, gpu_hour_price=1.2e-3),
    "grounded-0.05": BayesStopper.for_task("grounded-0.05"),
}


@settings(max_examples=40, deadline=None)
@given(
    key=st.sampled_from(sorted(STOPPERS)),
    n=st.integers(1, TABLED_CHECKPOINTS - 1),
    level=st.floats(-1.0, 1.5),
    slope=st.floats(-0.05, 0.05),
    seed=st.integers(0, 2**32 - 1),
)
def test_moments_give_the_tabled_posterior(key, n, level, slope, seed) -> None:
    stopper = STOPPERS[key]
    assert stopper.k == TABLED_CHECKPOINTS
    rng = np.random.default_rng(seed)
    y = level + slope * np.arange(n) + stopper.sigma * rng.standard_normal(n)
    var = stopper.sigma**2 + MODEL_JITTER**2
    for job_type, fam in stopper._families.items():
        pre = stopper._prefix[job_type][n]
        moments = Moments(fam, var)
        w, v = moments.coefficients(y)
        np.testing.assert_allclose(w, tabled_weights(pre, y), rtol=0, atol=1e-9)
        mean = moments.means(v)
        np.testing.assert_allclose(mean, tabled_means(pre, y), rtol=0, atol=1e-8)


def test_a_long_run_is_served_without_tables() -> None:
    stopper, _ = long_case("hard", 0.12, 20_000, "best", 1.0)
    assert stopper._prefix == {} and stopper._moments
    held = sum(a.nbytes for m in stopper._moments.values() for a in (m.phi, m.phi_sums))
    assert held < 200e6  # linear in K: bases and their running sums, no K**3 tables
    rising = 0.3 + 0.4 * np.linspace(0, 1, 5000) + 0.02 * np.sin(np.arange(5000))
    assert isinstance(stopper.decide(0, rising), bool)


@pytest.mark.parametrize("k", [EXACT_LOOKAHEAD + 1, 400, 2000, 20_000])
def test_the_far_future_is_weighed_in_blocks_that_cover_it(k) -> None:
    stopper = BayesStopper.__new__(BayesStopper)
    stopper.k = k
    for n in sorted({1, 2, 10, k // 2, k - LOOKAHEAD_POINTS - 1, k - LOOKAHEAD_POINTS, k - 1}):
        ends = stopper._future_ends(n)
        if k - n <= LOOKAHEAD_POINTS:
            assert ends is None
            continue
        assert len(ends) == LOOKAHEAD_POINTS
        assert list(ends[:NEAR_CHECKPOINTS]) == list(range(1, NEAR_CHECKPOINTS + 1))
        assert ends[-1] == k - n and ends[-1] - ends[-2] == 1  # the last checkpoint alone
        assert (np.diff(ends) >= 1).all()  # strictly increasing: every checkpoint in one point
        sizes = np.diff(ends[NEAR_CHECKPOINTS - 1 : -1])
        assert sizes.max() - sizes.min() <= 1  # blocks of near-equal length


def test_runs_within_the_exact_look_ahead_weigh_every_checkpoint() -> None:
    stopper = BayesStopper.__new__(BayesStopper)
    stopper.k = EXACT_LOOKAHEAD
    assert all(stopper._future_ends(n) is None for n in range(1, EXACT_LOOKAHEAD))


def _prefixes(sim_cfg: SimConfig, every: int) -> list:
    """(job type, evals) of every ``every``-th checkpoint of seed 0's jobs, run to the end."""
    seen: list = []

    def record(view) -> bool:
        evals = np.fromiter(view.evals, float)
        if len(evals) % every == 0:
            seen.append((view.job_type, evals))
        return False

    Simulator(sim_cfg, 0).run(record)
    return seen


@pytest.mark.slow
@pytest.mark.parametrize("name", ["hard", "grounded"])
def test_the_blocked_look_ahead_takes_the_exact_decision_on_long_runs(name) -> None:
    noise = 0.12 if name == "hard" else 0.05
    stopper, sim_cfg = long_case(name, noise, 400, "best", 1.0)
    seen = _prefixes(replace(sim_cfg, n_jobs=6), every=9)
    exact = BayesStopper.__new__(BayesStopper)
    exact.__dict__.update(stopper.__dict__)
    exact._future_ends = lambda n: None  # every future checkpoint weighed
    same = [stopper.decide(t, y) == exact.decide(t, y) for t, y in seen]
    assert len(same) > 200
    assert np.mean(same) >= 0.97


@pytest.mark.parametrize("special", [np.nan, np.inf, -np.inf])
def test_special_values_on_a_long_run_give_an_answer(special) -> None:
    stopper, _ = long_case("grounded", 0.05, 400, "best", 1.0)
    evals = 0.3 + 0.001 * np.arange(200)
    evals[100] = special
    with np.errstate(all="ignore"):
        for job_type in sorted(stopper._families):
            assert isinstance(stopper.decide(job_type, evals), bool)
