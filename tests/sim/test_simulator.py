"""Invariants of the discrete-event engine."""

from __future__ import annotations

import pickle
from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalstop_gym import SCHEDULERS, KDeclineRule, SimConfig, Simulator, never_stop

SCHEDS = sorted(SCHEDULERS)

configs = st.builds(
    SimConfig,
    num_gpus=st.sampled_from([16, 24, 64]),
    workload=st.sampled_from(["heavy-rlhf", "balanced", "light-rlhf"]),
    scheduler=st.sampled_from(SCHEDS),
    eval_noise=st.sampled_from([0.0, 0.02, 0.12]),
    load=st.floats(0.3, 2.0),
    n_jobs=st.integers(1, 60),
)
stoppers = st.sampled_from([None, KDeclineRule(1), KDeclineRule(2), KDeclineRule(3)])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cfg=configs, seed=st.integers(0, 2**31 - 1), stopper=stoppers)
def test_gpu_conservation_and_single_ending(cfg: SimConfig, seed: int, stopper) -> None:
    sim = Simulator(cfg, seed, record_events=True)
    sim.run(stopper)
    assert sim.events is not None
    busy: dict[int, int] = {}
    endings: Counter[int] = Counter()
    for ev in sim.events:
        assert 0 <= ev.free_gpus <= cfg.num_gpus
        gpus = sim.jobs[ev.jid].gpus
        if ev.kind == "start":
            assert ev.jid not in busy
            busy[ev.jid] = gpus
        elif ev.kind in ("preempt", "complete", "stop"):
            assert busy.pop(ev.jid) == gpus
        if ev.kind in ("complete", "stop"):
            endings[ev.jid] += 1
        # Free GPUs recorded by the engine equal the cluster minus what jobs hold.
        assert ev.free_gpus == cfg.num_gpus - sum(busy.values())
    assert not busy
    assert sim.free == cfg.num_gpus
    assert endings == Counter(range(len(sim.jobs)))
    assert sorted(sim.finished_order) == list(range(len(sim.jobs)))
    assert sim.done and sim.advance() is None


@settings(max_examples=25, deadline=None)
@given(cfg=configs, seed=st.integers(0, 2**31 - 1), stopper=stoppers)
def test_jct_at_least_run_time(cfg: SimConfig, seed: int, stopper) -> None:
    sim = Simulator(cfg, seed)
    sim.run(stopper)
    for j in sim.jobs:
        run_time = j.duration * j.ckpt_done / j.n_ckpt
        assert j.finish - j.arrival >= run_time - 1e-9
        assert j.first_start >= j.arrival
        assert j.gpu_hours == pytest.approx(j.gpus * run_time, rel=1e-9, abs=1e-9)
        assert (j.ckpt_done < j.n_ckpt) == j.stopped


@pytest.mark.parametrize("scheduler", SCHEDS)
def test_same_seed_same_events_and_metrics(scheduler: str) -> None:
    cfg = SimConfig(scheduler=scheduler, n_jobs=80)
    a = Simulator(cfg, 3, record_events=True)
    b = Simulator(cfg, 3, record_events=True)
    ma, mb = a.run(KDeclineRule(2)), b.run(KDeclineRule(2))
    assert a.events == b.events
    assert ma == pytest.approx(mb, nan_ok=True)
    c = Simulator(cfg, 4, record_events=True)
    mc = c.run(KDeclineRule(2))
    assert c.events != a.events
    assert mc["mean_jct_h"] != ma["mean_jct_h"]


@pytest.mark.parametrize("scheduler", SCHEDS)
def test_never_stop_reproduces_no_stop_baseline(scheduler: str) -> None:
    cfg = SimConfig(scheduler=scheduler, n_jobs=60)
    base = Simulator(cfg, 11, record_events=True)
    m0 = base.run(None)
    for stopper in (never_stop, lambda v: 0, lambda v: False):
        sim = Simulator(cfg, 11, record_events=True)
        assert sim.run(stopper) == pytest.approx(m0, nan_ok=True)
        assert sim.events == base.events
    assert m0["n_stopped"] == 0 and m0["recall"] == 0.0


def test_stepping_from_outside_equals_tight_loop() -> None:
    cfg = SimConfig(n_jobs=50)
    rule = KDeclineRule(2)
    loop = Simulator(cfg, 5)
    m_loop = loop.run(rule)
    ext = Simulator(cfg, 5)
    decisions = 0
    while (view := ext.advance()) is not None:
        # A pickle round-trip in the middle changes nothing.
        if decisions == 37:
            ext = pickle.loads(pickle.dumps(ext))
        ext.decide(rule(view))
        decisions += 1
    assert ext.metrics() == pytest.approx(m_loop, nan_ok=True)
    assert decisions == m_loop["n_decisions"]


def test_decide_and_advance_out_of_order_raise() -> None:
    sim = Simulator(SimConfig(n_jobs=5), 0)
    with pytest.raises(RuntimeError, match="no decision is pending"):
        sim.decide(0)
    assert sim.advance() is not None
    with pytest.raises(RuntimeError, match="decision is pending"):
        sim.advance()


def test_stop_frees_gpus_and_delivers_best_observed_checkpoint() -> None:
    from conftest import hand_jobs

    evals = [[0.1, 0.5, 0.4, 0.3, 0.2, 0.1]]
    jobs = hand_jobs([0.0, 0.0], [16, 16], [6.0, 6.0], evals=evals * 2, hacking=[True, False])
    cfg = SimConfig(num_gpus=16, scheduler="fifo")
    sim = Simulator(cfg, 0, jobs=jobs, record_events=True)
    m = sim.run(KDeclineRule(2))
    j0 = sim.jobs[0]
    # Declines at checkpoints 3 and 4 -> stop at checkpoint 4 (t = 4 h).
    assert j0.stopped and j0.ckpt_done == 4 and j0.finish == pytest.approx(4.0)
    assert j0.best_idx == 1
    # Job 1 starts the instant job 0 is stopped.
    start1 = next(e for e in sim.events if e.kind == "start" and e.jid == 1)
    assert start1.time == pytest.approx(4.0)
    assert m["mean_delivered_quality"] == pytest.approx(0.5)


@pytest.mark.parametrize("n_jobs", [13, 40])
@pytest.mark.parametrize("scheduler", ["srtf-est", "fifo"])
def test_events_per_run_scale_with_jobs(n_jobs: int, scheduler: str) -> None:
    config = SimConfig(n_jobs=n_jobs, scheduler=scheduler)
    m = Simulator(config, 0).run()
    # exactly one arrival and K checkpoints per job when nothing is stopped
    k = config.resolved_calibration().evals_per_job
    assert m["n_events"] == n_jobs * (1 + k)
    assert np.isfinite(m["mean_jct_h"])
