"""Heterogeneous GPU pools: conservation per pool, gangs inside one pool, speeds, equivalence."""

from __future__ import annotations

import pickle

import gymnasium as gym
import pytest
from conftest import hand_jobs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalstop_gym import SCHEDULERS, KDeclineRule, SimConfig, Simulator, make_simulator
from evalstop_gym.errors import ConfigError
from evalstop_gym.sim.pooled import PooledSimulator
from evalstop_gym.sim.pools import GPU_SPEEDS, PLACEMENTS
from evalstop_gym.sim.schedulers import Fifo
from evalstop_gym.sim.traces import SAMPLE_TRACE

SCHEDS = ("fifo", "sjf-est", "srtf-est", "loss-aware", "tiresias")


def _bits(metrics: dict[str, float]) -> dict[str, str]:
    """Metrics as exact reprs (NaN equals NaN)."""
    return {k: repr(v) for k, v in metrics.items()}


def _trajectory(sim: Simulator) -> list[tuple[float, str, int, int]]:
    assert sim.events is not None
    return [(e.time, e.kind, e.jid, e.free_gpus) for e in sim.events]


@pytest.mark.parametrize("scheduler", SCHEDS)
@pytest.mark.parametrize("calibration", ["paper", "realistic"])
def test_one_reference_pool_is_bit_identical(scheduler: str, calibration: str) -> None:
    """pools={"gpu": 64} (speed 1) runs the pooled engine and gives the default's exact bits."""
    for seed, stopper in ((0, None), (1, KDeclineRule(2)), (7, KDeclineRule(1))):
        kw = {"scheduler": scheduler, "calibration": calibration, "n_jobs": 120}
        plain = Simulator(SimConfig(**kw), seed, record_events=True)
        pooled = Simulator(SimConfig(**kw, pools={"gpu": 64}), seed, record_events=True)
        assert type(plain) is Simulator and type(pooled) is PooledSimulator
        assert _bits(plain.run(stopper)) == _bits(pooled.run(stopper))
        assert _trajectory(plain) == _trajectory(pooled)
        assert [plain.job(j) for j in range(plain.n_jobs)] == list(pooled.jobs)


def test_make_simulator_builds_what_the_simulator_class_builds() -> None:
    """make_simulator and Simulator(config) choose the same class, and the same episode."""
    for pools in (None, {"gpu": 64}):
        cfg = SimConfig(n_jobs=30, pools=pools)
        made, called = make_simulator(cfg, 5), Simulator(cfg, 5)
        assert type(made) is type(called) is (Simulator if pools is None else PooledSimulator)
        assert _bits(made.run(KDeclineRule(2))) == _bits(called.run(KDeclineRule(2)))


def test_one_reference_pool_replays_the_trace_identically() -> None:
    """The Philly replay on one reference pool gives the homogeneous bits too."""
    kw = {"trace": SAMPLE_TRACE, "n_jobs": 80, "scheduler": "srtf-est", "num_gpus": 64}
    a = Simulator(SimConfig(**kw), 3).run(KDeclineRule(2))
    b = Simulator(SimConfig(**{**kw, "pools": {"gpu": 64}}), 3).run(KDeclineRule(2))
    assert _bits(a) == _bits(b)


