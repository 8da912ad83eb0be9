"""Base schedulers: each one only says which job should run first.

A scheduler is a small class with one method, :meth:`Scheduler.key`: lower
keys run first.  The engine keeps waiting jobs in heaps ordered by that key
and, for a ``preemptive`` scheduler, preempts running jobs whose key is worse
than the best waiting job's.  Keys are recomputed whenever the engine learns
something new about a job (it enters the queue, or reports an eval
checkpoint), which is what a real platform sees: progress and loss arrive
with checkpoints.

Adding a scheduler means subclassing :class:`Scheduler` with a ``name``; the
class registers itself and ``SimConfig(scheduler=name)`` finds it.  The
engine does not change.

A key receives a :class:`~evalstop_gym.sim.job.SchedulingView`, never the
engine's job: only what a platform knows about a job (arrival time, GPU
demand, the duration *estimate*, time run so far, checkpoints done and the
losses reported so far), read-only.  The true duration, the hack label and
the curves are not reachable from it.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, ClassVar

from ..errors import ConfigError
from .pools import placement_order

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .job import SchedulingView
    from .pools import PoolChoice

Key = float | tuple[float, ...]

SCHEDULERS: dict[str, type[Scheduler]] = {}


class Scheduler:
    """Orders jobs; lower :meth:`key` runs first.  Ties go to the earlier job."""

    name: ClassVar[str]
    #: Whether a waiting job with a better key may take GPUs from a running one.
    preemptive: ClassVar[bool] = False

    #: Whether a running job's key never increases while it runs (from its start to its
    #: preemption or end).  Then the engine leaves a running job's entry in its heap at
    #: the old key when the key shrinks, and corrects the entry only when it reaches the
    #: heap's root (see :mod:`evalstop_gym.sim.queues`).  A subclass that defines its own
    #: ``key`` does not inherit it.
    monotone_key: ClassVar[bool] = False

    #: Whether :meth:`key` or :meth:`pool_order` reads the view's ``observed_loss``.  The
    #: engine hands each checkpoint's loss to the job's view only for a scheduler that
    #: reads them (the others' views keep ``observed_loss`` empty): a copy per checkpoint
    #: nobody reads was a measurable share of a step.  A subclass that defines its own
    #: ``key`` or ``pool_order`` reads them unless it says otherwise.
    reads_losses: ClassVar[bool] = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Register every subclass that defines a ``name``."""
        super().__init_subclass__(**kwargs)
        if "name" in cls.__dict__:
            SCHEDULERS[cls.name] = cls
        if "key" in cls.__dict__ and "monotone_key" not in cls.__dict__:
            cls.monotone_key = False
        own = "key" in cls.__dict__ or "pool_order" in cls.__dict__
        if own and "reads_losses" not in cls.__dict__:
            cls.reads_losses = True

    #: How :meth:`pool_order` ranks the pools of a heterogeneous cluster: ``first-fit`` or
    #: ``fastest`` (``SimConfig(placement=...)`` sets it; see :mod:`evalstop_gym.sim.pools`).
    placement: str = "first-fit"

    def key(self, job: SchedulingView) -> Key:
        """The job's priority now: lower runs first."""
        raise NotImplementedError

    def pool_order(self, job: SchedulingView, pools: Sequence[PoolChoice]) -> Sequence[int]:
        """Indices of the pools to place ``job`` on, most preferred first (heterogeneous only).

        Called once per job, when it first needs GPUs; ``pools`` holds each pool's GPU
        type, size and speed for this job's type.  The job starts on the first pool
        in this order with room for its whole gang (and preempts, if the scheduler
        is preemptive, in that order too); pools left out are tried last, in the
        configured order.  Override it for another placement rule.
        """
        return placement_order(self.placement, tuple(pools))

    def __repr__(self) -> str:
        """Class name and options."""
        return f"{type(self).__name__}()"


