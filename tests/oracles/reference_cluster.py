"""FROZEN REFERENCE, never edited with the code: EvalStopCluster-v0's observation and
``per_job_actions`` as written before the buffers were reused.

Kept verbatim (as functions of the env) as the reference the incremental version is
tested against (``tests/envs/test_cluster_observations.py``): two fresh buffers and a
loop over every slot at each step.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from evalstop_gym.envs.cluster import SLOT_FIELDS


def observe(env) -> dict[str, np.ndarray]:
    """The observation of the cluster now (zeros once the episode is over)."""
    core, n = env.core, env.max_jobs
    sim, layout = core.sim, core.layout
    assert sim is not None
    head = np.zeros(2 + len(SLOT_FIELDS) * n, np.float32)
    slots = head[2:].reshape(len(SLOT_FIELDS), n)
    rows = np.zeros((n, layout.width), np.float32)
    obs = {"free_gpus": head[0:1], "queue_length": head[1:2]}
    obs.update(zip(SLOT_FIELDS, slots))
    obs.update((f, rows[:, s]) for f, s in layout.field_slices)
    if core.jid is None:
        return obs
    running, waiting = sim.jobs_in_system()
    head[0], head[1] = sim.free, len(waiting)
    epoch = env._epoch
    deciding = set(epoch)
    order = [*epoch, *(j for j in running if j not in deciding), *waiting][:n]
    m, k = len(order), min(len(epoch), n)
    slots[0, :m] = 1.0
    slots[1, :k] = 1.0
    slots[2, : min(len(running), m)] = 1.0  # deciding jobs run, and come first
    if sim.demoted:
        slots[3, :m] = [jid in sim.demoted for jid in order]
    gpus, types = sim.batch.gpus, sim.batch.job_type
    slots[4, :m] = gpus[order]
    for slot, jid in enumerate(order):
        ckpt = sim.checkpoints_done(jid) + (0 < slot < k)
        if ckpt:
            rows[slot] = core.row(jid, ckpt)
        elif env._type_col >= 0:
            rows[slot, env._type_col + types[jid]] = 1.0
    return obs


def per_job_actions(
    obs: Mapping[str, np.ndarray], act: Callable[[dict[str, np.ndarray]], int]
) -> np.ndarray:
    """A cluster action from a per-job stopper: ``act`` on each deciding slot's own observation."""
    n = len(obs["decide"])
    out = np.zeros(n, dtype=np.int64)
    fields = [k for k in obs if k not in SLOT_FIELDS and k not in ("free_gpus", "queue_length")]
    for slot in np.flatnonzero(obs["decide"] > 0.5):
        out[slot] = int(act({f: obs[f][slot] for f in fields}))
    return out
