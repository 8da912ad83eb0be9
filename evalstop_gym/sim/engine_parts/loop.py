"""The event loop: run events to the next decision, apply it, or run a whole episode.

:class:`EventLoop` holds :meth:`~EventLoop.advance` and
:meth:`~EventLoop.next_decision` (arrivals and checkpoints, the clock and its
integrals), :meth:`~EventLoop.decide` (continue, stop or deprioritise, with the
exact shortcuts of the scheduling pass) and :meth:`~EventLoop.run`.
"""

from __future__ import annotations

import gc
import heapq
from typing import Any

from ..boundary import JobView
from ..queues import negate_key
from .events import ARRIVAL, CHECKPOINT, DEPRIORITIZE, Stopper


class EventLoop:
    """The engine's event loop and its decisions.

    A mixin of :class:`~evalstop_gym.sim.engine.Simulator`: it pops the
    engine's event heap and arrival stream and calls its state changes
    (``_arrive``, ``_finish_job``, ``_deprioritize``), its queues
    (``_schedule``, ``_waiting_top``, ``_compact_running``) and ``_view_of``.
    """

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
