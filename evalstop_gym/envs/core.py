"""What every env class steps: one episode's core, and the layout of its observation rows.

:class:`EpisodeCore` holds an episode of the simulator together with its
per-episode tables (observation rows, rewards): ``reset_row`` draws an episode
and returns the first observation row, ``step_row`` applies a decision and
returns the next row and the reward.  A row is one float32 vector, the
observed fields side by side as :class:`ObservationLayout` places them.
The reward is its mode's object (:mod:`evalstop_gym.envs.rewards`).
``EvalStopEnv`` (the Gymnasium face), the batched ``EvalStopVectorEnv`` and the
epoch-stepping ``EvalStopClusterEnv`` all drive cores, so the dynamics exist
once.  The core knows no Gymnasium API beyond the observation space its
layout describes.

The simulator is read only through :data:`SIMULATOR_SURFACE` (checked by
``tests/envs/test_tables.py``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import numpy as np
from gymnasium import spaces

from ..sim.boundary import BOUNDARY_FIELDS
from ..sim.engine import Simulator
from ..sim.metrics import METRIC_KEYS, EpisodeRecord, cluster_metrics, episode_metrics
from ..sim.signals import SIGNAL_BOUND, SIGNAL_FIELDS, signal_rows
from ..sim.workloads import JOB_TYPES
from .config import EvalStopConfig
from .rewards import Reward, make_reward
from .tables import field_widths, new_table, observation_rows, write_constant_columns

_EVAL_BOUND = 10.0
_LOSS_BOUND = 10.0
#: (low, high) of the eval and loss windows: the tables clip the values to them.
BOUNDS: dict[str, tuple[float, float]] = {
    "evals": (-_EVAL_BOUND, _EVAL_BOUND),
    "loss": (0.0, _LOSS_BOUND),
}
#: Observation rows are built lazily for blocks of this many jobs, so that a
#: long trace replay does not hold every row of the episode at once.
ROW_BLOCK = 2048

#: The simulator's members the env classes read: its public surface for them.
SIMULATOR_SURFACE: frozenset[str] = frozenset(
    {
        # stepping
        "decide",
        "next_decision",
        "decision_checkpoint",
        "done",
        "simultaneous_checkpoints",
        # the episode's tables, drawn when it is built
        "batch",
        "curves",
        "best_observed",
        "declines",
        "step_frac",
        "deliver_best",
        "n_ckpt",
        # jobs and their outcomes
        "job",
        "finished_since",
        "delivered_checkpoint",
        "work_fraction",
        "checkpoints_done",
        "checkpoints_of",
        "jobs_in_system",
        "demoted",
        "pending_view",
        # the cluster's counters
        "now",
        "free",
        "num_gpus",
        "jobs_area",
        "n_jobs",
        "n_in_system",
        "n_waiting",
        "n_done",
        "n_decisions",
        # metrics
        "metrics",
        "cluster_metrics",
        "record",
        "n_events",
        "restore_gpu_hours",
        "eval_cost_h",
    }
)


class ObservationLayout:
    """Where each observed field sits in an observation row, and the observation space.

    Attributes:
        fields: The observed fields, in row order: the boundary fields (boundary order),
            then the training-side signals asked for (:data:`SIGNAL_FIELDS` order).
        boundary: The boundary fields among them.
        signals: The signals among them.
        window: W, the eval and loss windows' length.
        widths: Field -> its width in a row.
        slices: ``(field, start, stop)`` per field, in row order.
        field_slices: ``(field, slice(start, stop))`` per field, in row order.
        width: The row's length D.
        boundary_width: The boundary fields' columns, the row's first.
        space: The ``Dict`` of float32 ``Box``es of ``EvalStop-v0``.
    """

    def __init__(self, fields: tuple[str, ...], window: int, evals_per_job: int) -> None:
        """The layout of ``fields`` with a W-window, for jobs of K checkpoints."""
        self.fields = fields
        self.boundary = tuple(f for f in fields if f in BOUNDARY_FIELDS)
        self.signals = tuple(f for f in fields if f in SIGNAL_FIELDS)
        self.window = w = window
        widths = field_widths(w, len(JOB_TYPES))
        # A signal is a window as the evals are: the last W values, then their presence.
        self.widths = widths = {**widths, **dict.fromkeys(SIGNAL_FIELDS, 2 * w)}
        slices: list[tuple[str, int, int]] = []
        start = 0
        for f in fields:
            slices.append((f, start, start + widths[f]))
            start += widths[f]
        self.slices: tuple[tuple[str, int, int], ...] = tuple(slices)
        self.width = start
        #: The boundary fields' share of a row (its first columns; the signals follow).
        self.boundary_width = sum(widths[f] for f in self.boundary)
        self.field_slices = tuple((f, slice(a, b)) for f, a, b in slices)
        every = {
            "job_type": spaces.Box(0.0, 1.0, (len(JOB_TYPES),), np.float32),
            "evals": spaces.Box(-_EVAL_BOUND, _EVAL_BOUND, (2 * w,), np.float32),
            "consecutive_declines": spaces.Box(0.0, float(evals_per_job), (1,), np.float32),
            "progress": spaces.Box(0.0, 1.0, (1,), np.float32),
            "loss": spaces.Box(0.0, _LOSS_BOUND, (2 * w,), np.float32),
        }
        signal_space = spaces.Box(
            np.concatenate([np.full(w, -SIGNAL_BOUND), np.zeros(w)]).astype(np.float32),
            np.concatenate([np.full(w, SIGNAL_BOUND), np.ones(w)]).astype(np.float32),
            (2 * w,),
            np.float32,
        )
        every.update((f, signal_space) for f in self.signals)
        self.space = spaces.Dict({f: every[f] for f in fields})

    @classmethod
    def of(cls, config: EvalStopConfig) -> ObservationLayout:
        """The layout an env built from ``config`` observes."""
        sc = config.sim_config
        fields: tuple[str, ...] = config.obs_fields  # type: ignore[assignment]
        return cls(fields, sc.resolved_eval_window(), sc.resolved_calibration().evals_per_job)

    def row_space(self) -> spaces.Box:
        """A row as one ``Box``: the fields' bounds side by side, in row order."""
        lows = np.concatenate([self.space[f].low for f in self.fields])
        highs = np.concatenate([self.space[f].high for f in self.fields])
        return spaces.Box(lows, highs, (self.width,), np.float32)

    def split(self, row: np.ndarray) -> dict[str, np.ndarray]:
        """The observation dict of a row: one view of ``row`` per field."""
        return {f: row[s] for f, s in self.field_slices}


