"""The discrete-event simulator of a multi-tenant fine-tuning cluster.

The engine owns time (a heap of events with a counter tie-breaker, hours as
unit), the GPUs (gang allocation: a job holds all its GPUs or none) and the
jobs.  A base scheduler (:mod:`evalstop_gym.sim.schedulers`) decides who runs; a
*stopper* decides, at each eval checkpoint of a job, whether to stop it.
Stopping is a wrapper around the scheduler: a stop frees the GPUs at that
instant, delivers the best observed checkpoint, and hands the cluster back to
the base scheduler.

One code path serves both uses:

* driven from outside, one decision at a time (the Gymnasium env does this)::

      sim = Simulator(SimConfig(), seed=0)
      while (view := sim.advance()) is not None:
          sim.decide(my_policy(view))

* run whole in a tight loop with a scripted stopper: ``sim.run(stopper)``,
  which is exactly that loop.

A decision is 0 (continue), 1 (stop) or 2 (:data:`DEPRIORITIZE`, the prior
work's alternative to stopping; see :meth:`Simulator.decide`).  The costs a
real cluster pays (``SimConfig.restore_h``, ``eval_cost_h``) are 0 by default,
and then every result is bit-identical to the engine without them.

The waiting and running queues, the scheduling pass and the preemption
search are in :mod:`~evalstop_gym.sim.queues`, deprioritisation in
:mod:`~evalstop_gym.sim.deprioritize`: mixins of :class:`Simulator`, so their
methods run on the same instance at no extra cost.

The simulator is plain Python state (no generators), so it pickles.  Jobs
are kept as columns (one list or array of doubles per field, indexed by job
id), built from the episode's arrays in one pass: an episode of hundreds of jobs starts in well
under a millisecond.  :attr:`Simulator.jobs` gives per-job snapshots for tests
and debugging.
"""

from __future__ import annotations

import bisect
import gc
import heapq
import math
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ..errors import ConfigError, is_integer
from .boundary import JobView
from .checkpoints import checkpoint_tables
from .config import SimConfig
from .deprioritize import Deprioritization
from .job import DONE, PENDING, RUNNING, WAITING, JobRecord, SchedulingView
from .metrics import EpisodeRecord, cluster_metrics, episode_metrics
from .queues import JobQueues, negate_key
from .synthetic_curves import Curves, sample_curves
from .traces import trace_jobs
from .workloads import JobBatch, generate_jobs, step_time_fractions

# Heap event kinds.  At equal times the counter keeps insertion order.
ARRIVAL, CHECKPOINT = 0, 1
#: Decisions at a checkpoint: continue, stop, deprioritise (``decide`` also takes the names).
CONTINUE, STOP, DEPRIORITIZE = 0, 1, 2

Stopper = Callable[[JobView], Any]
_new_view = tuple.__new__  # JobView(...) without NamedTuple's Python-level __new__


@dataclass(frozen=True)
class Event:
    """One entry of the optional event log (``record_events=True``)."""

    time: float
    kind: str  # arrival | start | eval | preempt | complete | stop
    jid: int
    free_gpus: int


class _JobSnapshots(Sequence):  # type: ignore[type-arg]
    """``Simulator.jobs``: ``jobs[i]`` is ``sim.job(i)`` at the time of indexing."""

    def __init__(self, sim: Simulator) -> None:
        """A live view of ``sim``'s jobs."""
        self._sim = sim

    def __len__(self) -> int:
        """Number of jobs."""
        return self._sim.n_jobs

    def __getitem__(self, i: Any) -> Any:
        """The snapshot of job ``i`` (or a list of them for a slice)."""
        if isinstance(i, slice):
            return [self._sim.job(j) for j in range(*i.indices(len(self)))]
        if not -len(self) <= i < len(self):
            raise IndexError(f"job {i} out of range ({len(self)} jobs)")
        return self._sim.job(i % len(self))


def _doubles(values: np.ndarray) -> array[float]:
    """A per-job float column: ``values`` as an array of doubles (the same bits)."""
    return array("d", np.ascontiguousarray(values, dtype=np.float64).tobytes())


def _filled(n: int, value: float) -> array[float]:
    """A per-job float column of ``n`` copies of ``value``."""
    return array("d", (value,)) * n


#: Seeds are below 2**128, the size of the entropy a fresh :class:`numpy.random.SeedSequence` draws.
SEED_LIMIT = 2**128


def check_seed(seed: Any, field: str = "seed") -> None:
    """Refuse a seed NumPy would refuse (or take by accident, a bool) with a :class:`ConfigError`.

    Allowed: None (fresh entropy), a non-negative Python or NumPy integer below
    :data:`SEED_LIMIT`, or a non-empty list or tuple of those (a
    :class:`~numpy.random.SeedSequence` entropy).
    """
    if seed is None:
        return
    values = seed if isinstance(seed, list | tuple) and seed else (seed,)
    for v in values:
        if not is_integer(v) or not 0 <= v < SEED_LIMIT:
            raise ConfigError(
                field, seed, "None, an integer in [0, 2**128) or a non-empty list of them"
            )


