"""Deprioritisation as a simulator decision (issue #16): ``decide(2)``."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalstop_gym import SCHEDULERS, SimConfig, Simulator
from evalstop_gym.sim.engine import DEPRIORITIZE
from evalstop_gym.sim.job import RUNNING, WAITING
from evalstop_gym.sim.metrics import CLUSTER_METRIC_KEYS

SCHEDS = sorted(SCHEDULERS)

configs = st.builds(
    SimConfig,
    num_gpus=st.sampled_from([16, 24, 64]),
    workload=st.sampled_from(["heavy-rlhf", "balanced", "light-rlhf"]),
    scheduler=st.sampled_from(SCHEDS),
    load=st.floats(0.5, 2.0),
    n_jobs=st.integers(1, 50),
    costs=st.sampled_from(["free", "realistic"]),
)


def _check_cluster(sim: Simulator) -> None:
    """GPU conservation, and no waiting job that fits is kept out by a deprioritised one."""
    jobs = [sim.job(j) for j in range(sim.n_jobs)]
    running = sum(j.gpus for j in jobs if j.state == RUNNING)
    assert sim.free >= 0 and sim.free + running == sim.num_gpus
    demoted_held = sum(j.gpus for j in jobs if j.state == RUNNING and j.jid in sim.demoted)
    for j in jobs:
        if j.state == WAITING and j.jid not in sim.demoted:
            assert j.gpus > sim.free + demoted_held, (j.jid, j.gpus, sim.free, demoted_held)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cfg=configs, seed=st.integers(0, 2**31 - 1), p=st.sampled_from([0.05, 0.3, 1.0]))
def test_deprioritized_jobs_never_block_a_waiting_job_that_fits(
    cfg: SimConfig, seed: int, p: float
) -> None:
    sim = Simulator(cfg, seed)
    rng = np.random.default_rng(seed)
    while sim.next_decision() is not None:
        sim.decide(int(rng.choice([0, 1, 2], p=[1 - p, p / 4, 3 * p / 4])))
        _check_cluster(sim)
    c = sim.cluster_metrics()
    assert set(c) == set(CLUSTER_METRIC_KEYS)
    assert c["n_deprioritized"] == len(sim.demoted)
    if sim.demoted:
        assert c["deprioritized_mean_wait_h"] >= -1e-9
        assert c["deprioritized_gpu_hours"] >= -1e-9


@pytest.mark.parametrize("scheduler", SCHEDS)
def test_deprioritized_job_is_preempted_even_by_a_non_preemptive_scheduler(scheduler: str) -> None:
    """Demoting every job at its first checkpoint: queued jobs then preempt them."""
    sim = Simulator(SimConfig(scheduler=scheduler, n_jobs=80, load=1.5), seed=3)
    sim.run(lambda view: DEPRIORITIZE)
    c = sim.cluster_metrics()
    assert c["n_deprioritized"] == 80
    assert c["preemptions"] > 0  # the queue took GPUs from demoted jobs
    assert c["deprioritized_mean_wait_h"] > 0  # and they waited for them back
    assert sim.metrics()["n_stopped"] == 0  # demoted jobs run to the end


def test_deprioritize_by_name_and_repeat_is_continue() -> None:
    a = Simulator(SimConfig(n_jobs=30), seed=1)
    b = Simulator(SimConfig(n_jobs=30), seed=1)
    ma = a.run(lambda v: 2 if v.consecutive_declines >= 2 else 0)
    mb = b.run(lambda v: "deprioritize" if v.consecutive_declines >= 2 else 0)
    np.testing.assert_equal(ma, mb)
    assert a.demoted == b.demoted and a.demoted


def test_no_deprioritization_keeps_scheduler_and_metrics_nan() -> None:
    sim = Simulator(SimConfig(n_jobs=20), seed=0)
    sim.run()
    c = sim.cluster_metrics()
    assert c["n_deprioritized"] == 0 and np.isnan(c["deprioritized_mean_wait_h"])
    assert type(sim.scheduler).__name__ != "_Deprioritizing"


def test_env_action_2_and_the_deprioritize_policy() -> None:
    import gymnasium as gym

    from baselines import Deprioritize, EvalStop, run_episode

    env = gym.make("EvalStop-v0", n_jobs=10)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="0 \\(continue\\) or 1"):
        env.step(2)
    env3 = gym.make("EvalStop-v0", n_jobs=10, deprioritize=True)
    assert env3.action_space.n == 3
    env3.reset(seed=0)
    env3.step(2)
    with pytest.raises(ValueError, match="2 \\(deprioritise\\)"):
        env3.step(3)
    d = run_episode(Deprioritize(2), 0, n_jobs=60, deprioritize=True)
    e = run_episode(EvalStop(2), 0, n_jobs=60, deprioritize=True)
    assert d["n_stopped"] == 0 and d["n_deprioritized"] > 0
    assert e["n_deprioritized"] == 0 and e["n_stopped"] > 0
    # The same detector: the jobs it demotes are the ones EvalStop stops.
    assert d["n_deprioritized"] == e["n_stopped"]


def test_deprioritisation_is_refused_on_pools_for_now() -> None:
    from evalstop_gym.envs import EvalStopEnv
    from evalstop_gym.errors import ConfigError

    with pytest.raises(ConfigError, match="deprioritize"):
        EvalStopEnv(pools="a100=32,h100=32", deprioritize=True)
    sim = Simulator(SimConfig(pools="a100=32,h100=32", n_jobs=10), seed=0)
    sim.next_decision()
    with pytest.raises(ConfigError, match="pools"):
        sim.decide(DEPRIORITIZE)
