"""The episode: its seed checked, its jobs and curves drawn (or read), laid out as columns.

:func:`check_seed` refuses a seed NumPy would refuse; :class:`EpisodeDraw` draws the
jobs (synthetic workload or trace replay) and their curves on independent streams of
the seed, and lays the jobs out as per-job columns (:func:`doubles`, :func:`filled`).
"""

from __future__ import annotations

import math
from array import array
from typing import Any

import numpy as np

from ...errors import ConfigError, is_integer
from ..checkpoints import checkpoint_tables
from ..job import PENDING, SchedulingView
from ..synthetic_curves import Curves, sample_curves
from ..traces import trace_jobs
from ..workloads import JobBatch, generate_jobs


def doubles(values: np.ndarray) -> array[float]:
    """A per-job float column: ``values`` as an array of doubles (the same bits)."""
    return array("d", np.ascontiguousarray(values, dtype=np.float64).tobytes())


def filled(n: int, value: float) -> array[float]:
    """A per-job float column of ``n`` copies of ``value``."""
    return array("d", (value,)) * n


#: Seeds are below 2**128, the size of the entropy a fresh :class:`numpy.random.SeedSequence` draws.
SEED_LIMIT = 2**128


def check_seed(seed: Any, field: str = "seed") -> None:
    """Refuse a seed NumPy would refuse (or take by accident, a bool) with a :class:`ConfigError`.

    Allowed: None (fresh entropy), a non-negative Python or NumPy integer below
    :data:`SEED_LIMIT`, or a non-empty list or tuple of those (a
    :class:`~numpy.random.SeedSequence` entropy).
    """
    if seed is None:
        return
    values = seed if isinstance(seed, list | tuple) and seed else (seed,)
    for v in values:
        if not is_integer(v) or not 0 <= v < SEED_LIMIT:
            raise ConfigError(
                field, seed, "None, an integer in [0, 2**128) or a non-empty list of them"
            )


class EpisodeDraw:
    """The episode's draw and its per-job columns.

    A mixin of :class:`~evalstop_gym.sim.engine.Simulator`: it reads the
    engine's configuration (``config``, ``num_gpus``, ``calibration``,
    ``eval_noise``) and sets the episode's columns and tables.
    """

    def _draw_episode(self, seed: int | None) -> tuple[JobBatch, Curves]:
        """Draw the jobs and their curves from the configured workload."""
        config = self.config
        # Independent streams: the job mix does not move when the noise level
        # changes, and the noise draws are shared across noise levels.
        # SeedSequence(seed).spawn(3), each child built directly (spawn builds the
        # parent's pool first); with no seed, the children share fresh entropy.
        entropy = np.random.SeedSequence().entropy if seed is None else seed
        ss_jobs, ss_curves, ss_noise = (
            np.random.SeedSequence(entropy, spawn_key=(i,)) for i in range(3)
        )
        batch = self._make_batch(np.random.default_rng(ss_jobs))
        curves = sample_curves(
            batch,
            self.calibration,
            self.eval_noise,
            np.random.default_rng(ss_curves),
            np.random.default_rng(ss_noise),
        )
        if config.curves is not None:
            from ..real_curves import apply_real_curves

            ss_real, ss_real_noise = ss_curves.spawn(2)
            apply_real_curves(
                curves,
                batch,
                config.curves,
                self.eval_noise,
                np.random.default_rng(ss_real),
                np.random.default_rng(ss_real_noise),
                config,
            )
        return batch, curves

    def _init_columns(self) -> None:
        """One list (or array of doubles) per job field, indexed by job id."""
        b, c = self.batch, self.curves
        n = len(b)
        self.n_ckpt = c.obs_eval.shape[1]
        self._type: list[int] = b.job_type.tolist()
        self._gpus: list[int] = b.gpus.tolist()
        # The float columns are arrays of doubles, not lists of float objects: a read
        # then touches one cache line instead of the list's slot and the float it points
        # to (a big cluster's per-job state no longer fits the per-core cache).
        self._arrival = doubles(b.arrival_h)
        self._duration = doubles(b.duration_h)
        self._estimate = doubles(b.estimate_h)
        # What schedulers learn, one a checkpoint: job j's loss at checkpoint i is at
        # j * K + i.  One flat array of doubles, not a list per job (which made every
        # young collection while it was built walk the list of rows) nor a tuple of
        # floats: the episode is built and freed without making or freeing K floats
        # per job, and a read touches the array alone (the checkpoints read a few).
        self._loss = doubles(c.loss.ravel())
        # The evals, declines and losses for JobViews as flat tuples, built on the first
        # view (callers such as the env never need them).
        self._view_rows: tuple[tuple[float, ...], tuple[int, ...], tuple[float, ...]] | None = None
        # Policy-independent per-checkpoint bookkeeping, tabulated (see checkpoints.py).
        #: (n, K) best observed checkpoint after each checkpoint, and (n, K) consecutive
        #: eval declines after each checkpoint.
        self.best_observed, self.declines = checkpoint_tables(c.obs_eval)
        self._state = [PENDING] * n
        self._work = filled(n, 0.0)  # hours run so far
        self._seg_start = filled(n, 0.0)  # start of the current run segment
        self._ckpt = [0] * n  # checkpoints done
        self._epoch = [0] * n  # invalidates a preempted segment's checkpoint event
        self._run_ver = [0] * n  # invalidates stale entries of the running heap
        self._first_start = filled(n, math.nan)
        self._finish = filled(n, math.nan)
        self._stopped = [False] * n
        self._preemptions = [0] * n
        self._gpu_hours = filled(n, 0.0)
        self._views: list[SchedulingView | None] = [None] * n  # created at arrival
        self._run_key: list[Any] = [None] * n  # its current key while it runs (preemptive)
        # Whether its running-heap entry may hold an older, larger key (see queues.py).
        self._key_stale = [False] * n
        # With a restore cost: the time from which a run segment makes progress (its
        # start plus the restore); -inf otherwise, so that it never matters.
        self._work_from = filled(n, -math.inf)

    def _make_batch(self, rng: np.random.Generator) -> JobBatch:
        """Draw the jobs (synthetic workload) or read them (trace replay)."""
        cfg = self.config
        if cfg.trace is None:
            return generate_jobs(cfg.resolved_workload(), self.num_gpus, rng)
        wl = cfg.resolved_workload()
        return trace_jobs(
            cfg.trace,
            self.num_gpus,
            rng,
            cluster=cfg.trace_cluster,
            n_jobs=cfg.n_jobs,
            hack_fraction=wl.hack_fraction,
            estimate_log_sd=wl.estimate_log_sd,
        )
