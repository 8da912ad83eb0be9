"""The engine's paths for big clusters give what the plain code gives.

The losses, evals and declines are kept as flat tuples (job j's checkpoint i at
j * K + i); every view built from them must equal the one built from the 2-D
arrays of the episode.  ``Simulator.run`` pauses the generational collector for
its loop and must restore it in every case.
"""

from __future__ import annotations

import gc

import pytest

from evalstop_gym import SAMPLE_TRACE, KDeclineRule
from evalstop_gym.sim.boundary import JobView
from evalstop_gym.sim.config import SimConfig
from evalstop_gym.sim.engine import Simulator


def _reference_view(sim: Simulator, jid: int) -> JobView:
    """The view of ``jid`` read from the episode's 2-D arrays."""
    i = sim.checkpoints_done(jid)
    lo = max(i - sim.window, 0)
    return JobView(
        int(sim.batch.job_type[jid]),
        tuple(sim.curves.obs_eval[jid, lo:i].tolist()),
        int(sim.declines[jid, i - 1]),
        i / sim.n_ckpt,
        tuple(sim.curves.loss[jid, lo:i].tolist()),
    )


@pytest.mark.parametrize(
    "cfg",
    [
        SimConfig(n_jobs=60),
        SimConfig(n_jobs=60, eval_window=2, scheduler="loss-aware"),
        SimConfig(n_jobs=60, eval_window=1, calibration="hard"),
        SimConfig(trace=SAMPLE_TRACE, n_jobs=40, num_gpus=64, eval_window=3, scheduler="tiresias"),
        SimConfig(n_jobs=40, pools={"a100": 32, "h100": 32}),
    ],
    ids=["default", "loss-aware-w2", "hard-w1", "philly-tiresias-w3", "pooled"],
)
def test_views_and_observed_losses_equal_the_2d_arrays(cfg: SimConfig) -> None:
    sim = Simulator(cfg, 3)
    rule = KDeclineRule(2)
    n = 0
    while (jid := sim.next_decision()) is not None:
        view = sim.pending_view
        assert view == _reference_view(sim, jid)
        assert [type(x) for x in view.evals] == [float] * len(view.evals)
        assert type(view.consecutive_declines) is int
        i = sim.checkpoints_done(jid)
        sched_view = sim._views[jid]
        assert sched_view.observed_loss == tuple(sim.curves.loss[jid, :i].tolist())
        sim.decide(rule(view))
        n += 1
    assert n > 0


def test_run_pauses_the_collector_and_restores_it() -> None:
    seen: list[bool] = []

    def stopper(view: JobView) -> bool:
        seen.append(gc.isenabled())
        return False

    assert gc.isenabled()
    Simulator(SimConfig(n_jobs=20), 0).run(stopper)
    assert seen and not any(seen)  # paused inside the loop
    assert gc.isenabled()  # restored after it
    gc.disable()
    try:
        Simulator(SimConfig(n_jobs=20), 0).run(stopper)
        assert not gc.isenabled()  # a caller's disabled collector stays disabled
    finally:
        gc.enable()


def test_run_restores_the_collector_when_the_stopper_raises() -> None:
    def stopper(view: JobView) -> bool:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        Simulator(SimConfig(n_jobs=20), 0).run(stopper)
    assert gc.isenabled()


def test_run_with_the_collector_paused_gives_the_same_episode() -> None:
    """The same metrics and events as the loop of advance/decide, which leaves gc alone."""
    cfg = SimConfig(n_jobs=80, scheduler="srtf-est", load=1.2)
    a = Simulator(cfg, 5, record_events=True)
    ma = a.run(KDeclineRule(2))
    b = Simulator(cfg, 5, record_events=True)
    rule = KDeclineRule(2)
    while (view := b.advance()) is not None:
        b.decide(rule(view))
    assert ma == b.metrics() and a.events == b.events
