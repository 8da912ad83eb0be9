"""``jobs_in_system`` kept from the jobs whose state changed equals the scan it replaces.

After its first call the engine notes every job that arrives, starts, is
preempted or ends, and the next call moves only those.  Over schedulers,
loads, pools and random decisions (stop, continue, deprioritise), read at every
decision or only now and then: the noted jobs are exactly those the event log
shows changing since the last read, they include every job the two scans
disagree on, and the lists equal a fresh sort of the jobs in the system.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from evalstop_gym import SimConfig, Simulator
from evalstop_gym.sim.job import RUNNING, WAITING
from evalstop_gym.sim.schedulers import SCHEDULERS

#: The event kinds that change a job's state (an eval does not).
CHANGES = {"arrival", "start", "preempt", "complete", "stop"}


def scan(sim: Simulator) -> tuple[list[int], list[int]]:
    """Running and waiting ids, ascending, from every job's state."""
    state = sim._state
    return (
        [j for j in range(sim.n_jobs) if state[j] == RUNNING],
        [j for j in range(sim.n_jobs) if state[j] == WAITING],
    )


def places(listed: tuple[list[int], list[int]]) -> dict[int, int]:
    """Job id -> 0 running, 1 waiting."""
    return {j: i for i, ids in enumerate(listed) for j in ids}


@settings(max_examples=25, deadline=None)
@given(
    scheduler=st.sampled_from(sorted(SCHEDULERS)),
    load=st.floats(0.5, 2.0),
    pools=st.booleans(),
    seed=st.integers(0, 2**16),
    read_every=st.integers(1, 4),
)
def test_the_noted_jobs_are_the_changes_and_the_lists_the_scan(
    scheduler: str, load: float, pools: bool, seed: int, read_every: int
) -> None:
    kwargs = {"pools": "a100=32,h100=32"} if pools else {}
    sim = Simulator(
        SimConfig(n_jobs=40, scheduler=scheduler, load=load, **kwargs), seed, record_events=True
    )
    rng = np.random.default_rng(seed)
    # The pooled engine refuses to deprioritise.
    p = [0.85, 0.1, 0.05] if not pools else [0.9, 0.1, 0.0]
    assert sim.events is not None
    last, mark, reads, decisions = None, 0, 0, 0
    while sim.next_decision() is not None:
        if decisions % read_every == 0:
            noted = None if sim._changed is None else set(sim._changed)
            listed = sim.jobs_in_system()
            assert listed == scan(sim)
            if noted is not None:
                logged = {e.jid for e in sim.events[mark:] if e.kind in CHANGES}
                assert noted == logged
                before, now = places(last), places(listed)
                moved = {j for j in before.keys() | now.keys() if before.get(j) != now.get(j)}
                assert moved <= noted
            last, mark = (listed[0].copy(), listed[1].copy()), len(sim.events)
            reads += 1
            # The lists handed out are the caller's: changing them changes nothing.
            listed[0].append(-1)
            listed[1].clear()
        sim.decide(int(rng.choice(3, p=p)))
        decisions += 1
    assert reads > 0
    assert sim.jobs_in_system() == scan(sim) == ([], [])


def test_an_episode_nobody_lists_notes_nothing() -> None:
    sim = Simulator(SimConfig(n_jobs=30, load=1.5), 3)
    sim.run()
    assert sim._changed is None
