"""What the engine shows of its state: counts, job snapshots, views, the jobs in the system.

:class:`EngineReadout` holds the read-only surface of
:class:`~evalstop_gym.sim.engine.Simulator` (``done``, ``job``, ``jobs``,
``pending_view``, ``jobs_in_system``, ...) and the views a stopper gets
(``_view_of``); :class:`_JobSnapshots` is ``Simulator.jobs``.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Any

from ..boundary import JobView
from ..job import RUNNING, WAITING, JobRecord

_new_view = tuple.__new__  # JobView(...) without NamedTuple's Python-level __new__


class _JobSnapshots(Sequence):  # type: ignore[type-arg]
    """``Simulator.jobs``: ``jobs[i]`` is ``sim.job(i)`` at the time of indexing."""

    def __init__(self, sim: EngineReadout) -> None:
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


class EngineReadout:
    """The engine's read-only surface and the views of its jobs.

    A mixin of :class:`~evalstop_gym.sim.engine.Simulator`: it reads the
    engine's columns (``_state``, ``_ckpt``, ``_stopped``, ...), its event heap
    and its pending job, and changes nothing but its own lists of the jobs in
    the system and its cached view rows.
    """

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
