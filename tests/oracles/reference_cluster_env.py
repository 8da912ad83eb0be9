"""FROZEN REFERENCE, never edited with the code: ``EvalStopCluster-v0``'s stepping as it
was before its observation was laid out as record views and its per-slot actions read
without a dict per slot.

A verbatim copy (docstrings cut short, rendering and spaces left out) of the env's
``reset``, ``step``, ``_parse_action``, ``_observe``, ``_views``, ``_info`` and of
``per_job_actions``.  ``tests/envs/test_cluster_lockstep.py`` steps it beside the live
env on the same seeds and actions and compares every observation, reward, flag and
``info``.  It drives its own ``EvalStopEnv`` core, as the env does, so nothing but the
engine and the core (shared by both) is common to the two.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from evalstop_gym.envs.evalstop import EvalStopEnv

SLOT_FIELDS: tuple[str, ...] = ("present", "decide", "running", "deprioritized", "gpus")


class ReferenceClusterEnv:
    """The cluster env's dynamics and observation as first optimised (one buffer, views)."""

    def __init__(self, max_jobs: int = 32, **env_kwargs: Any) -> None:
        self.max_jobs = n = int(max_jobs)
        self.inner = EvalStopEnv(deprioritize=True, **env_kwargs)
        self.core = core = self.inner.core
        self.config = self.inner.config
        self._epoch: list[int] = []
        self._type_col = next((a for f, a, _ in core.layout.slices if f == "job_type"), -1)
        self._obs: dict[str, np.ndarray] | None = None
        self._rows_at = 2 + len(SLOT_FIELDS) * n
        self._field_slices = list(core.layout.field_slices)
        self._cuts = [("free_gpus", 0, 1), ("queue_length", 1, 2)] + [
            (f, 2 + i * n, 2 + (i + 1) * n) for i, f in enumerate(SLOT_FIELDS)
        ]
        self._cut_keys = [key for key, _, _ in self._cuts]
        self._cut_slices = [slice(a, b) for _, a, b in self._cuts]
        self._field_keys = [f for f, _ in self._field_slices]
        self._field_index = [(slice(None), s) for _, s in self._field_slices]
        self._job_gpus: list[int] = []
        self._job_types: list[int] = []
        self._buf = np.zeros(self._rows_at + n * core.layout.width, np.float32)
        self._forget()

    def reset(self, *, seed: int | None = None) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        # gym.Env.reset(seed=...) seeds np_random exactly so.
        from gymnasium.utils import seeding

        if seed is not None:
            self.np_random, _ = seeding.np_random(seed)
        self.core.reset_row(self.np_random)
        sim = self.core.sim
        assert sim is not None
        self._epoch = sim.simultaneous_checkpoints()
        self._buf[:] = 0.0
        self._forget()
        self._job_gpus = sim.batch.gpus.tolist()
        self._job_types = sim.batch.job_type.tolist()
        obs = self._observe()
        return obs, self._info(0)

    def step(self, action: Any):
        if self._obs is None:
            raise RuntimeError("step() called before reset(): call env.reset() first")
        if not self._epoch:
            raise RuntimeError("step() called after the episode ended: call env.reset()")
        act = self._parse_action(action)
        decisions = dict(zip(self._epoch[: self.max_jobs], act))
        core, total, n = self.core, 0.0, 0
        while core.jid is not None and core.jid in decisions:
            a = decisions.pop(core.jid)
            _, reward = core.step_row(a if a == 2 else a == 1)
            total += reward
            n += 1
        sim = core.sim
        assert sim is not None
        self._epoch = sim.simultaneous_checkpoints()
        info = self._info(n)
        obs = self._observe()
        if core.jid is None:
            info["episode_metrics"] = core.info_metrics()
            return obs, total, True, False, info
        return obs, total, False, False, info

    def _parse_action(self, action: Any) -> list[int]:
        arr = np.asarray(action)
        if arr.shape != (self.max_jobs,) or arr.dtype.kind not in "iu":
            raise ValueError(f"action={action!r} is not allowed")
        values = arr.tolist()
        if values and (min(values) < 0 or max(values) > 2):
            raise ValueError(f"action={action!r} is not allowed")
        return values

    def _observe(self) -> dict[str, np.ndarray]:
        core, n = self.core, self.max_jobs
        sim = core.sim
        assert sim is not None
        buf = self._buf
        if core.jid is None:
            buf[:] = 0.0
            self._forget()
            return self._views(buf.copy())
        running, waiting = sim.jobs_in_system()
        epoch = self._epoch
        order = None
        if len(epoch) == 1:
            first = epoch[0]
            try:
                i = running.index(first)
            except ValueError:
                pass
            else:
                order = [first, *running[:i], *running[i + 1 :], *waiting]
        if order is None:
            deciding = set(epoch)
            order = [*epoch, *[j for j in running if j not in deciding], *waiting]
        del order[n:]
        m, k = len(order), min(len(epoch), n)
        slots = buf[2 : self._rows_at].reshape(len(SLOT_FIELDS), n)
        rows = buf[self._rows_at :].reshape(n, -1)
        buf[0], buf[1] = sim.free, len(waiting)
        counts = (m, k, min(len(running), m))
        if counts != self._counts:
            for i, (c, was) in enumerate(zip(counts, self._counts)):
                if c > was:
                    slots[i, was:c] = 1.0
                elif c < was:
                    slots[i, c:was] = 0.0
            self._counts = counts
        if sim.demoted:
            slots[3, :m] = [jid in sim.demoted for jid in order]
            slots[3, m:] = 0.0
            self._demoted_shown = True
        elif self._demoted_shown:
            slots[3] = 0.0
            self._demoted_shown = False
        keys, done, type_col = self._keys, sim.checkpoints_done, self._type_col
        gpus_of, type_of, gpus = self._job_gpus, self._job_types, slots[4]
        if k <= 1:
            new = [(jid << 20) | done(jid) for jid in order]
        else:
            new = [(jid << 20) | (done(jid) + (0 < s < k)) for s, jid in enumerate(order)]
        changed = [s for s, (was, key) in enumerate(zip(keys, new)) if was != key]
        for slot in changed:
            key = new[slot]
            jid, ckpt = key >> 20, key & 0xFFFFF
            if keys[slot] >> 20 != jid:
                gpus[slot] = gpus_of[jid]
            keys[slot] = key
            if ckpt:
                rows[slot] = core.row(jid, ckpt)
            else:
                rows[slot] = 0.0
                if type_col >= 0:
                    rows[slot, type_col + type_of[jid]] = 1.0
        if self._shown > m:
            rows[m : self._shown] = 0.0
            gpus[m : self._shown] = 0.0
            keys[m : self._shown] = [-1] * (self._shown - m)
        self._shown = m
        return self._views(buf.copy())

    def _forget(self) -> None:
        n = self.max_jobs
        self._keys = [-1] * n
        self._counts = (0, 0, 0)
        self._shown = 0
        self._demoted_shown = False

    def _views(self, flat: np.ndarray) -> dict[str, np.ndarray]:
        obs = dict(zip(self._cut_keys, map(flat.__getitem__, self._cut_slices)))
        rows = flat[self._rows_at :].reshape(self.max_jobs, -1)
        obs.update(zip(self._field_keys, map(rows.__getitem__, self._field_index)))
        self._obs = obs
        return obs

    def _info(self, n_decided: int) -> dict[str, Any]:
        info = self.core.info()
        del info["time_h"]
        info["epoch_jobs"] = len(self._epoch)
        info["decided"] = n_decided
        return info


def per_job_actions(
    obs: Mapping[str, np.ndarray], act: Callable[[dict[str, np.ndarray]], int]
) -> np.ndarray:
    """``per_job_actions`` as it was: a dict per deciding slot."""
    decide = obs["decide"]
    out = np.zeros(len(decide), dtype=np.int64)
    fields = _job_fields(tuple(obs))
    columns = [obs[f] for f in fields]
    for slot in [s for s, d in enumerate(decide.tolist()) if d > 0.5]:
        out[slot] = int(act(dict(zip(fields, [c[slot] for c in columns]))))
    return out


@functools.lru_cache(maxsize=64)
def _job_fields(keys: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(k for k in keys if k not in SLOT_FIELDS and k not in ("free_gpus", "queue_length"))