class Fifo(Scheduler):
    """First in, first out (with backfilling of jobs that fit)."""

    name = "fifo"
    reads_losses = False

    def key(self, job: SchedulingView) -> Key:
        """Arrival time."""
        return job.arrival


class SjfEst(Scheduler):
    """Shortest job first on the *estimated* duration; non-preemptive."""

    name = "sjf-est"
    reads_losses = False

    def key(self, job: SchedulingView) -> Key:
        """Estimated duration."""
        return job.estimate


class SrtfEst(Scheduler):
    """Shortest remaining time first on the estimate minus time run; preemptive."""

    name = "srtf-est"
    preemptive = True
    monotone_key = True  # the work done only grows while a job runs
    reads_losses = False

    def key(self, job: SchedulingView) -> Key:
        """Estimated remaining time, never below zero."""
        left = job.estimate - job.work_done
        return 0.0 if left < 0.0 else left  # max(left, 0.0) without the call


class LossAware(Scheduler):
    """SLAQ-like (Zhang et al., SoCC'17): favour the largest recent loss reduction.

    The key is minus the relative training-loss reduction per GPU-hour over the
    last ``window`` checkpoints; jobs that have not reported yet come first (as
    in SLAQ, a new job's early loss reduction is the largest).  Preemptive, so
    GPUs move to the jobs whose loss improves fastest, which is exactly why a
    reward-hacking run (whose loss keeps falling) keeps its GPUs.
    """

    name = "loss-aware"
    preemptive = True

    def __init__(self, window: int = 2) -> None:
        """Rate the loss reduction over the last ``window`` checkpoints."""
        if not isinstance(window, int) or window < 1:
            raise ConfigError("scheduler_options.window", window, "an integer >= 1")
        self.window = window

    def key(self, job: SchedulingView) -> Key:
        """Minus the loss reduction per GPU-hour over the last ``window`` checkpoints."""
        i = job.ckpt_done
        if i == 0:
            return -math.inf
        loss = job.observed_loss
        j = max(i - self.window, 0)
        before = loss[j - 1] if j > 0 else 1.0  # losses are relative to their initial value
        # Run time between checkpoints is observed by the platform (wall clock).
        hours = job.gpus * job.work_done * (i - j) / i
        return -(before - loss[i - 1]) / hours

    def __repr__(self) -> str:
        """Class name and options."""
        return f"LossAware(window={self.window})"


class Tiresias(Scheduler):
    """Discretised 2D-LAS (Gu et al., NSDI'19): non-clairvoyant, preemptive.

    Jobs sit in priority queues by attained service (GPUs x hours run); a job
    is demoted when its service crosses a threshold; FIFO within a queue.
    """

    name = "tiresias"
    preemptive = True
    reads_losses = False

    def __init__(self, thresholds: tuple[float, ...] = (8.0, 64.0)) -> None:
        """Demote a job each time its attained service crosses a threshold (GPU-hours)."""
        th = tuple(thresholds)
        if not th or any(not t > 0 for t in th) or list(th) != sorted(th):
            raise ConfigError(
                "scheduler_options.thresholds",
                thresholds,
                "increasing positive GPU-hour thresholds, e.g. (8.0, 64.0)",
            )
        self.thresholds = th

    def key(self, job: SchedulingView) -> Key:
        """(queue index by attained service, arrival time)."""
        service = job.attained_service
        queue = sum(1 for t in self.thresholds if service >= t)
        return (float(queue), job.arrival)

    def __repr__(self) -> str:
        """Class name and options."""
        return f"Tiresias(thresholds={self.thresholds})"


def make_scheduler(name: str, **options: Any) -> Scheduler:
    """Instantiate a registered scheduler by name with its options."""
    if name not in SCHEDULERS:
        raise ConfigError("scheduler", name, f"one of {sorted(SCHEDULERS)}")
    try:
        return SCHEDULERS[name](**options)
    except TypeError as e:
        raise ConfigError("scheduler_options", options, f"options of {name!r}: {e}") from None
