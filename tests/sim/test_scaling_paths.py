"""The engine's paths for big clusters give what the plain code gives.

The losses are kept as a flat array of doubles, and for views, with the evals
and declines, as flat tuples (job j's checkpoint i at j * K + i); every view
built from them must equal the one built from the 2-D arrays of the episode.
The engine's state is in ``__slots__``: an episode must set no attribute
outside them.  ``Simulator.run`` pauses the generational collector for
its loop and must restore it in every case.  With ``srtf-est`` a checkpoint
flags the job's running-heap entry instead of pushing a new one; the episode
must be the one an entry per checkpoint gives.  The per-job float columns are
arrays of doubles: they must hold the episode's values to the bit, and what a
run leaves in them must be what the same run leaves in lists of floats.
"""

from __future__ import annotations

import gc
import heapq

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalstop_gym import SAMPLE_TRACE, KDeclineRule
from evalstop_gym.sim import queues
from evalstop_gym.sim.boundary import JobView
from evalstop_gym.sim.config import SimConfig
from evalstop_gym.sim.engine import Simulator, _doubles, _filled
from evalstop_gym.sim.job import RUNNING, WAITING
from evalstop_gym.sim.pooled import PooledSimulator
from evalstop_gym.sim.schedulers import SCHEDULERS, Fifo, SrtfEst


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
        assert [type(x) for x in view.loss] == [float] * len(view.loss)
        assert type(view.consecutive_declines) is int
        i = sim.checkpoints_done(jid)
        sched_view = sim._views[jid]
        # The losses so far, for a scheduler that reads them (none for the others).
        reads = SCHEDULERS[cfg.scheduler].reads_losses
        losses = tuple(sim.curves.loss[jid, :i].tolist()) if reads else ()
        assert sched_view.observed_loss == losses
        sim.decide(rule(view))
        n += 1
    assert n > 0


@pytest.mark.parametrize(
    "cfg",
    [
        SimConfig(n_jobs=60),
        SimConfig(n_jobs=60, scheduler="loss-aware", calibration="hard", costs="realistic"),
        SimConfig(trace=SAMPLE_TRACE, n_jobs=40, num_gpus=64, scheduler="tiresias"),
    ],
    ids=["default", "loss-aware-jitter-costs", "philly-tiresias"],
)
def test_an_episode_sets_no_attribute_outside_the_slots(cfg: SimConfig) -> None:
    """Continues, stops and deprioritisations, views and listings: the instance dict stays empty.

    An attribute outside ``Simulator.__slots__`` lands in the instance dict; past 30
    of them CPython 3.11 gives each simulator a hash table of its own, and calls of
    its methods are no longer specialised (what made N simulators stepped in turn
    read memory the cache no longer held).
    """
    sim = Simulator(cfg, 5)
    rng = np.random.default_rng(0)
    while (jid := sim.next_decision()) is not None:
        assert sim.pending_view is not None
        sim.jobs_in_system()
        sim.job(jid)
        sim.decide(int(rng.choice(3, p=[0.8, 0.1, 0.1])))
    sim.metrics()
    assert sim.demoted and vars(sim) == {}


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


def _eager(sim: Simulator) -> Simulator:
    sim._lazy_running = False  # an entry per checkpoint, as for any other scheduler
    return sim


def _play(sim: Simulator, actions: int, seed: int):
    rng = np.random.default_rng(seed)
    while sim.next_decision() is not None:
        # Mostly continue, so that jobs run long enough to be preempted.
        sim.decide(int(rng.choice(actions, p=_P[actions])) if seed else 0)
    return sim.events, repr(sim.metrics()), repr(sim.cluster_metrics())


