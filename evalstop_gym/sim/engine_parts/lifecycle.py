"""A job's life in the engine: arrival, start, checkpoints queued, preemption and end.

:class:`JobLifecycle` holds the state changes of one job (``_arrive``,
``_start``, ``_preempt``, ``_finish_job``), the event heap's upkeep (the next
checkpoint's time, the compaction of stale checkpoints) and the event log.
"""

from __future__ import annotations

import heapq
import math

from ..job import DONE, RUNNING, SchedulingView
from .events import Event


class JobLifecycle:
    """The state changes of a job and the upkeep of the event heap.

    A mixin of :class:`~evalstop_gym.sim.engine.Simulator`: it writes the
    engine's columns and counters and calls its queues (``_enqueue``,
    ``_schedule``, ``_push_running``, ``_preempt_for_best_waiting``).
    """

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
