"""The speed paths of issue 15 give exactly what the slow paths they skip give."""

from __future__ import annotations

import heapq
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sim_episodes import play

from evalstop_gym import SAMPLE_TRACE, KDeclineRule
from evalstop_gym.sim._fastmath import linear_percentiles
from evalstop_gym.sim.config import SimConfig
from evalstop_gym.sim.engine import Simulator
from evalstop_gym.sim.job import RUNNING, WAITING
from evalstop_gym.sim.queues import negate_key
from evalstop_gym.sim.workloads import step_time_fractions

SCHEDULERS = ("fifo", "sjf-est", "srtf-est", "loss-aware", "tiresias")


class _AlwaysSchedulingPass(Simulator):
    """The engine with every arrival going through enqueue + a full scheduling pass."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._lean_arrivals = False


def _episode(cls: type[Simulator], cfg: SimConfig, seed: int, stop_seed: int):
    sim = cls(cfg, seed, record_events=True)
    return play(sim, stop_seed, 3 if cfg.pools is None else 2)


@settings(max_examples=12, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    stop_seed=st.integers(0, 3),
    scheduler=st.sampled_from(SCHEDULERS),
    calibration=st.sampled_from(("paper", "hard")),
    load=st.sampled_from((0.3, 0.9, 2.0)),
)
def test_direct_start_of_arrivals_equals_a_scheduling_pass(
    seed: int, stop_seed: int, scheduler: str, calibration: str, load: float
) -> None:
    cfg = SimConfig(scheduler=scheduler, calibration=calibration, n_jobs=40, load=load)
    fast = _episode(Simulator, cfg, seed, stop_seed)
    slow = _episode(_AlwaysSchedulingPass, cfg, seed, stop_seed)
    assert repr(fast) == repr(slow)  # repr: NaN metrics compare equal, floats to the bit


@pytest.mark.parametrize("seed", [0, 7, None])
def test_jitter_stream_is_child_3_of_the_seed(seed: int | None) -> None:
    cfg = SimConfig(calibration="hard", n_jobs=30)
    sim = Simulator(cfg, 123 if seed is None else seed)
    rng = np.random.default_rng(np.random.SeedSequence(123 if seed is None else seed).spawn(4)[3])
    frac = step_time_fractions(30, sim.n_ckpt, cfg.resolved_calibration().step_time_jitter, rng)
    assert sim.step_frac == frac.tolist()


@pytest.mark.parametrize(
    ("decision", "state"),
    [(np.bool_(True), "stopped"), (np.int64(1), "stopped"), (np.str_("deprioritize"), "demoted")],
)
def test_numpy_decisions_mean_what_python_ones_mean(decision: object, state: str) -> None:
    sim = Simulator(SimConfig(n_jobs=5), 0)
    jid = sim.next_decision()
    sim.decide(decision)
    assert (jid in sim.demoted) == (state == "demoted")
    assert sim.job(jid).stopped == (state == "stopped")


@settings(max_examples=300, deadline=None)
@given(
    values=st.lists(
        st.floats(-1e9, 1e9, allow_nan=False) | st.sampled_from([0.0, -0.0, 1.5, 1e-300]),
        min_size=1,
        max_size=300,
    ),
    percents=st.lists(st.integers(0, 100), min_size=1, max_size=4),
)
def test_linear_percentiles_equal_numpys_bit_for_bit(values: list[float], percents) -> None:
    x = np.array(values)
    ours = linear_percentiles(x, tuple(percents))
    theirs = np.percentile(x, percents).tolist()
    assert [v.hex() for v in ours] == [v.hex() for v in theirs]


class _PlainPasses(Simulator):
    """The engine without the pass shortcuts of issue 15's flatness work.

    Every pass after a checkpoint whose job the best waiting one now beats runs
    (also when it beat it before), preemption candidates are popped and pushed
    back when too few, and preempted segments' checkpoints stay in the event heap.
    """

    _event_slack = math.inf

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._lean_passes = False


class _EagerCompaction(Simulator):
    """The engine compacting its event heap at every preemption (mid-pass, mid-loop)."""

    _event_slack = -(10**9)


class _Counting(Simulator):
    """The engine counting its passes, compactions and failed victim probes."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.counts = {"passes": 0, "compactions": 0, "probes_failed": 0}

    def _schedule(self) -> None:
        self.counts["passes"] += 1
        super()._schedule()

    def _compact_events(self) -> None:
        self.counts["compactions"] += 1
        super()._compact_events()

    def _worse_running_cover(self, wkey, need, running=None) -> bool:
        covered = super()._worse_running_cover(wkey, need, running)
        self.counts["probes_failed"] += not covered
        return covered


