"""The simulator on a heterogeneous cluster of typed GPU pools (``SimConfig(pools=...)``).

:class:`PooledSimulator` is the :class:`~evalstop_gym.sim.engine.Simulator`
with per-pool GPU accounting; :func:`~evalstop_gym.sim.make_simulator` (and
``Simulator(config)``) builds one whenever the config has pools.  What changes (see :mod:`evalstop_gym.sim.pools`):

* GPUs are free or busy *per pool*; a job is gang-allocated inside one pool.
* A waiting job starts on the first pool with room in its scheduler's
  :meth:`~evalstop_gym.sim.schedulers.Scheduler.pool_order`; the choice of
  *which* waiting job starts next is the base scheduler's key, exactly as on
  one pool (a waiting job is eligible when some pool has room for its gang).
* A preemptive scheduler preempts, for the best waiting job, the worst-keyed
  running jobs of one pool (the first pool in the job's order where freeing
  strictly worse-keyed jobs makes room), never across pools.
* On a pool of speed ``s`` work advances at rate ``s``: the next checkpoint
  is ``(work at it - work done) / s`` wall-clock hours away, and a preempted
  job banks ``s x`` the hours it ran; checkpoint ``i`` sets the work done to
  exactly ``duration x i / K``, so restarts on other pools accumulate no drift.

The homogeneous hot path stays in the base class untouched; one pool of the
reference GPU (speed 1) reproduces the plain simulator bit for bit (a test).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from .config import SimConfig
from .engine import Event, Simulator
from .pools import Pool, choices_for
from .queues import RunEntry, live_entries, negate_key, take_victims
from .schedulers import Scheduler

# The base class's methods the overrides extend, called at every start, preemption and
# end: as module globals, which CPython caches, not through super() (an object built
# and the class order walked at each call) nor Simulator.<name> (a class attribute
# lookup CPython 3.11 does not specialise).
_base_decide = Simulator.decide
_base_start = Simulator._start
_base_preempt = Simulator._preempt
_base_finish_job = Simulator._finish_job


@dataclass(frozen=True)
class PoolEvent(Event):
    """An event of a pooled cluster: also the job's pool and every pool's free GPUs."""

    pool: int  # the job's pool index (-1 if it holds none)
    pool_free: tuple[int, ...]


class PooledSimulator(Simulator):
    """One episode on typed GPU pools; see the module docstring.

    Attributes:
        pools: The cluster's pools, in the configured order.
    """

    def __init__(self, config: SimConfig, seed: int | None = None, **kwargs: Any) -> None:
        """Build the episode (as :class:`Simulator`) and the per-pool state."""
        pools = config.resolved_pools()
        if pools is None:
            raise ConfigError("pools", None, "a dict of GPU type -> GPU count for PooledSimulator")
        self.pools: tuple[Pool, ...] = pools
        super().__init__(config, seed, **kwargs)
        largest = max(p.size for p in pools)
        if len(self._gpus) and max(self._gpus) > largest:
            jid = max(range(len(self._gpus)), key=self._gpus.__getitem__)
            raise ConfigError(
                "pools",
                config.pools,
                f"a pool of at least {self._gpus[jid]} GPUs (job {jid} asks for that many; "
                "a gang never spans pools)",
            )
        n = len(self._gpus)
        self._pool_free = [p.size for p in pools]
        self._pool_of = [-1] * n  # the pool a job runs on, -1 when it holds none
        # Pools of speed 1 for every job type (the reference GPU, A100s): work advances
        # with the clock as on the homogeneous cluster, so None skips the divisions and
        # products by 1.0 (exact: x / 1.0 == x * 1.0 == x).
        unit = all(s == 1.0 for p in pools for s in p.speeds)
        self._rates = None if unit else [1.0] * n
        # With one pool its free GPUs are the cluster's (``free``): no max over pools.
        self._one_pool = len(pools) == 1
        self._choices = [choices_for(pools, t) for t in range(len(pools[0].speeds))]
        #: Each job's pool order: with the base class's placement rule, which reads only
        #: the pools as the job's type sees them, one per (job type, GPUs), all known
        #: before the first arrival; else asked at the job's first placement.
        self._order: list[tuple[int, ...] | None]
        if type(self.scheduler).pool_order is Scheduler.pool_order:
            kinds = list(zip(self._type, self._gpus))
            shared = {kind: self._ask_order(None, *kind) for kind in set(kinds)}
            self._order = list(map(shared.__getitem__, kinds))
        else:
            self._order = [None] * n
        self._pool_running: list[list[RunEntry]] = [[] for _ in pools]
        self._pool_compact_at = [64] * len(pools)
        self._hours_at_start = [0.0] * n  # a job's GPU-hours when it last started
        #: GPU-hours each pool delivered (wall clock), accumulated as jobs leave it.
        self.pool_gpu_hours = [0.0] * len(pools)

    # ---------------------------------------------------------------- public
    @property
    def pool_free(self) -> tuple[int, ...]:
        """Free GPUs of each pool, in the configured order."""
        return tuple(self._pool_free)

    def pool_of(self, jid: int) -> int:
        """Index of the pool job ``jid`` runs on (-1 if it is not running)."""
        return self._pool_of[jid]

    def decide(self, stop: Any) -> None:
        """Apply the decision for the pending job (as :meth:`Simulator.decide`)."""
        jid = self._pending
        if stop or jid < 0:
            _base_decide(self, stop)  # refuses a missing decision; a stop frees the pool's GPUs
            return
        self._pending = -1
        self.n_decisions += 1
        # _push_next_checkpoint inlined (the same operations, the same bits: next_decision
        # wrote out the work left, and now + 0.0 is now).
        left = self._pending_left
        rates = self._rates
        if rates is not None:
            left = left / rates[jid]  # wall-clock hours on its pool
        self._counter = c = self._counter + 1
        t = self.now + (0.0 if left < 0.0 else left) + self.eval_cost_h
        heapq.heappush(self._heap, (t, c, jid, self._epoch[jid]))
        if self.preemptive:
            old = self._run_key[jid]
            if self._lazy_running:
                # Its key only shrank: the entry in its pool's heap keeps the older key
                # until the victim search meets it at the root (see queues.py).
                key = self._run_key[jid] = self.scheduler.key(self._views[jid])  # type: ignore[arg-type]
                self._key_stale[jid] = True
            else:
                key = self._push_running(jid)
            # Stable before this checkpoint and only this job's key changed (see the base
            # class): a pass can change something only if the best waiting job now beats
            # it, and beat it not before (else the jobs keyed worse than the best waiting
            # one, pool by pool, are the same ones, and held too few GPUs).
            if self._n_waiting:
                top = self._top if self._top_valid else self._waiting_top()
                if top[0] < key and not (top[0] < old and self._lean_passes):
                    self._schedule()

    # ------------------------------------------------------------- internals
    def _job_order(self, jid: int) -> tuple[int, ...]:
        """The pools job ``jid`` may use, in its scheduler's order (asked once per job)."""
        order = self._order[jid]
        if order is None:
            order = self._order[jid] = self._ask_order(
                self._views[jid], self._type[jid], self._gpus[jid]
            )
        return order

    def _ask_order(self, view: Any, job_type: int, g: int) -> tuple[int, ...]:
        """The scheduler's pool order for a job (``view``: None for the base class's rule).

        Checked, completed with the pools left out and cut to pools of at least ``g`` GPUs.
        """
        choices = self._choices[job_type]
        asked = list(self.scheduler.pool_order(view, choices))
        n = len(self.pools)
        if any(not isinstance(p, int) or not 0 <= p < n for p in asked):
            raise ValueError(
                f"{self.scheduler!r}.pool_order returned {asked}: pool indices in [0, {n})"
            )
        ranked = list(dict.fromkeys([*asked, *range(n)]))
        return tuple(p for p in ranked if self.pools[p].size >= g)

    def _arrive(self, jid: int) -> None:
        """A job enters the system (as :meth:`Simulator._arrive`, a fit being a pool's room).

        The lean path of the base class holds pool by pool: before an arrival the
        cluster is stable (no waiting job fits any pool, the best waiting one cannot
        preempt in any pool of its order), so the pass after it starts the newcomer
        if some pool has room for it (on the pool ``_start`` picks), and otherwise
        acts only by preempting for the newcomer, if it is the new best waiting job.
        """
        self._register_arrival(jid)
        if not self._lean_passes:
            self._enqueue(jid)
            self._schedule()
        elif self._gpus[jid] <= (self.free if self._one_pool else max(self._pool_free)):
            self._start(jid)
        else:
            self._enqueue(jid)
            if self._arrival_needs_pass(jid) and self._preempt_for_best_waiting():
                self._schedule()

    def _start(self, jid: int) -> None:
        """Start ``jid`` on the first pool of its order with room for its gang."""
        g = self._gpus[jid]
        free = self._pool_free
        for p in self._order[jid] or self._job_order(jid):
            if free[p] >= g:
                break
        else:
            raise AssertionError(f"job {jid} was started with no pool of {g} free GPUs")
        free[p] -= g
        self._pool_of[jid] = p
        rates = self._rates
        if rates is not None:
            rates[jid] = self.pools[p].speeds[self._type[jid]]
        self._hours_at_start[jid] = self._gpu_hours[jid]
        _base_start(self, jid)

    def _release(self, jid: int) -> None:
        """Give job ``jid``'s GPUs back to its pool (before the base class logs the event)."""
        p = self._pool_of[jid]
        if p >= 0:
            g = self._gpus[jid]
            self._pool_free[p] += g
            # The segment's GPU-hours: those booked at its checkpoints plus the tail since.
            booked = self._gpu_hours[jid] - self._hours_at_start[jid]
            self.pool_gpu_hours[p] += booked + g * (self.now - self._seg_start[jid])
            self._pool_of[jid] = -1

    def _preempt(self, jid: int) -> None:
        """Preempt ``jid``: it banks its pool's speed times the hours it ran."""
        self._release(jid)
        _base_preempt(self, jid)

    def _finish_job(self, jid: int, *, stopped: bool) -> None:
        """End ``jid`` (finished or stopped) and free its pool's GPUs."""
        self._release(jid)
        _base_finish_job(self, jid, stopped=stopped)

    def _log(self, kind: str, jid: int) -> None:
        """Record a :class:`PoolEvent` (with the pools' free GPUs)."""
        if self.events is not None:
            self.events.append(
                PoolEvent(
                    self.now, kind, jid, self.free, self._pool_of[jid], tuple(self._pool_free)
                )
            )

    def _push_running(self, jid: int) -> Any:
        """Record a running job's key in its pool's max-heap of running jobs; return the key.

        A job's latest entry is always in the heap of the pool it runs on (it is
        pushed at each start and checkpoint there), so liveness is the base
        class's: the job runs and the entry is its latest version.
        """
        ver = self._run_ver[jid] = self._run_ver[jid] + 1
        key = self._run_key[jid] = self.scheduler.key(self._views[jid])  # type: ignore[arg-type]
        self._key_stale[jid] = False  # the new entry holds the current key
        p = self._pool_of[jid]
        running = self._pool_running[p]
        heapq.heappush(running, (-key if type(key) is float else negate_key(key), jid, ver))
        if len(running) > self._pool_compact_at[p]:
            live = self._pool_running[p] = live_entries(running, self._state, self._run_ver)
            self._pool_compact_at[p] = 4 * len(live) + 64
        return key

    def _schedule(self) -> None:
        """Start waiting jobs in key order while one fits some pool; preempt if allowed."""
        free, one_pool = self._pool_free, self._one_pool
        while self._n_waiting:
            most = self.free if one_pool else max(free)
            # A full cluster fits nobody: the base class's pass skips the search too.
            best = self._best_waiting(most) if most else None
            if best is not None:
                heapq.heappop(self._waiting[best[1]])
                self._n_waiting -= 1
                self._top_valid = False
                self._start(best[0][1])
                continue
            if not self.preemptive or not self._preempt_for_best_waiting():
                return

    def _preempt_for_best_waiting(self) -> bool:
        """Preempt worst-keyed jobs of one pool for the best waiting job, if enough can go."""
        # The best waiting job of any size, cached as the base class keeps it (a waiting
        # job leaves only by a start, which clears the cache); its demand is its gang.
        wkey, wjid = self._top if self._top_valid else self._waiting_top()
        need_gpus = self._gpus[wjid]
        lean = self._lean_passes
        for p in self._order[wjid] or self._job_order(wjid):
            need = need_gpus - self._pool_free[p]
            running = self._pool_running[p]
            # The base class's read-only check, pool by pool: most attempts fail, and
            # then the pops would only be pushed back (see Simulator._victims_suffice).
            if lean and need > 0 and not self._victims_suffice(wkey, need, running):
                continue
            victims = take_victims(
                running,
                wkey,
                need,
                self._state,
                self._run_ver,
                self._gpus,
                self._key_stale,
                self._run_key,
            )
            if victims:
                for jid in victims:
                    self._preempt(jid)
                return True
        return False

    def _deprioritize(self, jid: int) -> None:
        """Refuse: the pooled engine schedules per pool and has no demoted-job pass yet."""
        raise ConfigError("pools", self.config.pools, "None to deprioritise (not supported yet)")
