"""The same cluster written as a SimPy model, as a reference for the engine's speed.

SimPy (https://simpy.readthedocs.io) is the usual Python discrete-event
kernel.  :class:`SimPyCluster` replays an episode drawn by
:class:`evalstop_gym.Simulator` (its public ``batch`` and ``curves``) on
SimPy's event queue: arrivals and eval checkpoints are ``env.timeout`` events
with callbacks, gang allocation and SRTF-Est preemption follow the engine's
rules (the same keys, tie-breaks and preemption test), and a stopper is
called on a :class:`~evalstop_gym.JobView` at every decision.  Callbacks
rather than one process per job keep SimPy's own overhead low and the event
order identical to the engine's (a process resumption would add an event and
reorder ties), so the two produce the same events, stops and JCT, which
``bench_simpy.py`` and ``tests/sim/test_simpy_model.py`` check.

Benchmark-only: ``pip install -e ".[bench]"``.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
import simpy

from evalstop_gym import JobView, Simulator

WAITING, RUNNING, DONE = 1, 2, 3


class SimPyCluster:
    """One episode of ``sim`` (SRTF-Est only) replayed on a SimPy event queue."""

    def __init__(self, sim: Simulator, stopper: Callable[[JobView], Any]) -> None:
        """Take the episode's jobs and curves from ``sim`` (which is not run)."""
        if sim.config.scheduler != "srtf-est":
            raise ValueError("the SimPy model implements srtf-est only")
        b, c = sim.batch, sim.curves
        self.env = simpy.Environment()
        self.stopper = stopper
        self.window = sim.window
        self.k = c.obs_eval.shape[1]
        self.free = sim.num_gpus
        self.type, self.gpus = b.job_type.tolist(), b.gpus.tolist()
        self.arrival, self.duration = b.arrival_h.tolist(), b.duration_h.tolist()
        self.estimate = b.estimate_h.tolist()
        self.evals, self.loss = (
            list(map(tuple, c.obs_eval.tolist())),
            list(map(tuple, c.loss.tolist())),
        )
        n = len(b)
        self.state, self.work, self.seg = [0] * n, [0.0] * n, [0.0] * n
        self.ckpt, self.epoch, self.ver, self.declines = [0] * n, [0] * n, [0] * n, [0] * n
        self.finish = [math.nan] * n
        self.stopped = [False] * n
        self.waiting: dict[int, list[tuple[float, int]]] = {}
        self.demands: list[int] = []
        self.running: list[tuple[float, int, int]] = []
        self.n_events = 0
        for jid in sorted(range(n), key=self.arrival.__getitem__):
            self.env.timeout(self.arrival[jid]).callbacks.append(partial(self._arrive, jid))

    def run(self) -> dict[str, float]:
        """Run to the end; return events, stops and mean JCT."""
        self.env.run()
        jct = np.array(self.finish) - np.array(self.arrival)
        return {
            "n_events": float(self.n_events),
            "n_stopped": float(sum(self.stopped)),
            "mean_jct_h": float(jct.mean()),
        }

    # ------------------------------------------------------------ events
    def _arrive(self, jid: int, _event: simpy.Event) -> None:
        self.n_events += 1
        self._enqueue(jid)
        self._schedule()

    def _checkpoint(self, jid: int, epoch: int, _event: simpy.Event) -> None:
        if epoch != self.epoch[jid]:
            return  # a checkpoint of a run segment that was preempted
        self.n_events += 1
        now = self.env.now
        self.seg[jid] = now
        i = self.ckpt[jid] = self.ckpt[jid] + 1
        self.work[jid] = self.duration[jid] * i / self.k
        ev = self.evals[jid]
        self.declines[jid] = self.declines[jid] + 1 if i >= 2 and ev[i - 1] < ev[i - 2] else 0
        if i == self.k:
            self._finish(jid, stopped=False)
            self._schedule()
            return
        lo = max(0, i - self.window)
        view = JobView(
            self.type[jid], ev[lo:i], self.declines[jid], i / self.k, self.loss[jid][lo:i]
        )
        if self.stopper(view):
            self._finish(jid, stopped=True)
            self._schedule()
            return
        self._next_checkpoint(jid)
        key = self._push_running(jid)
        top = self._best_waiting(math.inf)
        if top is not None and top[0][0] < key:
            self._schedule()

    # ------------------------------------------------------------ cluster
    def _key(self, jid: int) -> float:
        return max(self.estimate[jid] - self.work[jid], 0.0)

    def _enqueue(self, jid: int) -> None:
        self.state[jid] = WAITING
        d = self.gpus[jid]
        if d not in self.waiting:
            self.waiting[d] = []
            self.demands.append(d)
            self.demands.sort()
        heapq.heappush(self.waiting[d], (self._key(jid), jid))

    def _best_waiting(self, max_gpus: float) -> tuple[tuple[float, int], int] | None:
        best, best_d = None, 0
        for d in self.demands:
            if d > max_gpus:
                break
            q = self.waiting[d]
            if q and (best is None or q[0] < best):
                best, best_d = q[0], d
        return None if best is None else (best, best_d)

    def _push_running(self, jid: int) -> float:
        self.ver[jid] += 1
        key = self._key(jid)
        heapq.heappush(self.running, (-key, jid, self.ver[jid]))
        return key

    def _next_checkpoint(self, jid: int) -> None:
        left = self.duration[jid] * (self.ckpt[jid] + 1) / self.k - self.work[jid]
        timeout = self.env.timeout(max(left, 0.0))
        timeout.callbacks.append(partial(self._checkpoint, jid, self.epoch[jid]))

    def _start(self, jid: int) -> None:
        self.state[jid] = RUNNING
        self.free -= self.gpus[jid]
        self.seg[jid] = self.env.now
        self.epoch[jid] += 1
        self._next_checkpoint(jid)
        self._push_running(jid)

    def _finish(self, jid: int, *, stopped: bool) -> None:
        self.state[jid] = DONE
        self.stopped[jid] = stopped
        self.finish[jid] = self.env.now
        self.epoch[jid] += 1
        self.free += self.gpus[jid]

    def _preempt(self, jid: int) -> None:
        self.work[jid] += self.env.now - self.seg[jid]
        self.epoch[jid] += 1
        self.free += self.gpus[jid]
        self._enqueue(jid)

    def _schedule(self) -> None:
        while True:
            while self.free > 0:
                best = self._best_waiting(self.free)
                if best is None:
                    break
                heapq.heappop(self.waiting[best[1]])
                self._start(best[0][1])
            top = self._best_waiting(math.inf)
            if top is None or not self._preempt_for(top):
                return

    def _preempt_for(self, top: tuple[tuple[float, int], int]) -> bool:
        (wkey, _), need_gpus = top
        need = need_gpus - self.free
        victims, freed = [], 0
        while freed < need and self.running:
            entry = self.running[0]
            jid = entry[1]
            if self.state[jid] != RUNNING or entry[2] != self.ver[jid]:
                heapq.heappop(self.running)
                continue
            if not wkey < -entry[0]:
                break
            victims.append(heapq.heappop(self.running))
            freed += self.gpus[jid]
        if freed < need:
            for entry in victims:
                heapq.heappush(self.running, entry)
            return False
        for entry in victims:
            self._preempt(entry[1])
        return True
