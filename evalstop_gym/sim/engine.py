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
methods run on the same instance at no extra cost.  Its other parts are in
:mod:`~evalstop_gym.sim.engine_parts`, one concept each (the event vocabulary,
the episode's draw and columns, a job's lifecycle, the event loop, the read-only
surface, the results), mixins too.  This module keeps the class (its slots and its
construction) and re-exports every name the parts define.

The simulator is plain Python state (no generators), so it pickles.  Jobs
are kept as columns (one list or array of doubles per field, indexed by job
id), built from the episode's arrays in one pass: an episode of hundreds of jobs starts in well
under a millisecond.  :attr:`Simulator.jobs` gives per-job snapshots for tests
and debugging.
"""

# Re-exports: the parts' names stay importable from this module (its import path is the API).
# ruff: noqa: F401

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from ..errors import ConfigError
from .config import SimConfig
from .deprioritize import Deprioritization
from .engine_parts import episode as _episode
from .engine_parts import readout as _readout
from .engine_parts.episode import SEED_LIMIT, EpisodeDraw, check_seed, doubles, filled
from .engine_parts.events import (
    ARRIVAL,
    CHECKPOINT,
    CONTINUE,
    DEPRIORITIZE,
    STOP,
    Event,
    Stopper,
)
from .engine_parts.lifecycle import JobLifecycle
from .engine_parts.loop import EventLoop
from .engine_parts.readout import EngineReadout
from .engine_parts.results import EpisodeResults
from .queues import JobQueues
from .synthetic_curves import Curves
from .workloads import JobBatch, step_time_fractions

# The parts' private names, which the engine and tests reach: assigned, since a module
# imports no other module's private name (tests/test_architecture.py).
_doubles = _episode.doubles
_filled = _episode.filled
_new_view = _readout._new_view
_JobSnapshots = _readout._JobSnapshots


class Simulator(
    EpisodeDraw,
    EngineReadout,
    EventLoop,
    EpisodeResults,
    JobLifecycle,
    JobQueues,
    Deprioritization,
):
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
