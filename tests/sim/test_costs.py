"""Costs of a real cluster (issue #16): restore on preemption and evaluation time."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalstop_gym import SCHEDULERS, KDeclineRule, SimConfig, Simulator
from evalstop_gym.errors import ConfigError
from evalstop_gym.sim.config import COST_PRESETS

SCHEDS = sorted(SCHEDULERS)


@pytest.mark.parametrize("scheduler", SCHEDS)
def test_costs_at_zero_reproduce_the_default_exactly(scheduler: str) -> None:
    base = Simulator(SimConfig(scheduler=scheduler), seed=5).run(KDeclineRule(2))
    for kw in ({"costs": "free"}, {"restore_h": 0.0, "eval_cost_h": 0.0}):
        m = Simulator(SimConfig(scheduler=scheduler, **kw), seed=5).run(KDeclineRule(2))
        assert {k: float(v).hex() for k, v in m.items()} == {
            k: float(v).hex() for k, v in base.items()
        }


def _training_gpu_hours(sim: Simulator) -> float:
    """GPU-hours of training proper: GPUs x work done, per job."""
    return sum(j.gpus * j.work_done for j in sim.jobs)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    scheduler=st.sampled_from(["srtf-est", "loss-aware", "tiresias"]),
    restore=st.sampled_from([0.01, 0.1, 1.0]),
    seed=st.integers(0, 2**20),
    k=st.sampled_from([None, 2]),
)
def test_restore_time_is_paid_in_gpu_hours(scheduler: str, restore: float, seed: int, k) -> None:
    """GPU-hours = training + restores, exactly the restores the metric reports."""
    sim = Simulator(SimConfig(scheduler=scheduler, n_jobs=60, load=1.3, restore_h=restore), seed)
    m = sim.run(None if k is None else KDeclineRule(k))
    c = sim.cluster_metrics()
    assert m["gpu_hours"] == pytest.approx(_training_gpu_hours(sim) + c["restore_gpu_hours"])
    assert c["restore_gpu_hours"] <= c["preemptions"] * restore * sim.num_gpus + 1e-9


@pytest.mark.parametrize("scheduler", ["fifo", "sjf-est"])
def test_eval_time_is_paid_per_checkpoint(scheduler: str) -> None:
    """Non-preemptive: no eval is interrupted, so GPU-hours = training + every eval."""
    sim = Simulator(SimConfig(scheduler=scheduler, n_jobs=60, eval_cost_h=0.2), seed=2)
    m = sim.run(KDeclineRule(2))
    c = sim.cluster_metrics()
    expected = sum(j.gpus * j.ckpt_done for j in sim.jobs) * 0.2
    assert c["eval_gpu_hours"] == pytest.approx(expected)
    assert m["gpu_hours"] == pytest.approx(_training_gpu_hours(sim) + expected)


def test_costs_slow_the_cluster_down() -> None:
    free = Simulator(SimConfig(scheduler="srtf-est"), seed=0)
    real = Simulator(SimConfig(scheduler="srtf-est", costs="realistic"), seed=0)
    mf, mr = free.run(KDeclineRule(2)), real.run(KDeclineRule(2))
    assert mr["gpu_hours"] > mf["gpu_hours"] and mr["mean_jct_h"] > mf["mean_jct_h"]
    assert real.cluster_metrics()["restore_gpu_hours"] > 0


def test_realistic_preset_and_overrides() -> None:
    assert SimConfig(costs="realistic").resolved_costs() == COST_PRESETS["realistic"]
    assert SimConfig(costs="realistic", eval_cost_h=0).resolved_costs()[1] == 0.0
    assert SimConfig().resolved_costs() == (0.0, 0.0)


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"costs": "cheap"}, "costs"),
        ({"costs": None}, "costs"),
        ({"restore_h": -0.1}, "restore_h"),
        ({"restore_h": float("nan")}, "restore_h"),
        ({"eval_cost_h": 1e9}, "eval_cost_h"),
        ({"eval_cost_h": "1"}, "eval_cost_h"),
    ],
)
def test_bad_costs_are_refused(kw: dict, field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        SimConfig(**kw)


def test_eval_cost_counts_interrupted_evals_as_lost() -> None:
    """Preemptive + eval cost: GPU-hours are at least training + completed evals."""
    sim = Simulator(SimConfig(scheduler="loss-aware", n_jobs=60, eval_cost_h=0.2), seed=4)
    m = sim.run()
    c = sim.cluster_metrics()
    assert m["gpu_hours"] >= _training_gpu_hours(sim) + c["eval_gpu_hours"] - 1e-6
    assert np.isfinite(m["mean_jct_h"])
