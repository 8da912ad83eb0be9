"""What every env class steps: one episode's core, and the layout of its observation rows.

:class:`EpisodeCore` holds an episode of the simulator together with its
per-episode tables (observation rows, rewards): ``reset_row`` draws an episode
and returns the first observation row, ``step_row`` applies a decision and
returns the next row and the reward.  A row is one float32 vector, the
observed fields side by side as :class:`ObservationLayout` places them.
``EvalStopEnv`` (the Gymnasium face), the batched ``EvalStopVectorEnv`` and the
epoch-stepping ``EvalStopClusterEnv`` all drive cores, so the dynamics exist
once.  The core knows no Gymnasium API beyond the observation space its
layout describes.

The simulator is read only through :data:`SIMULATOR_SURFACE` (checked by
``tests/test_tables.py``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from ..sim.engine import Simulator
from ..sim.workloads import JOB_TYPES
from .config import EvalStopConfig
from .tables import continue_gains, field_widths, new_table, observation_rows

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
        # jobs and their outcomes
        "job",
        "finished_since",
        "delivered_checkpoint",
        "work_fraction",
        "checkpoints_done",
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
    }
)

#: The core's per-episode float lookups held as memoryviews (see _lookup).
_LOOKUPS = ("_true", "_gains", "_costs", "_step_costs")


def _lookup(values: np.ndarray) -> memoryview:
    """A float64 table as a memoryview: ``view[j, i]`` (or ``view[j]``) is a Python float."""
    return memoryview(np.ascontiguousarray(values, dtype=np.float64))


class ObservationLayout:
    """Where each observed field sits in an observation row, and the observation space.

    Attributes:
        fields: The observed boundary fields, in row (boundary) order.
        window: W, the eval and loss windows' length.
        widths: Field -> its width in a row.
        slices: ``(field, start, stop)`` per field, in row order.
        field_slices: ``(field, slice(start, stop))`` per field, in row order.
        width: The row's length D.
        space: The ``Dict`` of float32 ``Box``es of ``EvalStop-v0``.
    """

    def __init__(self, fields: tuple[str, ...], window: int, evals_per_job: int) -> None:
        """The layout of ``fields`` with a W-window, for jobs of K checkpoints."""
        self.fields = fields
        self.window = w = window
        self.widths = widths = field_widths(w, len(JOB_TYPES))
        slices: list[tuple[str, int, int]] = []
        start = 0
        for f in fields:
            slices.append((f, start, start + widths[f]))
            start += widths[f]
        self.slices: tuple[tuple[str, int, int], ...] = tuple(slices)
        self.width = start
        self.field_slices = tuple((f, slice(a, b)) for f, a, b in slices)
        every = {
            "job_type": spaces.Box(0.0, 1.0, (len(JOB_TYPES),), np.float32),
            "evals": spaces.Box(-_EVAL_BOUND, _EVAL_BOUND, (2 * w,), np.float32),
            "consecutive_declines": spaces.Box(0.0, float(evals_per_job), (1,), np.float32),
            "progress": spaces.Box(0.0, 1.0, (1,), np.float32),
            "loss": spaces.Box(0.0, _LOSS_BOUND, (2 * w,), np.float32),
        }
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
        self.reward_mode = config.reward
        self.reward_timing = config.reward_timing
        self.gpu_hour_price = config.gpu_hour_price
        self.time_cost = config.time_cost
        self.quality_weight = config.quality_weight
        self.sim: Simulator | None = None
        # Per-episode lookups, read one scalar at a time: memoryviews of float64
        # arrays (t[j, i] is a Python float), made in no time where nested lists
        # cost a Python float per element at every reset.
        self._true: memoryview | None = None
        self.jid: int | None = None
        self.ckpt = 0
        self._blocks: list[np.ndarray | None] = []
        #: Observation tables by block, kept across episodes (see _build_block).
        self._tables: dict[int, np.ndarray] = {}
        self._gains: memoryview | None = None
        self._costs: memoryview | None = None
        self._step_costs: memoryview | None = None
        self._last_jobs_area = 0.0
        self._n_delivered = 0
        # The return's components, accumulated step by step.
        self._quality = self._gpu_cost = self._time_in_system = 0.0

    def __getstate__(self) -> dict[str, Any]:
        """The core's state for pickle and deepcopy: each lookup memoryview as its array."""
        state = self.__dict__.copy()
        for name in _LOOKUPS:
            if state.get(name) is not None:
                state[name] = state[name].obj
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Restore a pickled core, making its lookup memoryviews again."""
        for name in _LOOKUPS:
            if state.get(name) is not None:
                state[name] = memoryview(state[name])
        self.__dict__.update(state)

    def reset_row(self, np_random: np.random.Generator) -> np.ndarray:
        """Start an episode drawn from ``np_random``; return the first observation row (no copy)."""
        # Every draw of the episode comes from np_random: one integer seeds
        # the simulator's independent streams.
        sim_seed = int(np_random.integers(0, 2**63 - 1))
        # The last episode's objects are freed first, so that the new one's allocations
        # reuse their (recently touched) memory.
        self.sim = self._gains = self._costs = self._step_costs = self._true = None
        sim = self.sim = Simulator(self.config.sim_config, sim_seed)
        self._build_tables(sim)
        self._last_jobs_area = 0.0
        self._n_delivered = 0
        # The return's components, accumulated step by step.
        self._quality = self._gpu_cost = self._time_in_system = 0.0
        jid = self.jid = sim.next_decision()
        if jid is None:  # pragma: no cover - every job has >= 1 decision
            raise RuntimeError("the episode has no decision to make")
        self.ckpt = sim.decision_checkpoint
        if self.reward_mode == "system":
            self._collect_system_reward()  # time before the first decision is not the agent's
            self._time_in_system = self._quality = 0.0
        return self.row(jid, self.ckpt)

    def _build_tables(self, sim: Simulator) -> None:
        """Per-episode lookups (see :mod:`evalstop_gym.envs.tables`)."""
        c, b = sim.curves, sim.batch
        # The reward mode, read once per episode instead of twice per step.
        self._dense_utility = self.reward_mode == "utility" and self.reward_timing == "dense"
        if self.reward_mode == "system" or self.reward_timing == "delayed":
            self._true = _lookup(c.true_eval)  # read at each job's end
        self._blocks = [None] * (-(-len(b) // ROW_BLOCK))
        if self.reward_mode == "utility":
            self._gains = _lookup(
                continue_gains(c.true_eval, sim.best_observed, deliver_best=sim.deliver_best)
            )
            k = c.obs_eval.shape[1]
            # The same float operations, in the same order, as price * gpus * T / K.
            self._costs = _lookup(self.gpu_hour_price * b.gpus * b.duration_h / k)
            # With step-time jitter an interval costs its own share of the run.
            self._step_costs = None
            if sim.step_frac is not None:
                frac = np.asarray(sim.step_frac)
                share = np.diff(frac, axis=1, append=frac[:, -1:])
                self._step_costs = _lookup(
                    self.gpu_hour_price * (b.gpus * b.duration_h)[:, None] * share
                )

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
        dense = self._dense_utility
        if not dense:
            reward = 0.0
        elif stop == 1:
            reward = 0.0  # the job's value is what earlier decisions already paid
        else:
            # V_{i+1} - V_i of continuing (EvalStopEnv's docstring), tabulated at
            # reset: checkpoints are drawn when the episode is built, so the
            # simulator knows them; the agent does not.
            gain = self._gains[jid, self.ckpt - 1]  # type: ignore[index]
            step_costs = self._step_costs
            cost = self._costs[jid] if step_costs is None else step_costs[jid, self.ckpt - 1]  # type: ignore[index]
            self._quality += gain
            self._gpu_cost -= cost
            reward = gain - cost
        sim.decide(stop)
        jid = self.jid = sim.next_decision()
        if not dense:
            reward = (
                self._collect_system_reward()
                if self.reward_mode == "system"
                else self._collect_delayed_utility()
            )
        if jid is None:
            return None, reward
        ckpt = self.ckpt = sim.decision_checkpoint
        block = self._blocks[jid // ROW_BLOCK]
        if block is None:
            block = self._build_block(jid // ROW_BLOCK)
        return block[jid % ROW_BLOCK, ckpt - 1], reward

    def _collect_delayed_utility(self) -> float:
        """``reward_timing="delayed"``: each job that left pays its whole V_end - V_1 now.

        The same per-job sum the dense reward pays over the job's decisions (the
        closed form of EvalStopEnv's docstring), paid once the job is finished or
        stopped, so no reward depends on a checkpoint the agent has not yet observed.
        """
        sim = self.sim
        assert sim is not None
        gain = cost = 0.0
        true = self._true
        ended = sim.finished_since(self._n_delivered)
        for jid in ended:
            job = sim.job(jid)
            gain += true[jid, sim.delivered_checkpoint(jid)] - true[jid, 0]  # type: ignore[index]
            first = job.duration * sim.work_fraction(jid, 1)
            cost += self.gpu_hour_price * job.gpus * (job.work_done - first)
        self._n_delivered += len(ended)
        self._quality += gain
        self._gpu_cost -= cost
        return gain - cost

    def _collect_system_reward(self) -> float:
        sim = self.sim
        assert sim is not None
        area = sim.jobs_area - self._last_jobs_area
        self._last_jobs_area = sim.jobs_area
        quality = 0.0
        ended = sim.finished_since(self._n_delivered)
        for jid in ended:
            quality += self._true[jid, sim.delivered_checkpoint(jid)]  # type: ignore[index]
        self._n_delivered += len(ended)
        self._time_in_system -= self.time_cost * area
        self._quality += self.quality_weight * quality
        return -self.time_cost * area + self.quality_weight * quality

    def row(self, jid: int, ckpt: int) -> np.ndarray:
        """Job ``jid``'s tabulated observation row after checkpoint ``ckpt`` (a view: copy it)."""
        block = self._blocks[jid // ROW_BLOCK]
        if block is None:
            block = self._build_block(jid // ROW_BLOCK)
        return block[jid % ROW_BLOCK, ckpt - 1]

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
        c = sim.curves
        n, k = c.obs_eval[sl].shape
        table = self._tables.get(index)
        if table is None or table.shape[:2] != (n, k):
            table = self._tables[index] = new_table(
                layout.fields, n, k, layout.window, len(JOB_TYPES)
            )
        block = observation_rows(
            layout.fields,
            sim.batch.job_type[sl],
            sim.declines[sl],
            c.obs_eval[sl],
            c.loss[sl],
            layout.window,
            len(JOB_TYPES),
            BOUNDS,
            table,
        )
        self._blocks[index] = block
        return block

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
        """``episode_metrics()`` without its undefined (None) entries: what ``info`` carries."""
        return {k: v for k, v in self.episode_metrics().items() if v is not None}

    def episode_metrics(self) -> dict[str, float | None]:
        """Metrics of the finished episode, plus the return's components.

        The same keys every episode; an undefined metric (NaN in the
        simulator's metrics) is None.  ``info["episode_metrics"]`` is this
        without the None entries.
        """
        sim = self.sim
        if sim is None or not sim.done:
            raise RuntimeError("episode_metrics() needs a finished episode")
        m: dict[str, float | None] = {k: None if v != v else v for k, v in sim.metrics().items()}
        if self.config.deprioritize or any(self.config.sim_config.resolved_costs()):
            # Only then: the default env's metric keys are pinned by the golden fixture.
            m.update((k, None if v != v else v) for k, v in sim.cluster_metrics().items())
        parts = {
            "quality": self._quality,
            "gpu_cost": self._gpu_cost,
            "time_in_system": self._time_in_system,
        }
        for k, v in parts.items():
            m[f"return_{k}"] = float(v)
        m["return"] = float(sum(parts.values()))
        return m
