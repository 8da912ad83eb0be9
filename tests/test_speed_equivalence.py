"""The speed paths of issue 15 give exactly what the slow paths they skip give."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalstop_gym.sim.config import SimConfig
from evalstop_gym.sim.engine import Simulator
from evalstop_gym.sim.metrics import linear_percentiles
from evalstop_gym.sim.workloads import step_time_fractions

SCHEDULERS = ("fifo", "sjf-est", "srtf-est", "loss-aware", "tiresias")


class _AlwaysSchedulingPass(Simulator):
    """The engine with every arrival going through enqueue + a full scheduling pass."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._lean_arrivals = False


def _episode(cls: type[Simulator], cfg: SimConfig, seed: int, stop_seed: int):
    sim = cls(cfg, seed, record_events=True)
    rng = np.random.default_rng(stop_seed)
    while sim.next_decision() is not None:
        sim.decide(int(rng.integers(3 if cfg.pools is None else 2)) if stop_seed else 0)
    return sim.events, sim.metrics(), sim.cluster_metrics()


@settings(max_examples=12, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    stop_seed=st.integers(0, 3),
    scheduler=st.sampled_from(SCHEDULERS),
    calibration=st.sampled_from(("paper", "hard")),
    load=st.sampled_from((0.3, 0.9, 2.0)),
)
def test_direct_start_of_arrivals_equals_a_scheduling_pass(
    seed: int, stop_seed: int, scheduler: str, calibration: str, load: float
) -> None:
    cfg = SimConfig(scheduler=scheduler, calibration=calibration, n_jobs=40, load=load)
    fast = _episode(Simulator, cfg, seed, stop_seed)
    slow = _episode(_AlwaysSchedulingPass, cfg, seed, stop_seed)
    assert repr(fast) == repr(slow)  # repr: NaN metrics compare equal, floats to the bit


@pytest.mark.parametrize("seed", [0, 7, None])
def test_jitter_stream_is_child_3_of_the_seed(seed: int | None) -> None:
    cfg = SimConfig(calibration="hard", n_jobs=30)
    sim = Simulator(cfg, 123 if seed is None else seed)
    rng = np.random.default_rng(np.random.SeedSequence(123 if seed is None else seed).spawn(4)[3])
    frac = step_time_fractions(30, sim.n_ckpt, cfg.resolved_calibration().step_time_jitter, rng)
    assert sim.step_frac == frac.tolist()


@pytest.mark.parametrize(
    ("decision", "state"),
    [(np.bool_(True), "stopped"), (np.int64(1), "stopped"), (np.str_("deprioritize"), "demoted")],
)
def test_numpy_decisions_mean_what_python_ones_mean(decision: object, state: str) -> None:
    sim = Simulator(SimConfig(n_jobs=5), 0)
    jid = sim.next_decision()
    sim.decide(decision)
    assert (jid in sim.demoted) == (state == "demoted")
    assert sim.job(jid).stopped == (state == "stopped")


@settings(max_examples=300, deadline=None)
@given(
    values=st.lists(
        st.floats(-1e9, 1e9, allow_nan=False) | st.sampled_from([0.0, -0.0, 1.5, 1e-300]),
        min_size=1,
        max_size=300,
    ),
    percents=st.lists(st.integers(0, 100), min_size=1, max_size=4),
)
def test_linear_percentiles_equal_numpys_bit_for_bit(values: list[float], percents) -> None:
    x = np.array(values)
    ours = linear_percentiles(x, tuple(percents))
    theirs = np.percentile(x, percents).tolist()
    assert [v.hex() for v in ours] == [v.hex() for v in theirs]