_P = {2: [0.9, 0.1], 3: [0.9, 0.05, 0.05]}


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    stop_seed=st.integers(0, 3),
    load=st.sampled_from((0.8, 1.2, 2.0)),
    calibration=st.sampled_from(("paper", "hard")),
    costs=st.booleans(),
    lean=st.booleans(),
    trace=st.booleans(),
    pools=st.booleans(),
)
def test_lazy_running_heap_gives_the_events_of_an_entry_per_checkpoint(
    seed: int,
    stop_seed: int,
    load: float,
    calibration: str,
    costs: bool,
    lean: bool,
    trace: bool,
    pools: bool,
) -> None:
    """srtf-est's flagged entries: the same events, stops, preemptions and metrics, bit for bit."""
    kw: dict = {"restore_h": 0.05, "eval_cost_h": 0.01} if costs else {}
    kw["num_gpus"] = 16
    if pools:  # per-pool heaps; the pooled engine does not deprioritise
        kw.update(num_gpus=32, pools={"a100": 16, "h100": 16}, placement="fastest")
        stop_seed = min(stop_seed, 2)
    if trace:
        cfg = SimConfig(trace=SAMPLE_TRACE, n_jobs=60, calibration=calibration, **kw)
    else:
        cfg = SimConfig(n_jobs=50, load=load, calibration=calibration, **kw)
    assert cfg.scheduler == "srtf-est"
    lazy, eager = Simulator(cfg, seed, record_events=True), Simulator(cfg, seed, record_events=True)
    assert lazy._lazy_running
    lazy._lean_passes = eager._lean_passes = lean
    actions = 3 if stop_seed == 3 else 2  # 2: deprioritise too
    assert _play(lazy, actions, stop_seed) == _play(_eager(eager), actions, stop_seed)


def test_lazy_running_heap_is_exercised_and_only_for_shrinking_keys() -> None:
    """Preemptions meet flagged entries at the root; other schedulers push per checkpoint."""
    original = queues._correct_root
    for cfg in (
        SimConfig(num_gpus=32, n_jobs=200, load=1.5),
        SimConfig(num_gpus=32, n_jobs=200, load=1.5, pools={"a100": 16, "h100": 16}),
    ):
        sim = Simulator(cfg, 1)
        corrected = []

        def counting(*args, corrected=corrected):
            corrected.append(args[1][1])
            original(*args)

        queues._correct_root = counting
        try:
            sim.run(KDeclineRule(2))
        finally:
            queues._correct_root = original
        assert corrected and sim.cluster_metrics()["preemptions"] > 0
    for name in ("fifo", "sjf-est", "loss-aware", "tiresias"):
        assert not Simulator(SimConfig(scheduler=name, n_jobs=5), 0)._lazy_running

    class MySrtf(SrtfEst):
        def key(self, job):
            return -job.work_done  # grows: must not inherit monotone_key

    assert SrtfEst.monotone_key and not MySrtf.monotone_key


def test_only_schedulers_that_read_losses_get_them_and_results_do_not_move() -> None:
    """Views get each checkpoint's loss only for a scheduler that reads them (else nothing
    reads them): every built-in scheduler's episode is the one of views that get them."""
    builtin = ("fifo", "loss-aware", "sjf-est", "srtf-est", "tiresias")
    assert [name for name in builtin if SCHEDULERS[name].reads_losses] == ["loss-aware"]

    class MySrtf(SrtfEst):
        def key(self, job):
            return -job.observed_loss[-1] if job.observed_loss else 0.0

    class Options(SrtfEst):
        def __init__(self, scale: float = 1.0) -> None:
            self.scale = scale

    class MyPlacement(Fifo):
        def pool_order(self, job, pools):
            return sorted(range(len(pools)), reverse=bool(job.observed_loss))

    # A new key or pool order reads them; new options alone do not.
    assert MySrtf.reads_losses and MyPlacement.reads_losses and not Options.reads_losses
    for name in builtin:
        cfg = SimConfig(scheduler=name, n_jobs=60, num_gpus=32, load=1.5)
        lean, full = Simulator(cfg, 4), Simulator(cfg, 4)
        full._track_losses = True  # the engine before the flag: every view gets them
        assert lean._track_losses == SCHEDULERS[name].reads_losses
        rule = KDeclineRule(2)
        got, want = lean.run(rule), full.run(rule)
        assert np.array(list(got.values())).tobytes() == np.array(list(want.values())).tobytes()
        assert list(got) == list(want)
        assert lean.record().finish.tobytes() == full.record().finish.tobytes()