pool_sets = st.dictionaries(
    st.sampled_from(sorted(GPU_SPEEDS)), st.integers(16, 40), min_size=1, max_size=4
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pools=pool_sets,
    scheduler=st.sampled_from(SCHEDS),
    placement=st.sampled_from(PLACEMENTS),
    seed=st.integers(0, 2**31 - 1),
    n_jobs=st.integers(1, 50),
    load=st.floats(0.3, 2.0),
    k=st.sampled_from([None, 1, 2]),
)
def test_conservation_per_pool_and_gangs_in_one_pool(
    pools: dict[str, int], scheduler: str, placement: str, seed: int, n_jobs: int, load, k
) -> None:
    """At every event, busy + free = size per pool, and a gang comes out of one pool."""
    cfg = SimConfig(pools=pools, scheduler=scheduler, placement=placement, n_jobs=n_jobs, load=load)
    sim = Simulator(cfg, seed, record_events=True)
    sim.run(None if k is None else KDeclineRule(k))
    assert isinstance(sim, PooledSimulator) and sim.events is not None
    sizes = [p.size for p in sim.pools]
    held: dict[int, tuple[int, int]] = {}  # jid -> (pool, GPUs) while it runs
    prev = tuple(sizes)
    for ev in sim.events:
        gpus = sim.jobs[ev.jid].gpus
        if ev.kind == "start":
            assert ev.jid not in held and 0 <= ev.pool < len(sizes)
            assert sizes[ev.pool] >= gpus
            held[ev.jid] = (ev.pool, gpus)
            # The whole gang came out of that one pool, none out of any other.
            diff = [a - b for a, b in zip(prev, ev.pool_free)]
            assert diff == [gpus if p == ev.pool else 0 for p in range(len(sizes))]
        elif ev.kind in ("preempt", "complete", "stop"):
            assert held.pop(ev.jid)[1] == gpus
        for p, size in enumerate(sizes):
            busy = sum(g for q, g in held.values() if q == p)
            assert busy + ev.pool_free[p] == size  # busy + free = pool size, at every event
        assert ev.free_gpus == sum(ev.pool_free)
        prev = ev.pool_free
    assert not held and sim.pool_free == tuple(sizes)
    assert sum(sim.pool_gpu_hours) == pytest.approx(sim.metrics()["gpu_hours"], rel=1e-9)
    for j in sim.jobs:
        assert j.finish >= j.arrival
        if not j.stopped:
            # Exact at the last checkpoint (the engine's own T * K / K), wherever it ran.
            assert j.work_done == j.duration * j.n_ckpt / j.n_ckpt


@pytest.mark.parametrize("gpu_type", sorted(GPU_SPEEDS))
@pytest.mark.parametrize("job_type", [0, 1, 2])
def test_durations_and_eval_cadence_scale_by_the_speed_table(gpu_type: str, job_type: int) -> None:
    """Alone on a pool of speed s, each checkpoint interval takes (T / K) / s hours."""
    k, duration = 5, 7.3
    jobs = hand_jobs([0.5], [8], [duration], job_type=[job_type], k=k)
    cfg = SimConfig(pools={gpu_type: 16}, scheduler="fifo")
    sim = Simulator(cfg, 0, jobs=jobs, record_events=True)
    sim.run()
    speed = GPU_SPEEDS[gpu_type][job_type]
    evals = [e.time for e in sim.events if e.kind == "eval"]
    assert evals == pytest.approx(
        [0.5 + duration * i / k / speed for i in range(1, k + 1)], rel=1e-12
    )
    job = sim.job(0)
    assert job.finish - job.arrival == pytest.approx(duration / speed, rel=1e-12)
    assert job.gpu_hours == pytest.approx(8 * duration / speed, rel=1e-12)


def test_preempted_job_restarts_on_another_pool_with_exact_work() -> None:
    """A (RLHF) runs on the V100 pool, is preempted at t=1 and resumes on the H100 pool."""
    # A: long estimate; C: longer estimate, on the H100 pool; B at t=1: short, takes the V100s.
    jobs = hand_jobs([0.0, 0.0, 1.0], [16, 16, 16], [8.0, 4.0, 1.0], estimate=[50.0, 60.0, 1.0])
    cfg = SimConfig(pools={"v100": 16, "h100": 16}, scheduler="srtf-est", placement="first-fit")
    sim = Simulator(cfg, 0, jobs=jobs, record_events=True)
    sim.run()
    v100, h100 = GPU_SPEEDS["v100"][2], GPU_SPEEDS["h100"][2]
    starts = [(e.time, e.pool) for e in sim.events if e.kind == "start" and e.jid == 0]
    assert starts == [(0.0, 0), (1.0, 1)]
    a = sim.job(0)
    assert a.preemptions == 1 and a.work_done == 8.0
    banked = 1.0 * v100  # work done on the V100s before the preemption
    assert a.finish == pytest.approx(1.0 + (8.0 - banked) / h100, rel=1e-12)
    assert a.gpu_hours == pytest.approx(16 * a.finish, rel=1e-12)  # it never waited