class Simulator(JobQueues, Deprioritization):
    """One episode of the cluster.

    Args:
        config: The episode's configuration.
        seed: Seed of every random draw of the episode (jobs, curves, noise).
        record_events: Keep an :class:`Event` log (for tests and debugging).
        jobs: A hand-built episode (jobs and their curves) instead of drawing
            one from the workload; for tests and what-if studies.

    A config with ``pools`` builds a
    :class:`~evalstop_gym.sim.pooled.PooledSimulator` (typed GPU pools), as
    :func:`~evalstop_gym.sim.make_simulator` does.
    """

    #: Stale checkpoints the event heap may hold beyond half its length before it is
    #: compacted (see :meth:`_compact_events`; tests lower it to compact at every preemption).
    _event_slack = 64

    # Every attribute of a simulator is a slot, the mixins' too (CPython lays slots out
    # in name order).  In an instance dict, more than 30 attributes make it a hash table
    # of each instance's own in CPython 3.11: every attribute read goes through that
    # simulator's table, and a call of its methods, no longer specialised (the cache is
    # keyed by the table, which differs from one simulator to the next), looks the name
    # up in it.  The vector env steps N simulators in turn, so each of its steps paid
    # that in memory the cache no longer held: with slots, at N = 256, about -10 %
    # instructions and -30 % misses of a 2 MB cache per env-step.  A subclass (the pooled
    # engine) keeps its own attributes in its instance dict (a few: shared keys, no
    # table of its own).  tests/sim/test_scaling_paths.py checks that an episode sets
    # nothing outside the slots.
    __slots__ = (
        # The episode: its configuration, draws and per-episode tables.
        "config",
        "seed",
        "num_gpus",
        "scheduler",
        "preemptive",
        "window",
        "eval_noise",
        "calibration",
        "deliver_best",
        "restore_h",
        "eval_cost_h",
        "batch",
        "curves",
        "n_ckpt",
        "best_observed",
        "declines",
        "step_frac",
        "_view_rows",
        "_rates",
        "_lean_passes",
        "_lazy_running",
        "_lean_arrivals",
        "_track_losses",
        "events",
        # Per-job columns, indexed by job id.
        "_type",
        "_gpus",
        "_arrival",
        "_duration",
        "_estimate",
        "_loss",
        "_state",
        "_work",
        "_seg_start",
        "_ckpt",
        "_epoch",
        "_run_ver",
        "_first_start",
        "_finish",
        "_stopped",
        "_preemptions",
        "_gpu_hours",
        "_views",
        "_run_key",
        "_key_stale",
        "_work_from",
        # The clock, the cluster and the counters.
        "now",
        "free",
        "n_in_system",
        "_in_system",
        "_changed",
        "_listed",
        "n_done",
        "n_events",
        "n_decisions",
        "jobs_area",
        "busy_area",
        "demoted",
        "restore_gpu_hours",
        "_finished",
        # The decision awaited.
        "_pending",
        "_pending_left",
        "decision_checkpoint",
        # The events: the arrival stream and the heap of checkpoints.
        "_arrival_jobs",
        "_arrival_times",
        "_next_arrival",
        "_next_arrival_t",
        "_heap",
        "_n_stale",
        "_counter",
        # The queues (set by queues.py's JobQueues._init_queues).
        "_waiting",
        "_queues",
        "_n_waiting",
        "_top",
        "_top_valid",
        "_running",
        "_compact_at",
    )

    #: What ``Simulator(config)`` builds for a config with pools.  :mod:`evalstop_gym.sim`
    #: sets it to :class:`~evalstop_gym.sim.pooled.PooledSimulator` once it has imported
    #: both, so the engine never imports its own subclass.
    _pooled_class: ClassVar[type[Simulator] | None] = None

    def __new__(cls, config: SimConfig | None = None, *args: Any, **kwargs: Any) -> Simulator:
        """``Simulator(config)`` builds what :func:`~evalstop_gym.sim.make_simulator` builds."""
        if config is not None and not isinstance(config, SimConfig):  # None: unpickling
            raise ConfigError("config", config, "a SimConfig")
        if cls is Simulator and config is not None and config.pools is not None:
            assert Simulator._pooled_class is not None, "import evalstop_gym.sim first"
            cls = Simulator._pooled_class
        return super().__new__(cls)

    def __init__(
        self,
        config: SimConfig,
        seed: int | None = None,
        *,
        record_events: bool = False,
        jobs: tuple[JobBatch, Curves] | None = None,
    ) -> None:
        """Draw (or take) the episode's jobs and curves and queue their arrivals."""
        if not isinstance(config, SimConfig):
            raise ConfigError("config", config, "a SimConfig")
        check_seed(seed)
        self.config = config
        self.seed = seed
        self.num_gpus = config.num_gpus
        self.scheduler = config.make_scheduler()
        self.preemptive = self.scheduler.preemptive
        #: Whether the scheduling views get each checkpoint's loss (see Scheduler.reads_losses).
        self._track_losses = self.scheduler.reads_losses
        self.window = config.resolved_eval_window()
        self.eval_noise = config.resolved_eval_noise()
        self.calibration = config.resolved_calibration()
        self.deliver_best = config.deliver == "best"
        self.restore_h, self.eval_cost_h = config.resolved_costs()
        #: Deprioritised job ids -> (time, GPU-hours consumed) at their deprioritisation.
        self.demoted: dict[int, tuple[float, float]] = {}
        self.restore_gpu_hours = 0.0  # GPU time spent restoring preempted jobs
        if jobs is not None:
            self.batch, self.curves = jobs
            if int(self.batch.gpus.max()) > self.num_gpus:
                raise ConfigError("num_gpus", self.num_gpus, "at least the largest job's GPUs")
        else:
            self.batch, self.curves = self._draw_episode(seed)
        self._init_columns()
        #: Per-job speed of the pool a job runs on (work per wall-clock hour); None on the
        #: homogeneous cluster, where work advances with the clock (see sim/pooled.py).
        self._rates: list[float] | None = None
        # Per-job step-time jitter, on its own stream (child 3 of the seed): with jitter 0
        # nothing is drawn, and the other streams are the same with or without jitter.
        jitter = self.calibration.step_time_jitter
        frac = None
        if jitter:  # a generator costs tens of microseconds: build it only when drawn from
            # SeedSequence(seed).spawn(4)[3], without building children 0-2 again.
            child = np.random.SeedSequence(seed, spawn_key=(3,))
            frac = step_time_fractions(
                len(self._duration), self.n_ckpt, jitter, np.random.default_rng(child)
            )
        #: Cumulative work fraction at each checkpoint per job (None: evenly spaced, i / K).
        self.step_frac: list[list[float]] | None = None if frac is None else frac.tolist()
        self.now = 0.0
        self.free = self.num_gpus
        self.n_in_system = 0
        self._in_system: dict[int, None] = {}  # ids of the jobs in the system (for the cluster env)
        # Jobs whose state changed (arrived, started, preempted, ended) since jobs_in_system
        # last listed them, and those lists: None until its first call, so that an episode
        # nobody lists pays one comparison per change of state (see jobs_in_system).
        self._changed: set[int] | None = None
        self._listed: tuple[list[int], list[int]] = ([], [])
        self.n_done = 0
        self.n_events = 0
        self.n_decisions = 0
        self.jobs_area = 0.0  # integral of jobs in system dt
        self.busy_area = 0.0  # integral of busy GPUs dt
        self._init_queues()
        # Exact shortcuts of the scheduling pass (see decide and
        # _worse_running_cover); False runs the plain passes, for tests.
        self._lean_passes = True
        # A scheduler whose running keys only shrink: checkpoints leave the running heap
        # alone and flag the job's entry instead (see queues.py); False pushes an entry
        # at every checkpoint, for tests.
        self._lazy_running = self.preemptive and getattr(self.scheduler, "monotone_key", False)
        self._pending = -1  # id of the job awaiting a decision, -1 if none
        # Work left from the pending job's checkpoint to its next one (set by next_decision).
        self._pending_left = 0.0
        #: Checkpoints done by the job awaiting a decision (set with it).
        self.decision_checkpoint = 0
        self._finished: list[int] = []
        self.events: list[Event] | None = [] if record_events else None
        # Arrivals are known in advance: instead of sitting in the event heap
        # (making every pop pay for the whole trace), they form a sorted stream
        # merged with the heap.  Arrival i has counter i + 1 as if pushed first,
        # so at equal times arrivals come first, in job order.
        # (A stable sort by time: the same order as sorted() by arrival.)
        order = np.argsort(self.batch.arrival_h, kind="stable")
        # The stream: job ids in arrival order, and their times as doubles with +inf
        # after the last (no float and tuple per job to build and free every episode).
        self._arrival_jobs: list[int] = order.tolist()
        self._arrival_times = _doubles(np.append(self.batch.arrival_h[order], math.inf))
        self._next_arrival = 0
        self._next_arrival_t = self._arrival_times[0]
        self._heap: list[tuple[float, int, int, int]] = []  # (time, counter, jid, epoch)
        self._n_stale = 0  # entries of preempted run segments still in the event heap
        self._counter = len(self._arrival_jobs)
        # Arrivals skip scheduling passes that cannot act (see _arrival_needs_pass);
        # the pooled engine places jobs in its own pass, so it sets this False.
        self._lean_arrivals = True

    def _draw_episode(self, seed: int | None) -> tuple[JobBatch, Curves]:
        """Draw the jobs and their curves from the configured workload."""
        config = self.config
        # Independent streams: the job mix does not move when the noise level
        # changes, and the noise draws are shared across noise levels.
        # SeedSequence(seed).spawn(3), each child built directly (spawn builds the
        # parent's pool first); with no seed, the children share fresh entropy.
        entropy = np.random.SeedSequence().entropy if seed is None else seed
        ss_jobs, ss_curves, ss_noise = (
            np.random.SeedSequence(entropy, spawn_key=(i,)) for i in range(3)
        )
        batch = self._make_batch(np.random.default_rng(ss_jobs))
        curves = sample_curves(
            batch,
            self.calibration,
            self.eval_noise,
            np.random.default_rng(ss_curves),
            np.random.default_rng(ss_noise),
        )
        if config.curves is not None:
            from .real_curves import apply_real_curves

            ss_real, ss_real_noise = ss_curves.spawn(2)
            apply_real_curves(
                curves,
                batch,
                config.curves,
                self.eval_noise,
                np.random.default_rng(ss_real),
                np.random.default_rng(ss_real_noise),
                config,
            )
        return batch, curves

    def _init_columns(self) -> None:
        """One list (or array of doubles) per job field, indexed by job id."""
        b, c = self.batch, self.curves
        n = len(b)
        self.n_ckpt = c.obs_eval.shape[1]
        self._type: list[int] = b.job_type.tolist()
        self._gpus: list[int] = b.gpus.tolist()
        # The float columns are arrays of doubles, not lists of float objects: a read
        # then touches one cache line instead of the list's slot and the float it points
        # to (a big cluster's per-job state no longer fits the per-core cache).
        self._arrival = _doubles(b.arrival_h)
        self._duration = _doubles(b.duration_h)
        self._estimate = _doubles(b.estimate_h)
        # What schedulers learn, one a checkpoint: job j's loss at checkpoint i is at
        # j * K + i.  One flat array of doubles, not a list per job (which made every
        # young collection while it was built walk the list of rows) nor a tuple of
        # floats: the episode is built and freed without making or freeing K floats
        # per job, and a read touches the array alone (the checkpoints read a few).
        self._loss = _doubles(c.loss.ravel())
        # The evals, declines and losses for JobViews as flat tuples, built on the first
        # view (callers such as the env never need them).
        self._view_rows: tuple[tuple[float, ...], tuple[int, ...], tuple[float, ...]] | None = None
        # Policy-independent per-checkpoint bookkeeping, tabulated (see checkpoints.py).
        #: (n, K) best observed checkpoint after each checkpoint, and (n, K) consecutive
        #: eval declines after each checkpoint.
        self.best_observed, self.declines = checkpoint_tables(c.obs_eval)
        self._state = [PENDING] * n
        self._work = _filled(n, 0.0)  # hours run so far
        self._seg_start = _filled(n, 0.0)  # start of the current run segment
        self._ckpt = [0] * n  # checkpoints done
        self._epoch = [0] * n  # invalidates a preempted segment's checkpoint event
        self._run_ver = [0] * n  # invalidates stale entries of the running heap
        self._first_start = _filled(n, math.nan)
        self._finish = _filled(n, math.nan)
        self._stopped = [False] * n
        self._preemptions = [0] * n
        self._gpu_hours = _filled(n, 0.0)
        self._views: list[SchedulingView | None] = [None] * n  # created at arrival
        self._run_key: list[Any] = [None] * n  # its current key while it runs (preemptive)
        # Whether its running-heap entry may hold an older, larger key (see queues.py).
        self._key_stale = [False] * n
        # With a restore cost: the time from which a run segment makes progress (its
        # start plus the restore); -inf otherwise, so that it never matters.
        self._work_from = _filled(n, -math.inf)

    def _make_batch(self, rng: np.random.Generator) -> JobBatch:
        """Draw the jobs (synthetic workload) or read them (trace replay)."""
        cfg = self.config
        if cfg.trace is None:
            return generate_jobs(cfg.resolved_workload(), self.num_gpus, rng)
        wl = cfg.resolved_workload()
        return trace_jobs(
            cfg.trace,
            self.num_gpus,
            rng,
            cluster=cfg.trace_cluster,
            n_jobs=cfg.n_jobs,
            hack_fraction=wl.hack_fraction,
            estimate_log_sd=wl.estimate_log_sd,
        )

    # ------------------------------------------------------------------ public
    @property
    def done(self) -> bool:
        """Whether every job has finished or been stopped (the episode is over)."""
        return self._pending < 0 and self.n_done == len(self._state)

    @property
    def n_jobs(self) -> int:
        """Jobs in the episode."""
        return len(self._state)

    @property
    def n_waiting(self) -> int:
        """Jobs queued for GPUs now."""
        return self._n_waiting

    @property
    def finished_order(self) -> tuple[int, ...]:
        """Ids of the jobs that have ended (finished or stopped), in the order they ended."""
        return tuple(self._finished)

    def finished_since(self, start: int) -> list[int]:
        """Ids of the jobs that ended after the first ``start`` ones, in the order they ended."""
        return self._finished[start:]

    def checkpoints_done(self, jid: int) -> int:
        """Eval checkpoints job ``jid`` has reported so far."""
        return self._ckpt[jid]

    def checkpoints_of(self, jids: list[int]) -> list[int]:
        """Eval checkpoints each job of ``jids`` has reported so far (the cluster env's slots)."""
        return list(map(self._ckpt.__getitem__, jids))

    def delivered_checkpoint(self, jid: int) -> int:
        """Index of the checkpoint job ``jid`` delivers (best observed if stopped or deliver=best)."""
        if self._stopped[jid] or self.deliver_best:
            return self._best_idx(jid)
        return self.n_ckpt - 1

    def work_fraction(self, jid: int, i: int) -> float:
        """Fraction of job ``jid``'s work done at its checkpoint ``i`` (1-based; i / K unjittered)."""
        if self.step_frac is None:
            return i / self.n_ckpt
        return self.step_frac[jid][i - 1]

    def _best_idx(self, jid: int) -> int:
        """The best observed checkpoint of job ``jid`` so far (-1 before its first)."""
        i = self._ckpt[jid]
        return int(self.best_observed[jid, i - 1]) if i else -1

    def job(self, jid: int) -> JobRecord:
        """A snapshot of job ``jid``, hidden fields included (tests, debugging, analysis)."""
        b = self.batch
        return JobRecord(
            jid=jid,
            job_type=self._type[jid],
            gpus=self._gpus[jid],
            arrival=self._arrival[jid],
            duration=self._duration[jid],
            estimate=self._estimate[jid],
            hacking=bool(b.hacking[jid]),
            peak_progress=float(self.curves.peak_progress[jid]),
            n_ckpt=self.n_ckpt,
            state=self._state[jid],
            work_done=self._work[jid],
            ckpt_done=self._ckpt[jid],
            declines=int(self.declines[jid, self._ckpt[jid] - 1]) if self._ckpt[jid] else 0,
            best_idx=self._best_idx(jid),
            first_start=self._first_start[jid],
            finish=self._finish[jid],
            stopped=self._stopped[jid],
            preemptions=self._preemptions[jid],
            gpu_hours=self._gpu_hours[jid],
            delivered=self.delivered_checkpoint(jid),
        )

    @property
    def jobs(self) -> Sequence[JobRecord]:
        """Every job, as a sequence of snapshots taken when indexed (see :meth:`job`)."""
        return _JobSnapshots(self)

    @property
    def pending_view(self) -> JobView | None:
        """The view of the job awaiting a decision, if any."""
        return None if self._pending < 0 else self._view_of(self._pending)

    @property
    def pending_job_id(self) -> int | None:
        """Id of the job awaiting a decision, if any."""
        return None if self._pending < 0 else self._pending

    def advance(self) -> JobView | None:
        """Run events until a job reaches an eval checkpoint that needs a decision.

        Returns:
            The :class:`JobView` of that job, or None when every job has
            finished or been stopped (the episode is over).

        Raises:
            RuntimeError: a decision is still pending (call :meth:`decide`).
        """
        jid = self.next_decision()
        return None if jid is None else self._view_of(jid)

    def next_decision(self) -> int | None:
        """Like :meth:`advance`, but return only the job's id (no view is built).

        For callers that build their own observation of the job, e.g. the
        Gymnasium env, which reads it from per-episode tables.
        """
        if self._pending >= 0:
            raise RuntimeError("a decision is pending: call decide() before advance()")
        heap, epochs, pop = self._heap, self._epoch, heapq.heappop
        while True:
            # At equal times the arrival goes first (its counter is smaller).
            if heap and heap[0][0] < self._next_arrival_t:
                t, _, jid, epoch = pop(heap)
                if epoch != epochs[jid]:
                    self._n_stale -= 1
                    continue  # a checkpoint of a run segment that was preempted
                kind = CHECKPOINT
            elif (a := self._next_arrival) < len(self._arrival_jobs):
                t, jid = self._next_arrival_t, self._arrival_jobs[a]
                self._next_arrival = a + 1
                self._next_arrival_t = self._arrival_times[a + 1]  # +inf after the last
                kind = ARRIVAL
            else:
                return None
            self.n_events += 1
            # Advance the clock, integrating jobs in system and busy GPUs.
            dt = t - self.now
            if dt > 0:
                self.jobs_area += self.n_in_system * dt
                self.busy_area += (self.num_gpus - self.free) * dt
                self.now = t
            if kind == ARRIVAL:
                self._arrive(jid)
                continue
            # Checkpoint i of a running job: account its GPU time, tell the
            # scheduler's view what the platform learns, end it at i = K.
            self._gpu_hours[jid] += self._gpus[jid] * (t - self._seg_start[jid])
            self._seg_start[jid] = t
            i = self._ckpt[jid] = self._ckpt[jid] + 1
            duration, n_ckpt, step_frac = self._duration[jid], self.n_ckpt, self.step_frac
            if step_frac is None:
                work = self._work[jid] = duration * i / n_ckpt  # exact, no drift
            else:
                work = self._work[jid] = duration * step_frac[jid][i - 1]
            view = self._views[jid]
            view._ckpt_done = i  # type: ignore[union-attr]
            view._work_done = work  # type: ignore[union-attr]
            if self._track_losses:  # only for a scheduler that reads them
                view._losses.append(self._loss[jid * n_ckpt + i - 1])  # type: ignore[union-attr]
            if self.events is not None:
                self._log("eval", jid)
            if i < n_ckpt:
                self._pending = jid
                self.decision_checkpoint = i
                # The work left to the next checkpoint, for decide's continue:
                # _work_at_next_checkpoint(jid) - work, written out with the values at
                # hand (it runs at every checkpoint; the same operations, the same bits).
                if step_frac is None:
                    self._pending_left = duration * (i + 1) / n_ckpt - work
                else:
                    self._pending_left = duration * step_frac[jid][i] - work
                return jid
            self._finish_job(jid, stopped=False)
            if self._n_waiting:
                self._schedule()

    def decide(self, stop: Any) -> None:
        """Apply the decision for the pending job.

        ``2`` (or ``"deprioritize"``, :data:`DEPRIORITIZE`) deprioritises it
        (:meth:`_deprioritize`); any other truthy value stops it; falsy
        continues.
        """
        jid = self._pending
        if jid < 0:
            raise RuntimeError("no decision is pending: call advance() first")
        self._pending = -1
        self.n_decisions += 1
        if stop:
            # Compare with the name only for strings: comparing a NumPy scalar with
            # a str costs microseconds.
            if stop is not True and (
                stop == DEPRIORITIZE or (isinstance(stop, str) and stop == "deprioritize")
            ):
                self._deprioritize(jid)
                return
            self._finish_job(jid, stopped=True)
            if self._n_waiting:  # a pass with nobody waiting does nothing
                self._schedule()
            return
        # The hot path: _push_next_checkpoint and _push_running, inlined.
        left = self._pending_left
        self._counter = c = self._counter + 1
        # + eval_cost_h: the next eval runs on the job's GPUs before its score is
        # reported (x + 0.0 == x, so a free eval leaves every time unchanged).
        t = self.now + (0.0 if left < 0.0 else left) + self.eval_cost_h
        heapq.heappush(self._heap, (t, c, jid, self._epoch[jid]))
        if self.preemptive:
            # Its key changed with the new checkpoint.
            key = self.scheduler.key(self._views[jid])
            old, self._run_key[jid] = self._run_key[jid], key
            if self._lazy_running and not self.demoted:
                # It only shrank: the entry's older key stays until the victim search
                # meets it at the root (deprioritising makes keys grow: then push).
                self._key_stale[jid] = True
            else:
                ver = self._run_ver[jid] = self._run_ver[jid] + 1
                heapq.heappush(
                    self._running, (-key if type(key) is float else negate_key(key), jid, ver)
                )
                if len(self._running) > self._compact_at:
                    self._compact_running()
            # The cluster was stable before this checkpoint (no waiting job fits
            # the free GPUs, the best waiting one cannot preempt) and only this
            # job's key changed, so a pass can change something only if the
            # best waiting job now beats it, and beat it not before: if it did,
            # the GPUs of the jobs it beats are the same, and were too few.
            # Skipping the pass otherwise is exact, and most checkpoints of a
            # busy cluster are such a case (on srtf-est every one: keys shrink).
            if self._n_waiting:
                top = self._top if self._top_valid else self._waiting_top()
                if top[0] < key and not (top[0] < old and self._lean_passes):
                    self._schedule()

    def run(self, stopper: Stopper | None = None) -> dict[str, float]:
        """Run the episode to the end with ``stopper`` (None never stops); return metrics.

        The generational garbage collector is paused during the loop (see the
        comment below) and restored after it.
        """
        decide, next_decision, view_of = self.decide, self.next_decision, self._view_of
        # The loop makes no reference cycles, but every heap entry it pushes is a
        # tracked tuple: on a big cluster the young collections they trigger walk
        # thousands of entries spread over memory (about 6 % of a 16,384-GPU run).
        # The generational collector is paused for the loop and restored after it,
        # also when the stopper raises; cyclic garbage a stopper makes is freed then.
        paused = gc.isenabled()
        if paused:
            gc.disable()
        try:
            if stopper is None:
                while next_decision() is not None:
                    decide(False)
            else:
                while (jid := next_decision()) is not None:
                    decide(stopper(view_of(jid)))
        finally:
            if paused:
                gc.enable()
        return self.metrics()

    def record(self) -> EpisodeRecord:
        """Per-job outcome arrays (hidden fields included) for metrics."""
        stopped = np.array(self._stopped, dtype=bool)
        ckpt_done = np.array(self._ckpt)
        best = self.best_observed[np.arange(len(ckpt_done)), np.maximum(ckpt_done - 1, 0)]
        return EpisodeRecord(
            num_gpus=self.num_gpus,
            n_ckpt=self.n_ckpt,
            arrival=self.batch.arrival_h,
            finish=np.array(self._finish, dtype=float),
            first_start=np.array(self._first_start, dtype=float),
            job_type=self.batch.job_type,
            gpus=self.batch.gpus,
            duration=self.batch.duration_h,
            hacking=self.batch.hacking,
            peak_progress=self.curves.peak_progress,
            stopped=stopped,
            ckpt_done=ckpt_done,
            delivered=np.where(stopped | self.deliver_best, best, self.n_ckpt - 1),
            true_eval=self.curves.true_eval,
            gpu_hours=np.array(self._gpu_hours, dtype=float),
        )

    def metrics(self) -> dict[str, float]:
        """Episode metrics (SPEC section 6); only meaningful once :attr:`done`."""
        m = episode_metrics(self.record())
        m["n_events"] = float(self.n_events)
        m["n_decisions"] = float(self.n_decisions)
        return m

    def simultaneous_checkpoints(self) -> list[int]:
        """The pending job and every job whose next decision checkpoint falls at this instant.

        In event order (the counter tie-breaker), the pending job first: the
        order :meth:`next_decision` would present them in if nothing else
        happened at this instant (a decision may still preempt or stop a later
        one, whose checkpoint then never comes).  For the cluster env's decision
        epochs; O(running jobs).
        """
        if self._pending < 0:
            return []
        heap = self._heap
        # Every queued event is at now or later, and the heap's first is the earliest:
        # if it is later, no other checkpoint falls at this instant (the usual case).
        if not heap or heap[0][0] != self.now:
            return [self._pending]
        now, epochs, ckpt, last = self.now, self._epoch, self._ckpt, self.n_ckpt - 1
        same = sorted(
            (c, jid)
            for t, c, jid, epoch in heap
            if t == now and epoch == epochs[jid] and ckpt[jid] < last
        )
        return [self._pending, *(jid for _, jid in same)]

    def jobs_in_system(self) -> tuple[list[int], list[int]]:
        """Ids of the running and of the waiting jobs (ascending): what a platform sees.

        The first call sorts the jobs in the system; from then on the engine notes
        every job whose state changes, and a call moves only those in the two lists
        it keeps (the cluster env calls this at every step, when a job has usually
        neither started nor ended).  New lists at every call: the caller may keep them.
        """
        changed = self._changed
        if changed is None:
            ids, state = sorted(self._in_system), self._state
            self._listed = (
                [j for j in ids if state[j] == RUNNING],
                [j for j in ids if state[j] == WAITING],
            )
            self._changed = set()
        elif changed:
            self._relist(changed)
        running, waiting = self._listed
        return running.copy(), waiting.copy()

    def cluster_metrics(self) -> dict[str, float]:
        """Preemptions, paid costs and deprioritisation metrics (:func:`.metrics.cluster_metrics`).

        Apart from :meth:`metrics` (the SPEC's episode metrics, what :meth:`run`
        returns): they read the engine's own counters (preemptions, deprioritised
        jobs, restore GPU-hours), which the per-job record does not hold.
        """
        return cluster_metrics(
            self.record(),
            np.array(self._preemptions),
            self.demoted,
            self.restore_gpu_hours,
            self.eval_cost_h,
        )

    # ---------------------------------------------------------------- internals
    def _relist(self, changed: set[int]) -> None:
        """Move the jobs of ``changed`` to the list of their state now (or out); empty it."""
        running, waiting = self._listed
        state = self._state
        for jid in changed:
            for ids in (running, waiting):
                i = bisect.bisect_left(ids, jid)
                if i < len(ids) and ids[i] == jid:
                    del ids[i]
                    break
            now = state[jid]
            if now == RUNNING:
                bisect.insort(running, jid)
            elif now == WAITING:
                bisect.insort(waiting, jid)
        changed.clear()

    def _view_of(self, jid: int) -> JobView:
        """Copy the whitelisted fields of job ``jid`` at its last checkpoint."""
        rows = self._view_rows
        if rows is None:
            rows = self._view_rows = self._build_view_rows()
        i = self._ckpt[jid]
        base = jid * self.n_ckpt
        lo = base + (i - self.window if i > self.window else 0)
        hi = base + i
        return _new_view(
            JobView,
            (self._type[jid], rows[0][lo:hi], rows[1][hi - 1], i / self.n_ckpt, rows[2][lo:hi]),
        )

    def _build_view_rows(self) -> tuple[tuple[float, ...], tuple[int, ...], tuple[float, ...]]:
        """Evals, declines and losses as flat tuples (job j's checkpoint i at j * K + i).

        A window is then a slice of a tuple, and the garbage collector tracks three
        objects, not a row per job.
        """
        return (
            tuple(self.curves.obs_eval.ravel().tolist()),
            tuple(self.declines.ravel().tolist()),
            tuple(self._loss),
        )

    def _log(self, kind: str, jid: int) -> None:
        if self.events is not None:
            self.events.append(Event(self.now, kind, jid, self.free))

    def _register_arrival(self, jid: int) -> None:
        """Count ``jid`` in the system and give the scheduler its public numbers (and log it)."""
        self.n_in_system += 1
        self._in_system[jid] = None
        if self._changed is not None:
            self._changed.add(jid)
        self._views[jid] = SchedulingView(
            jid, self._gpus[jid], self._arrival[jid], self._estimate[jid], self.n_ckpt
        )
        if self.events is not None:
            self._log("arrival", jid)

    def _arrive(self, jid: int) -> None:
        """A job enters the system: the platform learns its public numbers."""
        self._register_arrival(jid)
        if not self._lean_arrivals or self.demoted:
            self._enqueue(jid)
            self._schedule()
        elif self._gpus[jid] <= self.free:
            self._start(jid)  # what the pass would do (see _arrival_needs_pass)
        else:
            self._enqueue(jid)
            # The pass would start nothing (the cluster was stable and the newcomer
            # does not fit), so the lean path begins with its preemption, and runs
            # the pass only after one.
            if self._arrival_needs_pass(jid) and (
                not self._lean_passes or self._preempt_for_best_waiting()
            ):
                self._schedule()

    def _arrival_needs_pass(self, jid: int) -> bool:
        """Whether the scheduling pass after job ``jid`` queued, too big for the free GPUs, acts.

        Before an arrival the cluster is stable: no waiting job fits the free
        GPUs and the best waiting one cannot preempt (every pass ends so, and
        :meth:`decide` runs one whenever a key change could undo that).  An
        arrival changes neither, so the pass after it can only start the
        newcomer if it fits (which ``_arrive`` does directly: the preemption
        check after it fails as before, since the newcomer adds as many GPUs
        to what a preemption needs as it could free), or preempt for the
        newcomer if it is the new best waiting job of a preemptive scheduler.
        Deprioritised jobs have their own preemption rule: with any, every
        arrival gets its pass.
        """
        if not self.preemptive:
            return False
        if self._n_waiting == 1:
            return True  # the newcomer is the best waiting job
        top = self._top if self._top_valid else self._waiting_top()
        return top[1] == jid

    def _start(self, jid: int) -> None:
        self._state[jid] = RUNNING
        if self._changed is not None:
            self._changed.add(jid)
        self.free -= self._gpus[jid]
        self._seg_start[jid] = self.now
        self._epoch[jid] += 1
        if math.isnan(self._first_start[jid]):
            self._first_start[jid] = self.now
        if self.restore_h and self._preemptions[jid]:
            # A restarted job first restores its checkpoint, holding its GPUs.
            self._work_from[jid] = self.now + self.restore_h
            self.restore_gpu_hours += self._gpus[jid] * self.restore_h
            self._push_next_checkpoint(jid, self.restore_h)
        else:
            self._push_next_checkpoint(jid)
        if self.preemptive:
            self._push_running(jid)
        if self.events is not None:
            self._log("start", jid)

    def _work_at_next_checkpoint(self, jid: int) -> float:
        """Hours of work job ``jid`` has done when it reaches its next checkpoint.

        ``duration x (i + 1) / K`` after checkpoint i, or the jittered fraction of
        ``step_frac``; the work left to it is this minus the work done (decide's
        continue reads it from :meth:`next_decision`, which writes it out).
        """
        if self.step_frac is None:
            return self._duration[jid] * (self._ckpt[jid] + 1) / self.n_ckpt
        return self._duration[jid] * self.step_frac[jid][self._ckpt[jid]]

    def _push_next_checkpoint(self, jid: int, delay: float = 0.0) -> None:
        """Queue the job's next checkpoint event, ``delay`` hours (a restore) after now."""
        self._counter = c = self._counter + 1
        left = self._work_at_next_checkpoint(jid) - self._work[jid]
        if self._rates is not None:
            left = left / self._rates[jid]  # wall-clock hours on its pool
        # The restore, the training (max(left, 0.0), without the call), then the eval.
        # With neither cost this is now + left to the bit (x + 0.0 == x for x >= 0),
        # the engine without costs.
        t = self.now + delay + (0.0 if left < 0.0 else left) + self.eval_cost_h
        heapq.heappush(self._heap, (t, c, jid, self._epoch[jid]))

    def _preempt(self, jid: int) -> None:
        ran = self.now - self._seg_start[jid]
        if self.restore_h or self.eval_cost_h:
            work = self._work[jid] = self._work[jid] + self._work_in_segment(jid)
        else:
            work = self._work[jid] = self._work[jid] + (
                ran if self._rates is None else ran * self._rates[jid]
            )
        self._views[jid]._work_done = work  # type: ignore[union-attr]
        self._gpu_hours[jid] += self._gpus[jid] * ran
        self._epoch[jid] += 1  # invalidates its pending checkpoint event
        self._n_stale += 1
        if 2 * self._n_stale > len(self._heap) + self._event_slack:
            self._compact_events()
        self._preemptions[jid] += 1
        self.free += self._gpus[jid]
        if self._changed is not None:
            self._changed.add(jid)
        if self.events is not None:
            self._log("preempt", jid)
        self._enqueue(jid)

    def _compact_events(self) -> None:
        """Drop the checkpoints of preempted run segments from the event heap, in place.

        They stay until their time comes (hours to days on a trace replay), so
        on a big, busy cluster they made up most of the heap, and every push
        and pop paid for their depth.  Entries are unique (the counter), so the
        pop order of the live ones does not change.  In place: the event loop
        holds the list.
        """
        heap, epochs = self._heap, self._epoch
        heap[:] = [e for e in heap if e[3] == epochs[e[2]]]
        heapq.heapify(heap)
        self._n_stale = 0

    def _work_in_segment(self, jid: int) -> float:
        """Training hours of the current run segment, if the job is preempted now.

        A segment is [restore][training up to the next checkpoint][eval]: only
        the middle part is progress.  An interrupted restore is refunded (it was
        counted in full at the start) and an interrupted eval is run again.
        """
        now, work_from = self.now, self._work_from[jid]
        if now < work_from:
            self.restore_gpu_hours -= self._gpus[jid] * (work_from - now)
        ran = now - max(self._seg_start[jid], work_from)
        left = self._work_at_next_checkpoint(jid) - self._work[jid]
        if self._rates is not None:
            ran = ran * self._rates[jid]  # work done on its pool in that wall-clock time
        return min(max(ran, 0.0), max(left, 0.0))

    def _finish_job(self, jid: int, *, stopped: bool) -> None:
        self._state[jid] = DONE
        self._stopped[jid] = stopped
        self._finish[jid] = self.now
        self._epoch[jid] += 1
        self.free += self._gpus[jid]
        self.n_in_system -= 1
        del self._in_system[jid]
        if self._changed is not None:
            self._changed.add(jid)
        # Nothing reads an ended job's view; dropping it (and its loss list) keeps
        # the objects the garbage collector walks to the jobs in the system.
        self._views[jid] = None
        self.n_done += 1
        self._finished.append(jid)
        if self.events is not None:
            self._log("stop" if stopped else "complete", jid)