class EpisodeCore:
    """One episode of the simulator with its observation rows and rewards.

    Attributes:
        config: The env's config.
        layout: The observation rows' layout.
        sim: The episode's simulator (None before the first ``reset_row``).
        jid: The job awaiting a decision (None once the episode is over).
        ckpt: Its checkpoints done.
    """

    def __init__(self, config: EvalStopConfig) -> None:
        """A core for episodes of ``config``; ``reset_row`` starts the first one."""
        self.config = config
        self.layout = ObservationLayout.of(config)
        self.sim: Simulator | None = None
        #: The episode's reward (its mode's object, with the return's components).
        self.reward: Reward | None = None
        self._dense = False
        self.jid: int | None = None
        self.ckpt = 0
        self._k = 1  # checkpoints per job K (set with each episode)
        self._blocks: list[np.ndarray | None] = []
        #: Observation tables by block, kept across episodes (see _build_block).
        self._tables: dict[int, np.ndarray] = {}
        #: Whether the metrics carry the cluster metrics (see episode_metrics).
        self._cluster = config.deprioritize or any(config.sim_config.resolved_costs())

    def reset_row(self, np_random: np.random.Generator) -> np.ndarray:
        """Start an episode drawn from ``np_random``; return the first observation row (no copy)."""
        self.reset_sim(np_random)
        return self.row(self.jid, self.ckpt)  # type: ignore[arg-type]

    def reset_sim(self, np_random: np.random.Generator) -> None:
        """Start an episode drawn from ``np_random``, up to its first decision; tabulate nothing.

        Its rows are then :meth:`row`'s (tabulated on first use) or, for a
        table the caller holds, :meth:`tabulate`'s.
        """
        # Every draw of the episode comes from np_random: one integer seeds
        # the simulator's independent streams.
        sim_seed = int(np_random.integers(0, 2**63 - 1))
        # The last episode's objects are freed first, so that the new one's allocations
        # reuse their (recently touched) memory.
        self.sim = self.reward = None
        sim = self.sim = Simulator(self.config.sim_config, sim_seed)
        reward = self.reward = make_reward(self.config, sim)
        self._dense = reward.dense  # read at every step
        self._k = sim.n_ckpt
        self._blocks = [None] * (-(-len(sim.batch) // ROW_BLOCK))
        jid = self.jid = sim.next_decision()
        if jid is None:  # pragma: no cover - every job has >= 1 decision
            raise RuntimeError("the episode has no decision to make")
        self.ckpt = sim.decision_checkpoint
        reward.begin()

    def key(self) -> int:
        """The row the episode shows now as a key of :meth:`step_key` (0 once it is over)."""
        return 0 if self.jid is None else self.jid * self._k + self.ckpt

    def step_key(self, stop: bool | int) -> tuple[int, float]:
        """:meth:`step_row`, with the next row as a key instead of a view, and the reward.

        The key of job j's row after checkpoint c is ``j * K + c`` (at least 1),
        0 at the end of the episode: its place in the table :meth:`tabulate`
        writes, after that table's row of zeros
        (:class:`~evalstop_gym.envs.tables.SharedRows`).
        """
        sim = self.sim
        if sim is None:
            raise RuntimeError("step() called before reset(): call env.reset() first")
        jid = self.jid
        if jid is None:
            raise RuntimeError("step() called after the episode ended: call env.reset()")
        pay = self.reward
        dense = self._dense
        if not dense or stop == 1:
            reward = 0.0  # see step_row
        else:
            reward = pay.continue_value(jid, self.ckpt)  # type: ignore[union-attr]
        sim.decide(stop)
        jid = self.jid = sim.next_decision()
        if not dense:
            reward = pay.collect()  # type: ignore[union-attr]
        if jid is None:
            return 0, reward
        ckpt = self.ckpt = sim.decision_checkpoint
        return jid * self._k + ckpt, reward

    def step_row(self, stop: bool | int) -> tuple[np.ndarray | None, float]:
        """Apply a decision; return the next observation row (no copy; None at the end) and the reward.

        ``stop``: False continue, True stop, 2 deprioritise (plain bools: an
        ``np.bool_`` would make every later comparison slow).
        """
        sim = self.sim
        if sim is None:
            raise RuntimeError("step() called before reset(): call env.reset() first")
        jid = self.jid
        if jid is None:
            raise RuntimeError("step() called after the episode ended: call env.reset()")
        pay = self.reward
        dense = self._dense
        if not dense or stop == 1:
            # A stopped job's value is what earlier decisions already paid.
            reward = 0.0
        else:
            reward = pay.continue_value(jid, self.ckpt)  # type: ignore[union-attr]
        sim.decide(stop)
        jid = self.jid = sim.next_decision()
        if not dense:
            reward = pay.collect()  # type: ignore[union-attr]
        if jid is None:
            return None, reward
        ckpt = self.ckpt = sim.decision_checkpoint
        # row(jid, ckpt), written out: a call per step is a measurable share of the
        # vector env's step.
        block = self._blocks[jid // ROW_BLOCK]
        if block is None:
            block = self._build_block(jid // ROW_BLOCK)
        return block[jid % ROW_BLOCK, ckpt - 1], reward

    def row(self, jid: int, ckpt: int) -> np.ndarray:
        """Job ``jid``'s tabulated observation row after checkpoint ``ckpt`` (a view: copy it)."""
        block = self._blocks[jid // ROW_BLOCK]
        if block is None:
            block = self._build_block(jid // ROW_BLOCK)
        return block[jid % ROW_BLOCK, ckpt - 1]

    def tabulate(self, table: np.ndarray) -> None:
        """Write every observation row of the episode into ``table`` (n, K, D), in place.

        Row ``[j, c - 1]`` is :meth:`row` ``(j, c)``, bit for bit: the same
        tabulation, into a table whose constant columns
        (:func:`~evalstop_gym.envs.tables.write_constant_columns`) are written.
        """
        everyone = slice(None)
        col = self.layout.boundary_width
        self._boundary_rows(everyone, table[:, :, :col])
        for part in self._signal_parts(everyone):
            table[:, :, col : col + part.shape[2]] = part
            col += part.shape[2]

    def write_constant_columns(self, table: np.ndarray) -> None:
        """Write the columns of an (n, K, D) table of rows that no episode changes."""
        layout = self.layout
        write_constant_columns(
            table[:, :, : layout.boundary_width], layout.boundary, layout.window, len(JOB_TYPES)
        )

    def _build_block(self, index: int) -> np.ndarray:
        """Tabulate the observation rows of the index-th block of jobs.

        Into the table of the previous episode's block when its shape fits:
        every row handed out is copied first (by ``step``, ``reset``, the
        vector env's batch), and the columns no episode changes stay written.
        """
        sim = self.sim
        assert sim is not None
        layout = self.layout
        sl = slice(index * ROW_BLOCK, (index + 1) * ROW_BLOCK)
        n, k = sim.curves.obs_eval[sl].shape
        table = self._tables.get(index)
        if table is None or table.shape[:2] != (n, k):
            table = self._tables[index] = new_table(
                layout.boundary, n, k, layout.window, len(JOB_TYPES)
            )
        block = self._boundary_rows(sl, table)
        if layout.signals:
            # Only when asked for: the default rows are the boundary table alone.
            block = np.concatenate([block, *self._signal_parts(sl)], axis=2)
        self._blocks[index] = block
        return block

    def _boundary_rows(self, jobs: slice, out: np.ndarray) -> np.ndarray:
        """The boundary columns of the rows of ``jobs``, written into ``out`` (n, K, width)."""
        sim = self.sim
        assert sim is not None
        layout, c = self.layout, sim.curves
        return observation_rows(
            layout.boundary,
            sim.batch.job_type[jobs],
            sim.declines[jobs],
            c.obs_eval[jobs],
            c.loss[jobs],
            layout.window,
            len(JOB_TYPES),
            BOUNDS,
            out,
        )

    def _signal_parts(self, jobs: slice) -> list[np.ndarray]:
        """Each opt-in signal's columns of the rows of ``jobs`` (n, K, 2 window), in row order."""
        sim = self.sim
        assert sim is not None
        layout = self.layout
        return [
            signal_windows(signal_rows(sim.curves, f, jobs), layout.window) for f in layout.signals
        ]

    def info(self) -> dict[str, Any]:
        """A step's ``info``: the cluster's clock and counters."""
        sim = self.sim
        assert sim is not None
        # The simulator keeps these as Python float and ints: no conversion needed.
        return {
            "time_h": sim.now,
            "free_gpus": sim.free,
            "jobs_in_system": sim.n_in_system,
            "jobs_done": sim.n_done,
            "decisions": sim.n_decisions,
        }

    def info_metrics(self) -> dict[str, float]:
        """``episode_metrics()`` without its undefined (None) entries: what ``info`` carries.

        At the episode's end (every episode's end in the vector env) built directly,
        without the dict of None entries :meth:`episode_metrics` makes first: the same
        keys in the same order (an undefined metric is NaN in the simulator's metrics).
        """
        sim = self.sim
        if sim is None or not sim.done:
            return {k: v for k, v in self.episode_metrics().items() if v is not None}
        m = {k: v for k, v in self._ended_metrics() if v == v}
        self._add_return(m)
        return m

    def episode_metrics(self) -> dict[str, float | None]:
        """Metrics of the episode, plus the return's components; so far, mid-episode.

        The same keys every episode; an undefined metric (NaN in the
        simulator's metrics) is None.  ``info["episode_metrics"]`` is this
        without the None entries.  Before the episode's end (a truncated
        episode) the metrics are those of the jobs that have ended (finished
        or stopped) so far, ``n_jobs`` counting them; the cluster's counters
        and the return's components are those so far.
        """
        sim = self.sim
        if sim is None:
            raise RuntimeError("episode_metrics() called before reset(): call env.reset() first")
        if not sim.done:
            m = _metrics_so_far(sim, self._cluster)
        else:
            m = {k: None if v != v else v for k, v in self._ended_metrics()}
        self._add_return(m)
        return m

    def _ended_metrics(self) -> Iterator[tuple[str, float]]:
        """The ended episode's simulator metrics, NaN where undefined, then the cluster's.

        The cluster's only where the env carries them: they come with the features they
        measure, and the default env's metrics keep the paper's keys and the return's
        parts.  (The golden fixture compares only the keys it stored: it does not pin this.)
        """
        assert self.sim is not None
        yield from self.sim.metrics().items()
        if self._cluster:
            yield from self.sim.cluster_metrics().items()

    def _add_return(self, m: dict[str, Any]) -> None:
        """Add the return's components and the return to the metrics ``m``."""
        assert self.reward is not None
        parts = self.reward.parts()
        for k, v in parts.items():
            m[f"return_{k}"] = float(v)
        m["return"] = float(sum(parts.values()))


def signal_windows(values: np.ndarray, window: int) -> np.ndarray:
    """(n, K, 2W) float32: after checkpoint i, the last W values of each row and their presence.

    ``values`` (n, K), NaN where a job has no such signal.  The layout of the eval window
    (``[values..., mask...]``, oldest first, zeros before the first checkpoint), with the
    mask also 0 where the value is absent; values clipped to +-:data:`SIGNAL_BOUND`.
    """
    n, k = values.shape
    present = ~np.isnan(values)
    padded = np.zeros((2, n, window + k), dtype=np.float32)
    padded[0, :, window:] = np.clip(np.where(present, values, 0.0), -SIGNAL_BOUND, SIGNAL_BOUND)
    padded[1, :, window:] = present
    # Row c - 1 (after checkpoint c) is slots c .. c + W - 1 of the padded series.
    views = np.lib.stride_tricks.sliding_window_view(padded, window, axis=2)[:, :, 1 : k + 1]
    return np.concatenate([views[0], views[1]], axis=2)


def _metrics_so_far(sim: Simulator, cluster: bool) -> dict[str, float | None]:
    """The finished episode's metric keys over the jobs that have ended so far.

    ``cluster``: add the cluster metrics too (over the same jobs; the restore
    GPU-hours are the cluster's so far).
    """
    record = sim.record()
    ended = ~np.isnan(record.finish)
    per_job = {
        f.name: getattr(record, f.name)[ended]
        for f in dataclasses.fields(EpisodeRecord)
        if f.name not in ("num_gpus", "n_ckpt")
    }
    sub = dataclasses.replace(record, **per_job)
    if ended.any():
        raw = episode_metrics(sub)
    else:
        # No job has ended: nothing to average, every count and total 0.
        raw = dict.fromkeys(METRIC_KEYS, float("nan"))
        zero = ("n_jobs", "n_hacking", "n_stopped", "tp", "fp", "fn", "stops_before_peak")
        raw.update(dict.fromkeys((*zero, "gpu_hours", "wasted_gpu_hours"), 0.0))
    raw["n_events"] = float(sim.n_events)
    raw["n_decisions"] = float(sim.n_decisions)
    if cluster:
        ids = np.flatnonzero(ended)
        index = {int(j): i for i, j in enumerate(ids)}
        raw.update(
            cluster_metrics(
                sub,
                np.array([sim.job(int(j)).preemptions for j in ids], dtype=np.int64),
                {index[j]: v for j, v in sim.demoted.items() if j in index},
                sim.restore_gpu_hours,
                sim.eval_cost_h,
            )
        )
    return {k: None if v != v else v for k, v in raw.items()}
