"""The information boundary: a stopper sees the whitelist and nothing else."""

from __future__ import annotations

import gc

import numpy as np
import pytest
from conftest import hand_jobs

from evalstop_gym import BOUNDARY_FIELDS, HIDDEN_FIELDS, SCHEDULERS, JobView, SimConfig, Simulator
from evalstop_gym.sim.job import JobRecord, SchedulingView

BUILTIN_SCHEDULERS = ("fifo", "sjf-est", "srtf-est", "loss-aware", "tiresias")


def test_view_holds_exactly_the_whitelist() -> None:
    assert JobView._fields == BOUNDARY_FIELDS
    assert not set(HIDDEN_FIELDS) & set(BOUNDARY_FIELDS)


def _reachable(obj: object, depth: int = 4) -> list[object]:
    seen, frontier = [obj], [obj]
    for _ in range(depth):
        nxt = []
        for o in frontier:
            for r in gc.get_referents(o):
                if isinstance(r, type):
                    continue
                seen.append(r)
                nxt.append(r)
        frontier = nxt
    return seen


def test_views_reach_no_simulator_object_and_match_observations() -> None:
    sim = Simulator(SimConfig(n_jobs=20, eval_window=3), 1)
    n = 0
    ev = sim.curves.obs_eval
    while (view := sim.advance()) is not None:
        assert not hasattr(view, "__dict__")
        assert type(view) is JobView
        for o in _reachable(view):
            assert not isinstance(o, JobRecord | Simulator)
            assert isinstance(o, int | float | tuple | JobView)
        jid = sim.pending_job_id
        i = sim.checkpoints_done(jid)
        assert view.evals == tuple(ev[jid, max(0, i - 3) : i].tolist())
        assert view.progress == i / ev.shape[1]
        assert len(view.loss) == len(view.evals) <= 3
        sim.decide(0)
        n += 1
    assert n > 0


@pytest.mark.parametrize("name", sorted(BUILTIN_SCHEDULERS))
def test_schedulers_get_a_read_only_view_that_reaches_no_hidden_field(name: str) -> None:
    """Every key() call of every built-in scheduler sees only what a platform knows."""
    base = SCHEDULERS[name]
    seen: list[object] = []

    class Spy(base):  # type: ignore[misc, valid-type]
        name = f"test-spy-{base.name}"

        def key(self, job):  # type: ignore[no-untyped-def]
            # Snapshot what is reachable now: the engine updates the view later.
            reach = _reachable(job)
            numbers = {o for o in reach if type(o) in (int, float, bool)}
            seen.append((job, reach, numbers, job.ckpt_done, job.observed_loss))
            return super().key(job)

    # Distinctive hidden numbers: true durations, future losses, true evals.
    durations = [7.123, 5.321, 3.777, 6.5432]
    losses = [[0.91, 0.81, 0.71, 0.61], [0.92, 0.82, 0.72, 0.62]] * 2
    jobs = hand_jobs(
        [0.0, 0.2, 0.4, 0.6],
        [16, 8, 8, 16],
        durations,
        estimate=[9.0, 1.0, 2.0, 4.0],
        hacking=[True, False, True, False],
        loss=losses,
        true_eval=[[0.111, 0.222, 0.333, 0.444]] * 4,
        peak=[0.37, np.inf, 0.41, np.inf],
    )
    try:
        Simulator(SimConfig(num_gpus=16, scheduler=Spy.name), 0, jobs=jobs).run()
    finally:
        del SCHEDULERS[Spy.name]
    assert seen
    hidden = {*durations, 0.37, 0.41, 0.111, 0.222, 0.333, 0.444}
    for view, reach, numbers, done, observed_loss in seen:
        assert type(view) is SchedulingView
        assert not any(isinstance(o, JobRecord | Simulator | np.ndarray | dict) for o in reach)
        assert all(isinstance(o, int | float | list | SchedulingView) for o in reach)
        assert not hidden & numbers, (view, hidden & numbers)
        # Only the losses reported so far, never a future one.
        assert observed_loss == tuple(losses[view.jid][:done])
        with pytest.raises(AttributeError):
            view.estimate = 0.0  # type: ignore[misc]
