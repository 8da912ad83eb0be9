"""Deprioritisation, the prior work's alternative to stopping (decision 2 at a checkpoint).

A deprioritised job continues at the back of the base scheduler's order: its
key becomes :func:`demoted_key` of the base key (+inf), so it starts only when
no other waiting job fits the free GPUs, and it runs only while no waiting
job could use its GPUs (:meth:`Deprioritization._preempt_deprioritized`
preempts it for any waiting job that fits in the free GPUs plus those of the
running deprioritised jobs, whatever the base scheduler).  It stays
deprioritised to the end.

:class:`Deprioritization` holds these methods for
:class:`~evalstop_gym.sim.engine.Simulator` (a mixin on the same instance).
"""

from __future__ import annotations

import math
from typing import Any

from .job import RUNNING, SchedulingView


def demoted_key(key: Any) -> Any:
    """The key of a deprioritised job: +inf in every place, so it sorts after any real key."""
    return math.inf if type(key) is float else tuple(math.inf for _ in key)


class _Deprioritizing:
    """The base scheduler with deprioritised jobs moved to the back of its order.

    The engine swaps it in at the first deprioritisation, so an episode without
    one never pays for the membership test.
    """

    def __init__(self, base: Any, demoted: dict[int, Any]) -> None:
        """Wrap ``base``; ``demoted`` is the engine's live dict of deprioritised job ids."""
        self.base = base
        self.preemptive = base.preemptive
        self._demoted = demoted

    def key(self, job: SchedulingView) -> Any:
        """The base key, or :func:`demoted_key` of it for a deprioritised job."""
        key = self.base.key(job)
        return demoted_key(key) if job.jid in self._demoted else key


class Deprioritization:
    """The deprioritising decision and the demoted-job pass of the engine.

    A mixin of :class:`~evalstop_gym.sim.engine.Simulator`: it reads the
    engine's columns and queues and calls its ``_push_next_checkpoint``,
    ``_push_running``, ``_schedule``, ``_best_waiting`` and ``_preempt``.
    """

    demoted: dict[int, tuple[float, float]]
    scheduler: Any
    preemptive: bool
    now: float
    free: int
    _state: list[int]
    _gpus: list[int]
    _gpu_hours: list[float]

    def _deprioritize(self, jid: int) -> None:
        """Continue the pending job at the back of the base scheduler's order.

        From now on its scheduler key is :func:`demoted_key` of the base key
        (+inf), so it starts only when no other waiting job fits the free GPUs,
        and it runs only while no waiting job could use its GPUs: :meth:`_schedule`
        preempts running deprioritised jobs for any waiting job that fits in the
        free GPUs plus theirs, whatever the base scheduler (even a
        non-preemptive one).  It stays deprioritised to the end; a later
        ``decide(2)`` for it just continues it.
        """
        if jid not in self.demoted:
            if not self.demoted:
                self.scheduler = _Deprioritizing(self.scheduler, self.demoted)
            self.demoted[jid] = (self.now, self._gpu_hours[jid])
        self._push_next_checkpoint(jid)
        if self.preemptive:
            self._push_running(jid)
        self._schedule()

    def _preempt_deprioritized(self) -> bool:
        """Preempt running deprioritised jobs for the best waiting job that fits with their GPUs.

        Victims go in deprioritisation order until the job fits.  Returns whether any went.
        """
        state, gpus = self._state, self._gpus
        victims = [j for j in self.demoted if state[j] == RUNNING]
        best = self._best_waiting(self.free + sum(gpus[j] for j in victims))
        if best is None or best[0][1] in self.demoted:
            return False  # nothing but deprioritised jobs fits
        for j in victims:
            if self.free >= best[1]:
                break
            self._preempt(j)
        return True
