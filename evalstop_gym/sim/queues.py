"""The engine's queues: waiting jobs by GPU demand, running jobs by key, and the victim search.

* Waiting jobs sit in one min-heap of ``(key, jid)`` per GPU demand, the
  heaps listed by demand, so the best waiting job that fits ``f`` free GPUs
  is the best root among the heaps of demand ``<= f``.
* A preemptive scheduler's running jobs sit in a max-heap of entries
  ``(negated key, jid, version)``.  An entry is *stale* once its job stopped
  running or was pushed again (a newer version); stale entries stay until
  they reach the root or a compaction drops them.
* With a scheduler whose running keys only shrink (``monotone_key``,
  ``srtf-est``), a checkpoint does not push a new entry: the job's entry keeps
  its older, larger key and the job is flagged in ``_key_stale``.  Every key in
  the heap is then at least its job's key, so once the root holds its job's
  key it is the worst running job (ties by job id, as before): the victim
  search corrects the root in place until it does, and the read-only walk
  checks the flagged jobs' keys.  Victims come in the same order as with an
  entry per checkpoint, and the heap no longer grows by one entry per
  checkpoint of every running job (what made a big cluster's runs slower per
  unit of work: allocations, compactions and a deeper heap).
* A scheduling pass starts waiting jobs in key order while they fit, then
  preempts the worst-keyed running jobs for the best waiting one if freeing
  strictly worse-keyed jobs makes room (ties never thrash).

Keys are floats or tuples (totally ordered, as the heaps assume); a
running-heap entry holds :func:`negate_key` of the key.

:class:`JobQueues` holds these methods for :class:`~evalstop_gym.sim.engine.Simulator`
(a mixin on the same instance: no indirection on the hot path); the module
functions serve the pooled engine's per-pool heaps too.
"""

from __future__ import annotations

import heapq
import math
from typing import Any

from .job import RUNNING, WAITING

#: A running-heap entry: (negated key, job id, version).
RunEntry = tuple[Any, int, int]


def negate_key(key: Any) -> Any:
    """Negate a key (or each element of a tuple key) for a max-heap.

    Where it runs per entry or per checkpoint it is written out as
    ``-key if type(key) is float else negate_key(key)``: the same value, and a float
    key (most schedulers') then costs no call.
    """
    return tuple(-x for x in key) if isinstance(key, tuple) else -key


def live_entries(running: list[RunEntry], state: list[int], run_ver: list[int]) -> list[RunEntry]:
    """The entries of a running heap whose job runs and which are its latest, as a heap.

    The pop order of the live entries does not change (entries are unique).
    """
    live = [e for e in running if state[e[1]] == RUNNING and e[2] == run_ver[e[1]]]
    heapq.heapify(live)
    return live


def take_victims(
    running: list[RunEntry],
    wkey: Any,
    need: int,
    state: list[int],
    run_ver: list[int],
    gpus: list[int],
    key_stale: list[bool] | None = None,
    run_key: list[Any] | None = None,
) -> list[int] | None:
    """Pop the running jobs keyed strictly worse than ``wkey``, worst first, until they free ``need``.

    Returns their ids (``[]`` when ``need <= 0``), or None when all of them
    would free fewer: then the popped live entries are pushed back (only the
    stale ones met on the way are dropped).  With ``key_stale`` (and the jobs'
    current keys ``run_key``), a flagged job's entry at the root is first
    corrected to its current key (see the module docstring).
    """
    victims: list[RunEntry] = []
    freed = 0
    while freed < need and running:
        entry = running[0]
        jid = entry[1]
        if state[jid] != RUNNING or entry[2] != run_ver[jid]:
            heapq.heappop(running)  # stale entry
            continue
        if key_stale is not None and key_stale[jid]:
            _correct_root(running, entry, key_stale, run_key)  # type: ignore[arg-type]
            continue
        # Preempt only for a strictly better key: ties never thrash.
        k = entry[0]
        if not wkey < (-k if type(k) is float else negate_key(k)):
            break
        victims.append(heapq.heappop(running))
        freed += gpus[jid]
    if freed < need:
        for entry in victims:
            heapq.heappush(running, entry)
        return None
    return [entry[1] for entry in victims]