def _contended(scheduler: str, **extra) -> SimConfig:
    """A small Philly replay on few GPUs: queues, preemptions, multi-GPU jobs."""
    return SimConfig(scheduler=scheduler, trace=SAMPLE_TRACE, **extra)


@settings(max_examples=16, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    stop_seed=st.integers(0, 3),
    scheduler=st.sampled_from(SCHEDULERS),
    workload=st.sampled_from(("synthetic-0.9", "synthetic-2.0", "philly-16", "philly-64")),
    calibration=st.sampled_from(("paper", "hard")),
)
def test_lean_passes_equal_plain_passes(
    seed: int, stop_seed: int, scheduler: str, workload: str, calibration: str
) -> None:
    kind, size = workload.split("-")
    if kind == "philly":
        cfg = _contended(scheduler, num_gpus=int(size), n_jobs=60, calibration=calibration)
    else:
        cfg = SimConfig(scheduler=scheduler, calibration=calibration, n_jobs=40, load=float(size))
    fast = _episode(Simulator, cfg, seed, stop_seed)
    assert repr(fast) == repr(_episode(_PlainPasses, cfg, seed, stop_seed))
    assert repr(fast) == repr(_episode(_EagerCompaction, cfg, seed, stop_seed))


@pytest.mark.parametrize("scheduler", ["srtf-est", "tiresias", "loss-aware"])
def test_the_shortcuts_are_taken_and_change_nothing(scheduler: str) -> None:
    cfg = SimConfig(scheduler=scheduler, num_gpus=256, n_jobs=400, load=1.5)
    lean, plain = _Counting(cfg, 3, record_events=True), _Counting(cfg, 3, record_events=True)
    lean._event_slack = -16  # compact sooner: a small episode holds few stale checkpoints
    plain._lean_passes = False
    plain._event_slack = math.inf
    rule = KDeclineRule(2)
    assert repr(lean.run(rule)) == repr(plain.run(rule))
    assert lean.events == plain.events
    assert lean.counts["compactions"] > 0 and plain.counts["compactions"] == 0
    assert lean.counts["probes_failed"] > 0 and plain.counts["probes_failed"] == 0
    assert lean.counts["passes"] < plain.counts["passes"]


def test_stale_count_matches_the_event_heap() -> None:
    sim = Simulator(SimConfig(num_gpus=256, n_jobs=400, load=1.5), 4)
    sim._event_slack = -16
    checked = 0
    while (jid := sim.next_decision()) is not None:
        stale = sum(e[3] != sim._epoch[e[2]] for e in sim._heap)
        assert sim._n_stale == stale
        checked += stale > 0
        sim.decide(jid % 5 == 0)
    assert checked > 0


@st.composite
def _running_heaps(draw):
    """A running heap (float or tuple keys, ties, stale entries), a waiting key and a need."""
    tuple_keys = draw(st.booleans())
    n = draw(st.integers(0, 40))
    values = st.sampled_from([0.0, 1.0, 2.0, 2.5, 7.0, math.inf, -math.inf])
    key = st.tuples(values, values) if tuple_keys else values
    gpus = [draw(st.sampled_from([1, 1, 2, 4, 8])) for _ in range(n)]
    running = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    entries, run_ver = [], []
    for jid in range(n):
        versions = draw(st.integers(1, 3))  # older versions are stale entries
        for ver in range(1, versions + 1):
            k = draw(key)
            entries.append((negate_key(k) if tuple_keys else -k, jid, ver))
        run_ver.append(versions)
    heapq.heapify(entries)
    return entries, running, run_ver, gpus, draw(key), draw(st.integers(1, 30))


def _with_running_heap(entries, running, run_ver, gpus) -> Simulator:
    """A small engine whose running heap, versions, GPU demands and states are the given ones."""
    sim = Simulator(SimConfig(n_jobs=5), 0)
    sim._running, sim._run_ver, sim._gpus = list(entries), run_ver, gpus
    sim._state = [RUNNING if r else WAITING for r in running]
    sim._key_stale = [False] * len(run_ver)  # every entry holds its job's key
    return sim


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(case=_running_heaps())
def test_worse_running_cover_equals_summing_every_strictly_worse_job(case) -> None:
    entries, running, run_ver, gpus, wkey, need = case
    sim = _with_running_heap(entries, running, run_ver, gpus)
    live = [e for e in entries if running[e[1]] and e[2] == run_ver[e[1]]]
    worse = sum(gpus[e[1]] for e in live if wkey < negate_key(e[0]))
    assert sim._worse_running_cover(wkey, need) == (worse >= need)
    assert sim._running == entries  # read, not changed


