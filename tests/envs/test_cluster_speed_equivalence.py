"""The engine's fast paths for the cluster env return what their first forms returned.

``simultaneous_checkpoints`` skips its heap scan when the heap's first event is
later than now, and ``jobs_in_system`` keeps its two lists from the jobs whose
state changed since its last call; the references below are the scans as first
written.  They are compared at every
decision of whole episodes (preemptive and not, pools, deprioritised jobs, a
hand-made episode with checkpoints at one instant).  The observations
themselves are checked against the frozen rebuild-everything implementation by
``test_cluster_observations.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import hand_jobs

from evalstop_gym import SimConfig, Simulator
from evalstop_gym.sim.job import RUNNING, WAITING


def reference_simultaneous(sim: Simulator) -> list[int]:
    """The pending job and every live checkpoint at this instant, by a scan of the heap."""
    if sim._pending < 0:
        return []
    now, epochs, ckpt, last = sim.now, sim._epoch, sim._ckpt, sim.n_ckpt - 1
    same = sorted(
        (c, jid)
        for t, c, jid, epoch in sim._heap
        if t == now and epoch == epochs[jid] and ckpt[jid] < last
    )
    return [sim._pending, *(jid for _, jid in same)]


def reference_in_system(sim: Simulator) -> tuple[list[int], list[int]]:
    """Running and waiting ids, ascending, by one loop over the sorted ids."""
    running: list[int] = []
    waiting: list[int] = []
    for jid in sorted(sim._in_system):
        if sim._state[jid] == RUNNING:
            running.append(jid)
        elif sim._state[jid] == WAITING:
            waiting.append(jid)
    return running, waiting


def _check_episode(sim: Simulator, rng: np.random.Generator, demote: bool) -> int:
    p = [0.8, 0.1, 0.1] if demote else [0.9, 0.1, 0.0]
    decisions = 0
    while sim.next_decision() is not None:
        assert sim.simultaneous_checkpoints() == reference_simultaneous(sim)
        assert sim.jobs_in_system() == reference_in_system(sim)
        sim.decide(int(rng.choice(3, p=p)))
        decisions += 1
    assert sim.simultaneous_checkpoints() == reference_simultaneous(sim) == []
    return decisions


@pytest.mark.parametrize(
    "kwargs",
    [
        {"n_jobs": 60},
        {"n_jobs": 60, "scheduler": "fifo", "load": 1.6},
        {"n_jobs": 60, "scheduler": "tiresias", "costs": "realistic"},
        {"n_jobs": 40, "pools": "a100=32,h100=32"},
    ],
    ids=["srtf", "fifo-busy", "tiresias-costs", "pools"],
)
def test_fast_paths_match_the_scans(kwargs):
    """Every decision of two episodes per configuration, with random decisions."""
    rng = np.random.default_rng(7)
    for seed in range(2):
        sim = Simulator(SimConfig(**kwargs), seed)
        assert _check_episode(sim, rng, demote="pools" not in kwargs) > 0


def test_fast_paths_match_the_scans_when_checkpoints_coincide():
    """Four identical jobs on 16 GPUs: pairs of checkpoints fall at one instant."""
    k = 10
    evals = [[0.1, 0.2, 0.3, 0.25, 0.2, 0.15, 0.1, 0.1, 0.1, 0.1]] * 2 + [[0.5] * k] * 2
    jobs = hand_jobs([0.0] * 4, [8] * 4, [5.0] * 4, evals=evals, k=k)
    sim = Simulator(SimConfig(num_gpus=16, scheduler="fifo"), 0, jobs=jobs)
    sizes = []
    rng = np.random.default_rng(1)
    while sim.next_decision() is not None:
        epoch = sim.simultaneous_checkpoints()
        assert epoch == reference_simultaneous(sim)
        sizes.append(len(epoch))
        sim.decide(int(rng.integers(2)))
    assert max(sizes) == 2