def _correct_root(
    running: list[RunEntry], entry: RunEntry, key_stale: list[bool], run_key: list[Any]
) -> None:
    """Give the root ``entry`` (live, flagged) its job's current key, keeping the heap a heap."""
    jid = entry[1]
    key_stale[jid] = False
    key = run_key[jid]
    heapq.heapreplace(running, (-key if type(key) is float else negate_key(key), jid, entry[2]))


class JobQueues:
    """The waiting heaps, the running max-heap and the scheduling pass of the engine.

    A mixin of :class:`~evalstop_gym.sim.engine.Simulator`: it reads the
    engine's job columns (``_state``, ``_gpus``, ``_views``, ``_run_ver``) and
    calls its state changes (``_start``, ``_preempt``, and
    ``_preempt_deprioritized`` of :mod:`~evalstop_gym.sim.deprioritize`).
    """

    _state: list[int]
    _gpus: list[int]
    _views: list[Any]
    _run_ver: list[int]
    _run_key: list[Any]
    _key_stale: list[bool]
    _lean_passes: bool
    demoted: dict[int, Any]
    scheduler: Any
    preemptive: bool
    free: int

    def _init_queues(self) -> None:
        """Empty queues."""
        self._waiting: dict[int, list[tuple[Any, int]]] = {}
        #: (GPU demand, its waiting heap) for every demand seen, by demand: the scan of
        #: the best waiting job reads the heaps without a dict lookup each.
        self._queues: list[tuple[int, list[tuple[Any, int]]]] = []
        self._n_waiting = 0
        # Cache of the best waiting (key, jid); None with a valid flag means none waits.
        self._top: tuple[Any, int] | None = None
        self._top_valid = True
        self._running: list[RunEntry] = []  # max-heap by key (preemptive only)
        self._compact_at = 64  # compact the running heap past this many entries

    def _enqueue(self, jid: int) -> None:
        self._state[jid] = WAITING
        d = self._gpus[jid]
        q = self._waiting.get(d)
        if q is None:
            q = self._waiting[d] = []
            self._queues.append((d, q))
            self._queues.sort()  # demands are distinct: the heaps are never compared
        entry = (self.scheduler.key(self._views[jid]), jid)
        heapq.heappush(q, entry)
        self._n_waiting += 1
        if self._top_valid and (self._top is None or entry < self._top):
            self._top = entry

    def _waiting_top(self) -> tuple[Any, int]:
        """The best waiting (key, jid) of any size (cached until a waiting job leaves)."""
        best = self._best_waiting(math.inf)
        assert best is not None
        self._top, self._top_valid = best[0], True
        return best[0]

    def _best_waiting(self, max_gpus: float) -> tuple[tuple[Any, int], int] | None:
        """The best waiting (key, jid) needing at most ``max_gpus`` GPUs, and its demand."""
        best: tuple[Any, int] | None = None
        best_d = 0
        for d, q in self._queues:
            if d > max_gpus:
                break
            if q and (best is None or q[0] < best):
                best, best_d = q[0], d
        return None if best is None else (best, best_d)

    def _push_running(self, jid: int) -> Any:
        """Record a running job's current key in the max-heap of running jobs; return the key."""
        ver = self._run_ver[jid] = self._run_ver[jid] + 1
        key = self._run_key[jid] = self.scheduler.key(self._views[jid])
        self._key_stale[jid] = False  # the new entry holds the current key
        running = self._running
        heapq.heappush(running, (-key if type(key) is float else negate_key(key), jid, ver))
        if len(running) > self._compact_at:
            self._compact_running()
        return key

    def _compact_running(self) -> None:
        """Drop stale entries of the running heap (its pop order does not change)."""
        self._running = live_entries(self._running, self._state, self._run_ver)
        self._compact_at = 4 * len(self._running) + 64

    def _schedule(self) -> None:
        """Start waiting jobs in key order while they fit; preempt if allowed."""
        waiting = self._waiting
        while self._n_waiting:
            while self.free > 0 and self._n_waiting:
                best = self._best_waiting(self.free)
                if best is None:
                    break
                heapq.heappop(waiting[best[1]])
                self._n_waiting -= 1
                self._top_valid = False
                self._start(best[0][1])
            if self.demoted and self._n_waiting and self._preempt_deprioritized():
                continue
            if not self.preemptive or not self._n_waiting:
                return
            if not self._preempt_for_best_waiting():
                return

    def _preempt_for_best_waiting(self) -> bool:
        """Preempt the worst-keyed running jobs for the best waiting one, if enough can go."""
        wkey, wjid = self._top if self._top_valid else self._waiting_top()
        need = self._gpus[wjid] - self.free
        if self._lean_passes and need > 0 and not self._victims_suffice(wkey, need):
            return False
        victims = take_victims(
            self._running,
            wkey,
            need,
            self._state,
            self._run_ver,
            self._gpus,
            self._key_stale,
            self._run_key,
        )
        if victims is None:
            return False
        for jid in victims:
            self._preempt(jid)
        return True

    def _victims_suffice(self, wkey: Any, need: int, running: list[RunEntry] | None = None) -> bool:
        """Whether the pops of :meth:`_preempt_for_best_waiting` would free ``need`` > 0 GPUs.

        Decided before popping anything: a failed preemption pass popped its
        first victim and pushed it back (most of a big cluster's failed passes
        are such: a multi-GPU job waits behind few worse-keyed ones).  The
        stale entries at the root go as the pops would drop them (the pop order
        of the rest does not depend on the heap's arrangement: entries are
        unique); then the root alone decides when it is not worse or frees
        enough, else the read-only walk of :meth:`_worse_running_cover` does.
        ``running`` is the heap to read (default the engine's; the pooled engine
        passes a pool's).
        """
        if running is None:
            running = self._running
        state, run_ver, key_stale = self._state, self._run_ver, self._key_stale
        while running:
            entry = running[0]
            jid = entry[1]
            if state[jid] == RUNNING and entry[2] == run_ver[jid]:
                if not key_stale[jid]:
                    break
                _correct_root(running, entry, key_stale, self._run_key)
                continue
            heapq.heappop(running)  # stale entry
        else:
            return False
        k = entry[0]
        if not wkey < (-k if type(k) is float else negate_key(k)):
            return False  # the worst running job is not worse: no pass can preempt
        return self._gpus[jid] >= need or self._worse_running_cover(wkey, need, running)

    def _worse_running_cover(
        self, wkey: Any, need: int, running: list[RunEntry] | None = None
    ) -> bool:
        """Whether the running jobs keyed strictly worse than ``wkey`` hold ``need`` GPUs or more.

        Read from the running heap without changing it: the entries keyed
        strictly worse form a subtree at its root (a child's key is never worse
        than its parent's), so a walk of that subtree finds them, live or
        stale, and stops at its border (keys are totally ordered, as the heaps
        already assume).  ``running`` as in :meth:`_victims_suffice`.
        """
        if running is None:
            running = self._running
        state, run_ver, gpus = self._state, self._run_ver, self._gpus
        key_stale, run_key = self._key_stale, self._run_key
        n = len(running)
        freed = 0
        stack = [0] if n else []
        pop, push = stack.pop, stack.append
        while stack:
            i = pop()
            entry = running[i]
            k = entry[0]
            if not wkey < (-k if type(k) is float else negate_key(k)):
                continue  # neither it nor anything below it is worse
            jid = entry[1]
            # A flagged job's entry may be worse than the job now is (never better).
            if (
                state[jid] == RUNNING
                and entry[2] == run_ver[jid]
                and (not key_stale[jid] or wkey < run_key[jid])
            ):
                freed += gpus[jid]
                if freed >= need:
                    return True
            i = 2 * i + 1
            if i < n:
                push(i)
                if i + 1 < n:
                    push(i + 1)
        return False