def _first_start_pool(cfg: SimConfig) -> int:
    jobs = hand_jobs([0.0], [16], [2.0], job_type=[2])
    sim = Simulator(cfg, 0, jobs=jobs, record_events=True)
    sim.run()
    return next(e.pool for e in sim.events if e.kind == "start")


def test_placements_first_fit_and_fastest() -> None:
    """First-fit takes the configured order; fastest the quickest pool for the job type."""
    pools = {"a100": 16, "h100": 16}
    assert _first_start_pool(SimConfig(pools=pools, placement="first-fit")) == 0
    assert _first_start_pool(SimConfig(pools=pools, placement="fastest")) == 1
    slow_first = {"v100": 16, "a100": 16, "h100": 16}
    assert _first_start_pool(SimConfig(pools=slow_first, placement="fastest")) == 2


def test_a_new_scheduler_chooses_pools_without_engine_change() -> None:
    """A sixth scheduler overriding pool_order places jobs with no engine change."""

    class LastPoolFifo(Fifo):
        name = "test-last-pool-fifo"

        def pool_order(self, job, pools):
            return [len(pools) - 1]  # the others are tried afterwards, in configured order

    try:
        cfg = SimConfig(pools={"a100": 16, "v100": 16}, scheduler="test-last-pool-fifo")
        assert _first_start_pool(cfg) == 1
    finally:
        SCHEDULERS.pop("test-last-pool-fifo")


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"pools": {"tpu": 8}}, "pools['tpu']"),
        ({"pools": {"a100": 0}}, "pools['a100']"),
        ({"pools": {}}, "pools"),
        ({"pools": [("a100", 8)]}, "pools"),
        ({"pools": "a100:32"}, "pools"),
        ({"pools": {"a100": 8}}, "pools"),  # heavy-rlhf draws 16-GPU RLHF jobs
        ({"pools": {"a100": 32, "h100": 32}, "num_gpus": 48}, "num_gpus"),
        ({"placement": "random"}, "placement"),
    ],
)
def test_bad_pools_name_the_field(kwargs: dict, field: str) -> None:
    """Bad pools, placements and totals fail at construction, naming the field."""
    with pytest.raises(ConfigError) as e:
        SimConfig(**kwargs)
    assert e.value.field == field


def test_num_gpus_becomes_the_pools_total() -> None:
    """With pools, num_gpus is their total; the text form gives the same config."""
    assert SimConfig(pools={"a100": 24, "h100": 8}).num_gpus == 32
    assert SimConfig(pools="a100=24, h100=8").pools == {"a100": 24, "h100": 8}
    assert SimConfig(pools={"a100": 24, "h100": 8}, num_gpus=32).num_gpus == 32


def test_trace_replay_on_pools_and_a_too_small_pool() -> None:
    """Trace jobs run on any pool with room; a job larger than every pool is refused."""
    homogeneous = Simulator(SimConfig(trace=SAMPLE_TRACE), 0)
    cfg = SimConfig(trace=SAMPLE_TRACE, pools={"a100": 32, "h100": 32}, placement="fastest")
    m = Simulator(cfg, 0).run(KDeclineRule(2))
    assert m["n_jobs"] == homogeneous.n_jobs
    big = max(j.gpus for j in homogeneous.jobs)
    assert big > 1
    with pytest.raises(ConfigError, match="gang never spans pools"):
        Simulator(SimConfig(trace=SAMPLE_TRACE, pools={"a100": big - 1, "h100": big - 1}), 0)


def test_env_takes_pools_and_pickles_mid_episode() -> None:
    """gym.make passes pools and placement; the pooled env passes check_env and pickles."""
    from gymnasium.utils.env_checker import check_env

    env = gym.make("EvalStop-v0", n_jobs=20, pools={"a100": 32, "h100": 32}, placement="fastest")
    check_env(env.unwrapped, skip_render_check=True)
    env.reset(seed=0)
    for _ in range(5):
        env.step(0)
    clone = pickle.loads(pickle.dumps(env.unwrapped))
    assert isinstance(clone.sim, PooledSimulator)
    a = [env.step(1)[1] for _ in range(3)]
    b = [clone.step(1)[1] for _ in range(3)]
    assert a == b
