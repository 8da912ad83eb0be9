"""A job inside the simulator, and the read-only view of it that schedulers get.

The engine keeps every job's state as columns (hidden fields included: true
duration, hack label, true peak, every checkpoint's eval and loss drawn in
advance); :class:`JobRecord` is a snapshot of one job's row, for tests and
debugging.  Nothing outside the engine and the end-of-episode metrics reads
the hidden fields.

:class:`SchedulingView` is what a base scheduler's :meth:`~evalstop_gym.sim.
schedulers.Scheduler.key` receives: what a real platform knows about a job
(its GPU demand, arrival, declared checkpoints, the duration *estimate* the
user gave, the time it has run and the losses it has reported so far).  The
engine creates one per job when it arrives and keeps it up to date; it holds
copies of those numbers and no reference to the engine, so the hidden fields
are not reachable from it, and its public attributes are read-only.
"""

from __future__ import annotations

from operator import attrgetter
from typing import NamedTuple

# Job states.
PENDING, WAITING, RUNNING, DONE = 0, 1, 2, 3


class SchedulingView:
    """What a scheduler may know about one job (read-only attributes).

    Attributes:
        jid: Job id, in arrival order.
        gpus: GPU demand (gang-allocated).
        arrival: Arrival time, hours.
        estimate: The user's duration *estimate*, hours (not the true duration).
        n_ckpt: Eval checkpoints the job declared.
        ckpt_done: Eval checkpoints reported so far.
        work_done: Hours the job has run so far (wall clock of its run segments; on
            typed pools, its work in reference-GPU hours, which is what estimates measure).
        attained_service: GPU-hours the job has received, ``gpus * work_done``.
        observed_loss: Training losses reported so far, relative to the initial
            loss, oldest first (one per checkpoint done), for a scheduler that reads
            them (:attr:`~evalstop_gym.sim.schedulers.Scheduler.reads_losses`; empty
            for the others).
    """

    __slots__ = (
        "_arrival",
        "_ckpt_done",
        "_estimate",
        "_gpus",
        "_jid",
        "_losses",
        "_n_ckpt",
        "_work_done",
    )

    def __init__(self, jid: int, gpus: int, arrival: float, estimate: float, n_ckpt: int) -> None:
        """A job that has not run yet (the engine fills in progress as it runs)."""
        self._jid = jid
        self._gpus = gpus
        self._arrival = arrival
        self._estimate = estimate
        self._n_ckpt = n_ckpt
        self._ckpt_done = 0
        self._work_done = 0.0
        self._losses: list[float] = []

    # Properties without setters: a scheduler reads, only the engine writes.
    jid = property(attrgetter("_jid"), doc="Job id, in arrival order.")
    gpus = property(attrgetter("_gpus"), doc="GPU demand.")
    arrival = property(attrgetter("_arrival"), doc="Arrival time, hours.")
    estimate = property(attrgetter("_estimate"), doc="Duration estimate, hours.")
    n_ckpt = property(attrgetter("_n_ckpt"), doc="Eval checkpoints declared.")
    ckpt_done = property(attrgetter("_ckpt_done"), doc="Eval checkpoints reported so far.")
    work_done = property(attrgetter("_work_done"), doc="Hours run so far.")

    @property
    def attained_service(self) -> float:
        """GPU-hours received so far (Tiresias' attained service)."""
        return self._gpus * self._work_done

    @property
    def observed_loss(self) -> tuple[float, ...]:
        """Training losses reported so far, oldest first."""
        return tuple(self._losses)

    def __repr__(self) -> str:
        """The job's public numbers."""
        return (
            f"SchedulingView(jid={self._jid}, gpus={self._gpus}, arrival={self._arrival:.3f}, "
            f"estimate={self._estimate:.3f}, ckpt_done={self._ckpt_done}/{self._n_ckpt}, "
            f"work_done={self._work_done:.3f})"
        )


class JobRecord(NamedTuple):
    """A snapshot of one job inside the simulator, hidden fields included.

    The engine keeps jobs as columns; :meth:`Simulator.job
    <evalstop_gym.sim.engine.Simulator.job>` copies one job's fields into
    this record for tests, debugging and analysis.  Policies never see it.
    """

    jid: int
    job_type: int
    gpus: int
    arrival: float
    duration: float
    estimate: float
    hacking: bool
    peak_progress: float
    n_ckpt: int
    state: int
    work_done: float
    ckpt_done: int
    declines: int
    best_idx: int
    first_start: float
    finish: float
    stopped: bool
    preemptions: int
    gpu_hours: float
    #: Index of the delivered checkpoint: the best observed if stopped (or ``deliver="best"``),
    #: else the final one.
    delivered: int
