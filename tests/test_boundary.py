"""The information boundary: a stopper sees the whitelist and nothing else."""

from __future__ import annotations

import gc

from evalstop_gym import BOUNDARY_FIELDS, HIDDEN_FIELDS, JobView, SimConfig, Simulator
from evalstop_gym.sim.engine import Job


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
    while (view := sim.advance()) is not None:
        assert not hasattr(view, "__dict__")
        assert type(view) is JobView
        for o in _reachable(view):
            assert not isinstance(o, Job | Simulator)
            assert isinstance(o, int | float | tuple | JobView)
        job = sim.jobs[sim.pending_job_id]
        i = job.ckpt_done
        assert view.evals == tuple(job.obs_eval[max(0, i - 3) : i])
        assert view.progress == i / job.n_ckpt
        assert len(view.loss) == len(view.evals) <= 3
        sim.decide(0)
        n += 1
    assert n > 0
