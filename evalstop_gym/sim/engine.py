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

The simulator is plain Python state (no generators), so it pickles.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ConfigError
from .boundary import JobView, make_view
from .config import SimConfig
from .metrics import EpisodeRecord, episode_metrics
from .synthetic_curves import Curves, sample_curves
from .workloads import JobBatch, generate_jobs, step_time_fractions, trace_jobs

# Heap event kinds.  At equal times the counter keeps insertion order.
ARRIVAL, CHECKPOINT = 0, 1
# Job states.
PENDING, WAITING, RUNNING, DONE = 0, 1, 2, 3

Stopper = Callable[[JobView], Any]


class Job:
    """A job inside the simulator.  Policies never see this object."""

    __slots__ = (
        "jid",
        "job_type",
        "gpus",
        "arrival",
        "duration",
        "estimate",
        "hacking",
        "peak_progress",
        "n_ckpt",
        "obs_eval",
        "loss",
        "state",
        "work_done",
        "seg_start",
        "ckpt_done",
        "epoch",
        "run_ver",
        "declines",
        "best_idx",
        "first_start",
        "finish",
        "stopped",
        "preemptions",
        "gpu_hours",
    )

    def __init__(
        self,
        jid: int,
        job_type: int,
        gpus: int,
        arrival: float,
        duration: float,
        estimate: float,
        hacking: bool,
        peak_progress: float,
        obs_eval: list[float],
        loss: list[float],
    ) -> None:
        self.jid = jid
        self.job_type = job_type
        self.gpus = gpus
        self.arrival = arrival
        self.duration = duration
        self.estimate = estimate
        self.hacking = hacking
        self.peak_progress = peak_progress
        self.n_ckpt = len(obs_eval)
        self.obs_eval = obs_eval
        self.loss = loss
        self.state = PENDING
        self.work_done = 0.0
        self.seg_start = 0.0
        self.ckpt_done = 0
        self.epoch = 0
        self.run_ver = 0
        self.declines = 0
        self.best_idx = -1
        self.first_start = math.nan
        self.finish = math.nan
        self.stopped = False
        self.preemptions = 0
        self.gpu_hours = 0.0

    @property
    def delivered(self) -> int:
        """Index of the delivered checkpoint: the best observed if stopped, else the final."""
        return self.best_idx if self.stopped else self.n_ckpt - 1


@dataclass(frozen=True)
class Event:
    """One entry of the optional event log (``record_events=True``)."""

    time: float
    kind: str  # arrival | start | eval | preempt | complete | stop
    jid: int
    free_gpus: int


def _neg(key: Any) -> Any:
    return tuple(-x for x in key) if isinstance(key, tuple) else -key