def _pops_would_free(entries, running, run_ver, gpus, wkey, need) -> bool:
    """What the plain pass finds by popping: live entries, worst first, strictly worse than wkey."""
    heap, freed = list(entries), 0
    while freed < need and heap:
        k, jid, ver = heapq.heappop(heap)
        if not (running[jid] and ver == run_ver[jid]):
            continue  # stale
        if not wkey < negate_key(k):
            break
        freed += gpus[jid]
    return freed >= need


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(case=_running_heaps())
def test_victims_suffice_equals_popping_and_keeps_the_pop_order(case) -> None:
    entries, running, run_ver, gpus, wkey, need = case
    sim = _with_running_heap(entries, running, run_ver, gpus)
    assert sim._victims_suffice(wkey, need) == _pops_would_free(
        entries, running, run_ver, gpus, wkey, need
    )
    # Only stale entries left, and the live ones pop in the same order as before.
    left = sorted(sim._running)
    live = [e for e in sorted(entries) if running[e[1]] and e[2] == run_ver[e[1]]]
    assert [e for e in left if running[e[1]] and e[2] == run_ver[e[1]]] == live
    assert set(left) <= set(entries) and all(e in left for e in live)


class _CountingPushBacks(_Counting):
    """The engine counting preemption passes that popped victims and pushed them back."""

    def _preempt_for_best_waiting(self) -> bool:
        live_before = self._live_running()
        done = super()._preempt_for_best_waiting()
        if not done:
            # A failed pass leaves the live entries (the plain one pops and pushes them
            # back); on srtf-est it may have corrected a flagged entry's key to the job's.
            assert self._live_running() == live_before
            for k, jid, ver in self._running:
                live = self._state[jid] == RUNNING and ver == self._run_ver[jid]
                if live and not self._key_stale[jid]:
                    assert k == negate_key(self._run_key[jid])
        self.counts["failed_passes"] = self.counts.get("failed_passes", 0) + (not done)
        return done

    def _victims_suffice(self, wkey, need, running=None) -> bool:
        enough = super()._victims_suffice(wkey, need, running)
        self.counts["decided_before_popping"] = self.counts.get("decided_before_popping", 0) + (
            not enough
        )
        return enough

    def _live_running(self) -> list:
        """The live entries' (job, version): the jobs the running heap holds."""
        return sorted(
            e[1:]
            for e in self._running
            if self._state[e[1]] == RUNNING and e[2] == self._run_ver[e[1]]
        )


@pytest.mark.parametrize("scheduler", ["srtf-est", "tiresias"])
def test_failed_preemption_passes_are_decided_before_popping(scheduler: str) -> None:
    cfg = SimConfig(scheduler=scheduler, trace=SAMPLE_TRACE, num_gpus=16)
    lean = _CountingPushBacks(cfg, 1, record_events=True)
    plain = _CountingPushBacks(cfg, 1, record_events=True)
    plain._lean_passes = False
    rule = KDeclineRule(2)
    assert repr(lean.run(rule)) == repr(plain.run(rule))
    assert lean.events == plain.events
    # Some failed only after the walk: the passes that popped a victim and pushed it back.
    assert lean.counts["probes_failed"] > 0 and plain.counts["probes_failed"] == 0
    assert lean.counts["decided_before_popping"] == lean.counts["failed_passes"]
    assert lean.counts["failed_passes"] == plain.counts["failed_passes"] > 0


@settings(max_examples=10, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    scheduler=st.sampled_from(SCHEDULERS),
    calibration=st.sampled_from(("paper", "hard")),
)
def test_work_left_is_what_push_next_checkpoint_computes(
    seed: int, scheduler: str, calibration: str
) -> None:
    """decide's continue reads the work left from next_decision: the columns' formula, bit for bit."""
    sim = Simulator(SimConfig(scheduler=scheduler, calibration=calibration, n_jobs=30), seed)
    checked = 0
    while (jid := sim.next_decision()) is not None:
        i = sim._ckpt[jid]
        if sim.step_frac is None:
            left = sim._duration[jid] * (i + 1) / sim.n_ckpt - sim._work[jid]
        else:
            left = sim._duration[jid] * sim.step_frac[jid][i] - sim._work[jid]
        assert sim._pending_left.hex() == left.hex()
        checked += 1
        sim.decide(jid % 7 == 0)
    assert checked > 0