@st.composite
def _flagged_heaps(draw):
    """A running heap in which flagged jobs' entries hold a key at least their current one."""
    n = draw(st.integers(1, 12))
    keys = st.floats(0.0, 10.0, allow_nan=False).map(lambda x: round(x, 1))  # ties too
    gpus = [draw(st.sampled_from([1, 1, 2, 4, 8])) for _ in range(n)]
    running = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    entries, run_ver, run_key, stale = [], [], [], []
    for jid in range(n):
        versions = draw(st.integers(1, 3))  # older versions are stale entries
        for ver in range(1, versions):
            entries.append((-draw(keys), jid, ver))
        key = draw(keys)
        flagged = draw(st.booleans())
        held = key + draw(keys) if flagged else key  # the key only shrank since the push
        entries.append((-held, jid, versions))
        run_ver.append(versions)
        run_key.append(key)
        stale.append(flagged)
    heapq.heapify(entries)
    return entries, running, run_ver, run_key, stale, gpus, draw(keys), draw(st.integers(1, 30))


def _with_flagged_heap(entries, running, run_ver, run_key, stale, gpus) -> Simulator:
    sim = Simulator(SimConfig(n_jobs=5), 0)
    sim._running, sim._run_ver, sim._gpus = list(entries), run_ver, gpus
    sim._run_key, sim._key_stale = run_key, list(stale)
    sim._state = [RUNNING if r else WAITING for r in running]
    return sim


@settings(max_examples=120, deadline=None)
@given(case=_flagged_heaps())
def test_victim_search_on_flagged_entries_is_the_search_on_current_keys(case) -> None:
    """The walk, the root check and the pops answer as on a heap of the current keys."""
    entries, running, run_ver, run_key, stale, gpus, wkey, need = case
    live = [j for j in range(len(run_ver)) if running[j]]
    worse = sorted((-run_key[j], j) for j in live if wkey < run_key[j])
    enough = sum(gpus[j] for _, j in worse) >= need
    sim = _with_flagged_heap(entries, running, run_ver, run_key, stale, gpus)
    assert sim._worse_running_cover(wkey, need) == enough
    assert sim._victims_suffice(wkey, need) == enough
    sim = _with_flagged_heap(entries, running, run_ver, run_key, stale, gpus)
    state = sim._state
    victims = queues.take_victims(
        sim._running, wkey, need, state, run_ver, gpus, sim._key_stale, run_key
    )
    if not enough:
        assert victims is None
        return
    # Worst current key first, ties by job id: the order an entry per checkpoint gives.
    expected, freed = [], 0
    for _, j in worse:
        if freed >= need:
            break
        expected.append(j)
        freed += gpus[j]
    assert victims == expected


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True), max_size=40))
def test_float_columns_keep_every_bit(values: list[float]) -> None:
    column = _doubles(np.array(values, dtype=np.float64))
    assert np.array(values, dtype=np.float64).tobytes() == column.tobytes()
    assert len(_filled(len(values), -0.0)) == len(values)


class _ListColumns:
    """Mixin: the engine with its float columns as lists of Python floats (as before arrays)."""

    FLOATS = (
        "_arrival", "_duration", "_estimate", "_work", "_seg_start",
        "_first_start", "_finish", "_gpu_hours", "_work_from",
    )  # fmt: skip

    def _init_columns(self) -> None:
        super()._init_columns()  # type: ignore[misc]
        for name in self.FLOATS:
            setattr(self, name, list(getattr(self, name)))


class _Lists(_ListColumns, Simulator):
    pass


class _PooledLists(_ListColumns, PooledSimulator):
    pass


@pytest.mark.parametrize(
    "cfg",
    [
        SimConfig(scheduler="srtf-est", load=1.5),
        SimConfig(scheduler="tiresias", trace=SAMPLE_TRACE, num_gpus=16, restore_h=0.05),
        SimConfig(pools={"a100": 32, "h100": 32}, placement="fastest", eval_cost_h=0.01),
    ],
)
def test_array_columns_run_as_list_columns(cfg: SimConfig) -> None:
    arrays = Simulator(cfg, 5, record_events=True)
    lists = (_Lists if cfg.pools is None else _PooledLists)(cfg, 5, record_events=True)
    assert all(isinstance(getattr(lists, n), list) for n in _ListColumns.FLOATS)
    rule = KDeclineRule(2)
    assert repr(arrays.run(rule)) == repr(lists.run(rule))
    assert arrays.events == lists.events
    assert repr(arrays.cluster_metrics()) == repr(lists.cluster_metrics())
    for name in _ListColumns.FLOATS:
        assert np.array(getattr(arrays, name)).tobytes() == np.array(getattr(lists, name)).tobytes()