class Simulator:
    """One episode of the cluster.

    Args:
        config: The episode's configuration.
        seed: Seed of every random draw of the episode (jobs, curves, noise).
        record_events: Keep an :class:`Event` log (for tests and debugging).
        jobs: A hand-built episode (jobs and their curves) instead of drawing
            one from the workload; for tests and what-if studies.
    """

    def __init__(
        self,
        config: SimConfig,
        seed: int | None = None,
        *,
        record_events: bool = False,
        jobs: tuple[JobBatch, Curves] | None = None,
    ) -> None:
        self.config = config
        self.seed = seed
        self.num_gpus = config.num_gpus
        self.scheduler = config.make_scheduler()
        self.preemptive = self.scheduler.preemptive
        self.window = config.resolved_eval_window()
        self.eval_noise = config.resolved_eval_noise()
        self.calibration = config.resolved_calibration()
        self.deliver_best = config.deliver == "best"
        # Independent streams: the job mix does not move when the noise level
        # changes, and the noise draws are shared across noise levels.
        ss_jobs, ss_curves, ss_noise = np.random.SeedSequence(seed).spawn(3)
        if jobs is not None:
            self.batch, self.curves = jobs
            if int(self.batch.gpus.max()) > self.num_gpus:
                raise ConfigError("num_gpus", self.num_gpus, "at least the largest job's GPUs")
        else:
            self.batch = self._make_batch(np.random.default_rng(ss_jobs))
            self.curves = sample_curves(
                self.batch,
                self.calibration,
                self.eval_noise,
                np.random.default_rng(ss_curves),
                np.random.default_rng(ss_noise),
            )
            if config.curves is not None:
                from .real_curves import apply_real_curves

                ss_real, ss_real_noise = ss_curves.spawn(2)
                apply_real_curves(
                    self.curves,
                    self.batch,
                    config.curves,
                    self.eval_noise,
                    np.random.default_rng(ss_real),
                    np.random.default_rng(ss_real_noise),
                )
        b, c = self.batch, self.curves
        # Its own stream (child 3 of the seed): with jitter 0 nothing is drawn, and the other
        # streams are the same with or without jitter.
        frac = step_time_fractions(
            len(b),
            c.true_eval.shape[1],
            self.calibration.step_time_jitter,
            np.random.default_rng(np.random.SeedSequence(seed).spawn(4)[3]),
        )
        #: Cumulative work fraction at each checkpoint per job (None: evenly spaced, i / K).
        self.step_frac: list[list[float]] | None = None if frac is None else frac.tolist()
        self.jobs: list[Job] = [
            Job(i, jt, g, a, d, e, h, pk, oe, ls)
            for i, (jt, g, a, d, e, h, pk, oe, ls) in enumerate(
                zip(
                    b.job_type.tolist(),
                    b.gpus.tolist(),
                    b.arrival_h.tolist(),
                    b.duration_h.tolist(),
                    b.estimate_h.tolist(),
                    b.hacking.tolist(),
                    c.peak_progress.tolist(),
                    c.obs_eval.tolist(),
                    c.loss.tolist(),
                )
            )
        ]
        self.now = 0.0
        self.free = self.num_gpus
        self.n_in_system = 0
        self.n_done = 0
        self.n_events = 0
        self.n_decisions = 0
        self.jobs_area = 0.0  # integral of jobs in system dt
        self.busy_area = 0.0  # integral of busy GPUs dt
        self._counter = 0
        self._heap: list[tuple[float, int, int, int, int]] = []
        self._waiting: dict[int, list[tuple[Any, int]]] = {}
        self._demands: list[int] = []
        self._n_waiting = 0
        self._running: list[tuple[Any, int, int]] = []  # max-heap by key (preemptive only)
        self._pending: Job | None = None
        self.finished_order: list[int] = []
        self.events: list[Event] | None = [] if record_events else None
        for job in self.jobs:
            self._push(job.arrival, ARRIVAL, job)

    def _make_batch(self, rng: np.random.Generator) -> JobBatch:
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
        return self._pending is None and self.n_done == len(self.jobs)

    @property
    def n_waiting(self) -> int:
        return self._n_waiting

    @property
    def pending_view(self) -> JobView | None:
        """The view of the job awaiting a decision, if any."""
        return None if self._pending is None else make_view(self._pending, self.window)

    @property
    def pending_job_id(self) -> int | None:
        return None if self._pending is None else self._pending.jid

    def advance(self) -> JobView | None:
        """Run events until a job reaches an eval checkpoint that needs a decision.

        Returns:
            The :class:`JobView` of that job, or None when every job has
            finished or been stopped (the episode is over).

        Raises:
            RuntimeError: a decision is still pending (call :meth:`decide`).
        """
        if self._pending is not None:
            raise RuntimeError("a decision is pending: call decide() before advance()")
        heap, jobs = self._heap, self.jobs
        while heap:
            t, _, kind, jid, epoch = heapq.heappop(heap)
            job = jobs[jid]
            if epoch != job.epoch:
                continue  # a checkpoint of a run segment that was preempted
            self.n_events += 1
            self._clock(t)
            if kind == ARRIVAL:
                self.n_in_system += 1
                self._log("arrival", job)
                self._enqueue(job)
                self._schedule()
                continue
            if self._checkpoint(job):
                self._pending = job
                return make_view(job, self.window)
        return None

    def decide(self, stop: Any) -> None:
        """Apply the decision for the pending job: truthy stops it, falsy continues."""
        job = self._pending
        if job is None:
            raise RuntimeError("no decision is pending: call advance() first")
        self._pending = None
        self.n_decisions += 1
        if stop:
            self._finish(job, stopped=True)
            self._schedule()
        else:
            self._push_next_checkpoint(job)
            if self.preemptive:
                self._push_running(job)  # its key changed with the new checkpoint
                if self._n_waiting:
                    self._schedule()

    def run(self, stopper: Stopper | None = None) -> dict[str, float]:
        """Run the episode to the end with ``stopper`` (None never stops); return metrics."""
        decide, advance = self.decide, self.advance
        if stopper is None:
            while advance() is not None:
                decide(False)
        else:
            while (view := advance()) is not None:
                decide(stopper(view))
        return self.metrics()

    def record(self) -> EpisodeRecord:
        """Per-job outcome arrays (hidden fields included) for metrics."""
        jobs = self.jobs
        return EpisodeRecord(
            num_gpus=self.num_gpus,
            n_ckpt=self.curves.true_eval.shape[1],
            arrival=self.batch.arrival_h,
            finish=np.array([j.finish for j in jobs]),
            first_start=np.array([j.first_start for j in jobs]),
            job_type=self.batch.job_type,
            gpus=self.batch.gpus,
            duration=self.batch.duration_h,
            hacking=self.batch.hacking,
            peak_progress=self.curves.peak_progress,
            stopped=np.array([j.stopped for j in jobs]),
            ckpt_done=np.array([j.ckpt_done for j in jobs]),
            delivered=np.array([self.delivered_index(j) for j in jobs]),
            true_eval=self.curves.true_eval,
            gpu_hours=np.array([j.gpu_hours for j in jobs]),
        )

    def delivered_index(self, job: Job) -> int:
        """Checkpoint ``job`` delivers: its best observed if stopped or ``deliver="best"``."""
        return job.best_idx if (job.stopped or self.deliver_best) else job.n_ckpt - 1

    def metrics(self) -> dict[str, float]:
        """Episode metrics (SPEC section 6); only meaningful once :attr:`done`."""
        m = episode_metrics(self.record())
        m["n_events"] = float(self.n_events)
        m["n_decisions"] = float(self.n_decisions)
        return m

    # ---------------------------------------------------------------- internals
    def work_fraction(self, jid: int, i: int) -> float:
        """Fraction of job ``jid``'s work done at its checkpoint ``i`` (1-based; i / K unjittered)."""
        if self.step_frac is None:
            return i / self.jobs[jid].n_ckpt
        return self.step_frac[jid][i - 1]

    def _push(self, t: float, kind: int, job: Job) -> None:
        self._counter += 1
        heapq.heappush(self._heap, (t, self._counter, kind, job.jid, job.epoch))

    def _clock(self, t: float) -> None:
        dt = t - self.now
        if dt > 0:
            self.jobs_area += self.n_in_system * dt
            self.busy_area += (self.num_gpus - self.free) * dt
            self.now = t

    def _log(self, kind: str, job: Job) -> None:
        if self.events is not None:
            self.events.append(Event(self.now, kind, job.jid, self.free))

    def _enqueue(self, job: Job) -> None:
        job.state = WAITING
        d = job.gpus
        q = self._waiting.get(d)
        if q is None:
            q = self._waiting[d] = []
            self._demands.append(d)
            self._demands.sort()
        heapq.heappush(q, (self.scheduler.key(job), job.jid))
        self._n_waiting += 1

    def _best_waiting(self, max_gpus: float) -> tuple[tuple[Any, int], int] | None:
        best: tuple[Any, int] | None = None
        best_d = 0
        for d in self._demands:
            if d > max_gpus:
                break
            q = self._waiting[d]
            if q and (best is None or q[0] < best):
                best, best_d = q[0], d
        return None if best is None else (best, best_d)

    def _push_running(self, job: Job) -> None:
        job.run_ver += 1
        heapq.heappush(self._running, (_neg(self.scheduler.key(job)), job.jid, job.run_ver))

    def _start(self, job: Job) -> None:
        job.state = RUNNING
        self.free -= job.gpus
        job.seg_start = self.now
        job.epoch += 1
        if math.isnan(job.first_start):
            job.first_start = self.now
        self._push_next_checkpoint(job)
        if self.preemptive:
            self._push_running(job)
        if self.events is not None:
            self._log("start", job)

    def _push_next_checkpoint(self, job: Job) -> None:
        if self.step_frac is None:
            work_at_next = job.duration * (job.ckpt_done + 1) / job.n_ckpt
        else:
            work_at_next = job.duration * self.step_frac[job.jid][job.ckpt_done]
        self._push(self.now + max(work_at_next - job.work_done, 0.0), CHECKPOINT, job)

    def _preempt(self, job: Job) -> None:
        ran = self.now - job.seg_start
        job.work_done += ran
        job.gpu_hours += job.gpus * ran
        job.epoch += 1  # invalidates its pending checkpoint event
        job.preemptions += 1
        self.free += job.gpus
        self._log("preempt", job)
        self._enqueue(job)

    def _checkpoint(self, job: Job) -> bool:
        """Record checkpoint i of a running job; True if a decision is needed."""
        ran = self.now - job.seg_start
        job.gpu_hours += job.gpus * ran
        job.seg_start = self.now
        i = job.ckpt_done = job.ckpt_done + 1
        if self.step_frac is None:
            job.work_done = job.duration * i / job.n_ckpt  # exact, no drift
        else:
            job.work_done = job.duration * self.step_frac[job.jid][i - 1]
        ev = job.obs_eval
        if i >= 2 and ev[i - 1] < ev[i - 2]:
            job.declines += 1
        else:
            job.declines = 0
        if job.best_idx < 0 or ev[i - 1] > ev[job.best_idx]:
            job.best_idx = i - 1
        if self.events is not None:
            self._log("eval", job)
        if i == job.n_ckpt:
            self._finish(job, stopped=False)
            self._schedule()
            return False
        return True

    def _finish(self, job: Job, *, stopped: bool) -> None:
        job.state = DONE
        job.stopped = stopped
        job.finish = self.now
        job.epoch += 1
        self.free += job.gpus
        self.n_in_system -= 1
        self.n_done += 1
        self.finished_order.append(job.jid)
        self._log("stop" if stopped else "complete", job)

    def _schedule(self) -> None:
        """Start waiting jobs in key order while they fit; preempt if allowed."""
        jobs, waiting = self.jobs, self._waiting
        while self._n_waiting:
            while self.free > 0 and self._n_waiting:
                best = self._best_waiting(self.free)
                if best is None:
                    break
                heapq.heappop(waiting[best[1]])
                self._n_waiting -= 1
                self._start(jobs[best[0][1]])
            if not self.scheduler.preemptive or not self._n_waiting:
                return
            top = self._best_waiting(math.inf)
            assert top is not None
            (wkey, _), need_gpus = top
            need = need_gpus - self.free
            victims: list[tuple[Any, int, int]] = []
            freed = 0
            running = self._running
            while freed < need and running:
                entry = running[0]
                job = jobs[entry[1]]
                if job.state != RUNNING or entry[2] != job.run_ver:
                    heapq.heappop(running)  # stale entry
                    continue
                # Preempt only for a strictly better key: ties never thrash.
                if not wkey < _neg(entry[0]):
                    break
                victims.append(heapq.heappop(running))
                freed += job.gpus
            if freed < need:
                for entry in victims:
                    heapq.heappush(running, entry)
                return
            for entry in victims:
                self._preempt(jobs[entry[1]])
