"""Each base scheduler's order on a hand-built queue."""

from __future__ import annotations

import math

import pytest
from conftest import hand_jobs

from evalstop_gym import SCHEDULERS, ConfigError, Scheduler, SimConfig, Simulator
from evalstop_gym.sim.job import SchedulingView
from evalstop_gym.sim.schedulers import LossAware, Tiresias


def start_order(scheduler: str, **opts) -> list[int]:
    # One 16-GPU job at a time.  Job 0 (10 h) holds the cluster when jobs 1-3
    # (3 h, 1 h, 2 h) arrive.
    jobs = hand_jobs([0.0, 0.5, 0.6, 0.7], [16] * 4, [10.0, 3.0, 1.0, 2.0])
    cfg = SimConfig(num_gpus=16, scheduler=scheduler, scheduler_options=opts)
    sim = Simulator(cfg, 0, jobs=jobs, record_events=True)
    sim.run()
    assert sim.events is not None
    return [e.jid for e in sim.events if e.kind == "start"]


def test_fifo_runs_in_arrival_order() -> None:
    assert start_order("fifo") == [0, 1, 2, 3]


def test_sjf_est_runs_shortest_estimate_first_without_preemption() -> None:
    assert start_order("sjf-est") == [0, 2, 3, 1]


def test_srtf_est_preempts_for_shorter_remaining_estimate() -> None:
    # 1 preempts 0 (3 < 10); 2 preempts 1 (1 < 3); 3 (2 h) waits for 2 (1 h);
    # then 3 (2.0) before 1 (3 - 0.1 = 2.9) before 0 (10 - 0.5 = 9.5).
    assert start_order("srtf-est") == [0, 1, 2, 3, 1, 0]


def test_tiresias_demotes_by_attained_service() -> None:
    # 0 is demoted at its first checkpoint (16 GPUs x 2.5 h >= 8 GPU-h) and is
    # preempted by 1, which arrived earlier than 2 and 3 in the top queue; each
    # newcomer is demoted at its own first checkpoint in turn.
    order = start_order("tiresias", thresholds=(8.0, 64.0))
    assert order[:4] == [0, 1, 2, 3]
    assert order.count(0) >= 2  # job 0 was preempted and resumed


def test_backfill_starts_a_job_that_fits_behind_a_blocked_one() -> None:
    jobs = hand_jobs([0.0, 0.1, 0.2], [12, 16, 4], [5.0, 1.0, 1.0])
    sim = Simulator(SimConfig(num_gpus=16, scheduler="fifo"), 0, jobs=jobs, record_events=True)
    sim.run()
    starts = [(e.jid, e.time) for e in sim.events if e.kind == "start"]
    assert starts[0] == (0, 0.0)
    assert starts[1] == (2, pytest.approx(0.2))  # the 4-GPU job fills the gap
    assert starts[2] == (1, pytest.approx(5.0))


def test_loss_aware_keeps_gpus_on_the_job_whose_loss_falls_fastest() -> None:
    # Job 0's loss is flat, job 1's falls fast; both need the whole cluster.
    # Job 1 (new, key -inf) preempts job 0 at job 0's first checkpoint (t = 2),
    # then keeps the GPUs: its loss reduction rate is larger.  FIFO never preempts.
    flat, steep = [0.9, 0.9, 0.9, 0.9], [0.5, 0.3, 0.2, 0.15]
    jobs = hand_jobs([0.0, 0.5], [16, 16], [8.0, 8.0], loss=[flat, steep])
    cfg = SimConfig(num_gpus=16, scheduler="loss-aware")
    sim = Simulator(cfg, 0, jobs=jobs, record_events=True)
    sim.run()
    starts = [(e.jid, e.time) for e in sim.events if e.kind == "start"]
    assert starts == [(0, 0.0), (1, pytest.approx(2.0)), (0, pytest.approx(10.0))]
    assert sim.jobs[1].finish == pytest.approx(10.0) and sim.jobs[0].finish == pytest.approx(16.0)
    fifo = Simulator(SimConfig(num_gpus=16, scheduler="fifo"), 0, jobs=jobs, record_events=True)
    fifo.run()
    assert [e.jid for e in fifo.events if e.kind == "start"] == [0, 1]


def _job(loss: list[float], ckpt_done: int, work_done: float, gpus: int = 8) -> SchedulingView:
    """A job as its scheduler sees it after ``ckpt_done`` checkpoints (set as the engine does)."""
    v = SchedulingView(0, gpus, 0.0, 10.0, len(loss))
    v._ckpt_done, v._work_done = ckpt_done, work_done
    v._losses[:] = loss[:ckpt_done]
    return v


def test_loss_aware_favours_largest_recent_loss_reduction() -> None:
    sched = LossAware(window=2)
    new = _job([0.9, 0.8, 0.7, 0.6], 0, 0.0)
    steep = _job([0.8, 0.6, 0.4, 0.3], 3, 7.5)
    flat = _job([0.5, 0.49, 0.49, 0.49], 3, 7.5)
    assert sched.key(new) == -math.inf
    assert sched.key(steep) < sched.key(flat)
    # (0.8 - 0.4) / (8 GPUs x 5 h): checkpoints 1 -> 3, 2.5 h each.
    assert sched.key(steep) == pytest.approx(-0.4 / 40)


def test_tiresias_key_queues() -> None:
    sched = Tiresias(thresholds=(8.0, 64.0))
    assert sched.key(_job([1.0], 0, 0.0))[0] == 0
    assert sched.key(_job([1.0], 1, 1.0))[0] == 1  # 8 GPU-h
    assert sched.key(_job([1.0], 1, 9.0))[0] == 2  # 72 GPU-h


def test_a_sixth_scheduler_plugs_in_without_touching_the_engine() -> None:
    class LongestFirst(Scheduler):
        name = "test-longest-first"

        def key(self, job: SchedulingView) -> float:
            return -job.estimate

    try:
        assert start_order("test-longest-first") == [0, 1, 3, 2]
    finally:
        del SCHEDULERS["test-longest-first"]


def test_bad_scheduler_options_are_named() -> None:
    with pytest.raises(ConfigError, match=r"scheduler_options\.thresholds"):
        SimConfig(scheduler="tiresias", scheduler_options={"thresholds": (64.0, 8.0)})
    with pytest.raises(ConfigError, match="scheduler_options"):
        SimConfig(scheduler="fifo", scheduler_options={"window": 3})
