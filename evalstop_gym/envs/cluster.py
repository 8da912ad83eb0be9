"""``EvalStopCluster-v0``: the cluster as a platform sees it, one step per decision epoch."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from ..errors import ConfigError, shown
from ..sim.config import MAX_JOBS
from .config import arguments, refuse_unknown_arguments
from .evalstop import EvalStopEnv
from .render import cluster_ansi_frame, cluster_rgb_frame

#: Per-slot fields the platform knows about a job besides its boundary fields.
SLOT_FIELDS: tuple[str, ...] = ("present", "decide", "running", "deprioritized", "gpus")
#: Upper bound of ``max_jobs`` (slots).
MAX_SLOTS = 4096


class EvalStopClusterEnv(gym.Env[dict[str, np.ndarray], np.ndarray]):
    """
    ## Description

    The cluster of `EvalStop-v0` seen whole.  A step is one *decision epoch*:
    every job that reports an eval checkpoint at the same instant is decided
    together, with the rest of the cluster (free GPUs, queue, the other running
    and waiting jobs) in view.  The simulator, the episode drawn from a seed,
    the rewards and the metrics are exactly those of `EvalStop-v0` (built with
    `deprioritize=True`): this env drives one internally.

    ## Action Space

    `MultiDiscrete([3] * max_jobs)`: per slot, `0` continue, `1` stop and save
    the best observed checkpoint, `2` deprioritise (see `Simulator.decide`).
    Only slots with `decide = 1` act; every other slot's action is ignored.
    `action_masks()` (the sb3-contrib `MaskablePPO` convention: a flat boolean
    array of `3 * max_jobs`) allows only `0` on those slots.  Within an epoch
    the decisions are applied in event order (the counter tie-breaker), as
    `EvalStop-v0` would present them; a decision may preempt or stop a later
    job of the same epoch, whose checkpoint then never comes and whose action
    is dropped.  If more than `max_jobs` jobs decide at one instant, the
    overflow continues.

    ## Observation Space

    A `Dict` of float32 `Box`es.  N is `max_jobs`; slots hold first the jobs
    deciding now (event order), then the other running jobs, then the waiting
    ones (each by job id, i.e. arrival order), then zeros.

    | key | shape | meaning | min | max |
    |---|---|---|---|---|
    | `free_gpus` | (1,) | idle GPUs | 0 | num_gpus |
    | `queue_length` | (1,) | jobs waiting for GPUs | 0 | 1e6 |
    | `present` | (N,) | 1 if the slot holds a job | 0 | 1 |
    | `decide` | (N,) | 1 if the job has a new checkpoint to decide on | 0 | 1 |
    | `running` | (N,) | 1 running, 0 waiting | 0 | 1 |
    | `deprioritized` | (N,) | 1 if it was deprioritised | 0 | 1 |
    | `gpus` | (N,) | GPUs it is allocated or asks for | 0 | num_gpus |
    | each of `obs_fields` | (N, width) | its `EvalStop-v0` field after its last checkpoint (a job yet to report has only `job_type`) | as in `EvalStop-v0` | |

    Nothing hidden (hack label, true peak, true duration, noise-free curve)
    and no clock: the absolute time would reveal durations.

    ## Rewards

    Those of `EvalStop-v0` (`reward`, `reward_timing`, `gpu_hour_price`,
    `time_cost`, `quality_weight`), summed over the epoch's decisions: the
    episode return is the same closed form.

    ## Starting State, Episode End

    As `EvalStop-v0` (`info["episode_metrics"]` without undefined metrics):
    `reset(seed=s)` draws the same episode as
    `EvalStop-v0` with seed `s`; terminated when every job has ended, with
    `info["episode_metrics"]`; no truncation.  Under a time limit
    (`max_episode_steps`), `episode_metrics()` gives the metrics so far and
    the `EpisodeMetricsSoFar` wrapper adds them to the truncated step's `info`,
    as in `EvalStop-v0`.

    ## Rendering

    Drawn from the observation, so a frame shows exactly what a policy sees.
    `render_mode="ansi"`: `render()` returns a text view: busy and free GPUs,
    the queue's length, then a line per occupied slot (its state: deciding,
    running or waiting, `*` if deprioritised; its GPUs; and its boundary
    fields: job type, progress, consecutive declines, last evals and loss).
    `"human"`: that text is printed at `reset()` and after every `step()`
    (`render()` returns None).  `"rgb_array"`: a picture of the same view,
    320 px wide: a cell per GPU, then a row per slot (the first 24) with its
    state, GPUs, progress and evals as bars.  SB3's `make_vec_env` asks for
    `rgb_array`.

    ## Arguments

    Every argument of `EvalStop-v0` except `deprioritize`, plus `max_jobs`
    (N, default 32, 1 to 4096).  `render_mode`: None, `ansi`, `human` or
    `rgb_array` (see Rendering).

    ## Version History

    * v0: initial version; later, without changing the dynamics: the render modes.
    """

    metadata: ClassVar[dict[str, Any]] = {
        "render_modes": ["ansi", "human", "rgb_array"],
        "render_fps": 4,
    }

    def __init__(
        self, max_jobs: int = 32, render_mode: str | None = None, **env_kwargs: Any
    ) -> None:
        """Build the env; see the class docstring (Arguments)."""
        if "deprioritize" in env_kwargs:
            raise ConfigError(
                "deprioritize", env_kwargs["deprioritize"], "not an argument of EvalStopCluster-v0"
            )
        names = ["max_jobs", *(a for a in arguments() if a != "deprioritize"), "render_mode"]
        refuse_unknown_arguments(env_kwargs, "EvalStopCluster-v0", names)
        if render_mode is not None and (
            not isinstance(render_mode, str) or render_mode not in self.metadata["render_modes"]
        ):
            raise ConfigError(
                "render_mode", render_mode, f"None or {self.metadata['render_modes']}"
            )
        self.render_mode = render_mode
        if isinstance(max_jobs, bool) or not isinstance(max_jobs, int | np.integer):
            raise ConfigError("max_jobs", max_jobs, f"an integer in [1, {MAX_SLOTS}]")
        if not 1 <= max_jobs <= MAX_SLOTS:
            raise ConfigError("max_jobs", max_jobs, f"an integer in [1, {MAX_SLOTS}]")
        self.max_jobs = n = int(max_jobs)
        self.inner = EvalStopEnv(deprioritize=True, **env_kwargs)
        #: The inner env's episode core: the epochs step it decision by decision.
        self.core = core = self.inner.core
        self.config = self.inner.config
        g = float(self.config.num_gpus)
        job_spaces = self.inner.observation_space.spaces
        obs: dict[str, spaces.Space[Any]] = {
            "free_gpus": spaces.Box(0.0, g, (1,), np.float32),
            "queue_length": spaces.Box(0.0, float(MAX_JOBS), (1,), np.float32),
            **{f: spaces.Box(0.0, 1.0, (n,), np.float32) for f in SLOT_FIELDS[:-1]},
            "gpus": spaces.Box(0.0, g, (n,), np.float32),
        }
        for f, box in job_spaces.items():
            assert isinstance(box, spaces.Box)
            lo, hi = float(box.low.min()), float(box.high.max())
            obs[f] = spaces.Box(lo, hi, (n, box.shape[0]), np.float32)
        self.observation_space = spaces.Dict(obs)
        self.action_space = spaces.MultiDiscrete(np.full(n, 3, dtype=np.int64))
        self._epoch: list[int] = []  # jobs deciding now, in event order
        #: Column of the job-type one-hot in a job's row (-1 without job_type).
        self._type_col = next((a for f, a, _ in core.layout.slices if f == "job_type"), -1)
        self._obs: dict[str, np.ndarray] | None = None
        # The observation the steps refill (see _observe): the two cluster numbers and
        # the slot fields side by side in one vector, the jobs' rows in an (N, D) array.
        self._head = np.zeros(2 + len(SLOT_FIELDS) * n, np.float32)
        self._rows = np.zeros((n, core.layout.width), np.float32)
        #: Each key of the observation and its view: of the head (h) or of the rows (r).
        self._obs_parts: dict[str, tuple[str, Any]] = {
            "free_gpus": ("h", slice(0, 1)),
            "queue_length": ("h", slice(1, 2)),
            **{f: ("h", slice(2 + i * n, 2 + (i + 1) * n)) for i, f in enumerate(SLOT_FIELDS)},
            **{f: ("r", (slice(None), s)) for f, s in core.layout.field_slices},
        }
        self._action_shape = (n,)
        self._continue_only = np.zeros(3 * n, dtype=bool)
        self._continue_only[::3] = True
        self._job_gpus: list[float] = []
        self._job_types: list[int] = []
        self._bind()
        self._forget()

    def __getstate__(self) -> dict[str, Any]:
        # The views written through are rebuilt on unpickling: pickled, they would be copies.
        state = self.__dict__.copy()
        for name in ("_slots", "_flat_head", "_flat_rows", "_row_spans", "_split"):
            state.pop(name, None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._bind()

    # ----------------------------------------------------------------- gym API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Draw the episode ``EvalStop-v0`` draws from ``seed``; run to the first epoch."""
        super().reset(seed=seed)
        # This env's generator: the core then draws exactly what EvalStop-v0 would.
        self.core.reset_row(self.np_random)
        sim = self.core.sim
        assert sim is not None
        self._epoch = sim.simultaneous_checkpoints()
        # A new episode: the rows of the last one's (job, checkpoint) pairs no longer hold.
        self._head[:] = 0.0
        self._rows[:] = 0.0
        self._forget()
        self._job_gpus = sim.batch.gpus.astype(float).tolist()  # floats: written as float32
        self._job_types = sim.batch.job_type.tolist()
        obs = self._observe()
        if self.render_mode == "human":
            print(cluster_ansi_frame(obs, sim.num_gpus), end="")
        return obs, self._info(0)

    def step(
        self, action: Any
    ) -> tuple[dict[str, np.ndarray], SupportsFloat, bool, bool, dict[str, Any]]:
        """Apply the epoch's decisions in event order; run to the next epoch."""
        if self._obs is None:
            raise RuntimeError("step() called before reset(): call env.reset() first")
        if not self._epoch:
            raise RuntimeError("step() called after the episode ended: call env.reset()")
        act = self._parse_action(action)
        core, epoch = self.core, self._epoch
        # step_key, not step_row: the observation is built from the slots (_observe), so
        # the next row's key costs less than the row's view this would discard.
        if len(epoch) == 1 and core.jid == epoch[0]:
            # The usual epoch (continuous durations rarely coincide): one decision.
            a = act[0]
            _, reward = core.step_key(a if a == 2 else a == 1)
            total, n = 0.0 + reward, 1
        else:
            decisions = dict(zip(epoch[: self.max_jobs], act))
            total, n = 0.0, 0
            while core.jid is not None and core.jid in decisions:
                a = decisions.pop(core.jid)
                _, reward = core.step_key(a if a == 2 else a == 1)
                total += reward
                n += 1
        sim = core.sim
        assert sim is not None
        self._epoch = sim.simultaneous_checkpoints()
        info = self._info(n)
        obs = self._observe()
        if self.render_mode == "human":
            print(cluster_ansi_frame(obs, sim.num_gpus), end="")
        if core.jid is None:
            info["episode_metrics"] = core.info_metrics()
            return obs, total, True, False, info
        return obs, total, False, False, info

    def render(self) -> str | np.ndarray | None:
        """The text view or the picture of the cluster, per ``render_mode`` (see Rendering).

        None for ``human``: that mode prints the text view at every reset and step.
        """
        if self.render_mode == "ansi":
            return cluster_ansi_frame(self._obs, self.config.num_gpus)
        if self.render_mode == "rgb_array":
            return cluster_rgb_frame(self._obs, self.config.num_gpus)
        return None

    def episode_metrics(self) -> dict[str, float | None]:
        """``EvalStop-v0``'s ``episode_metrics()`` of the episode (so far, mid-episode)."""
        return self.core.episode_metrics()

    def action_masks(self) -> np.ndarray:
        """Flat (3 N,) bool: all three actions on deciding slots, only continue elsewhere."""
        mask = self._continue_only.copy()
        # The deciding slots come first: their three actions are one prefix of the mask.
        mask[: 3 * min(len(self._epoch), self.max_jobs)] = True
        return mask

    # -------------------------------------------------------------- internals
    def _parse_action(self, action: Any) -> list[int]:
        """The action as N ints in {0, 1, 2} (a list: the step reads a few), or ValueError."""
        arr = action if type(action) is np.ndarray else np.asarray(action)
        if arr.shape != self._action_shape or arr.dtype.kind not in "iu":
            raise ValueError(
                f"action={shown(action)} is not allowed: an integer array of shape ({self.max_jobs},)"
            )
        values = arr.tolist()
        if not _ACTIONS.issuperset(values):
            raise ValueError(
                f"action={shown(action)} is not allowed: per slot 0 (continue), 1 (stop), "
                "2 (deprioritise)"
            )
        return values

    def _observe(self) -> dict[str, np.ndarray]:
        """The observation of the cluster now (zeros once the episode is over).

        The env keeps the observation (the two cluster numbers and the slot fields
        (5, N) in one vector, the jobs' rows (N, row width) in another) and refills
        only what changed since the last step: a slot's row is rewritten when another
        job or checkpoint moved into it. The observation handed out is made of copies
        of the two, each key a view of one of them (observations kept by the caller
        never change).
        """
        core, n = self.core, self.max_jobs
        sim = core.sim
        assert sim is not None
        head, rows = self._head, self._rows
        if core.jid is None:
            head[:] = 0.0
            rows[:] = 0.0
            self._forget()
            return self._views()
        running, waiting = sim.jobs_in_system()  # new lists: ours to reorder
        n_running, epoch = len(running), self._epoch
        order = None
        if len(epoch) == 1:
            first = epoch[0]
            try:  # a deciding job is running: the order is it, then the others
                i = running.index(first)
            except ValueError:
                pass
            else:
                # Moved in place: no slices of the list to build.
                del running[i]
                running.insert(0, first)
                running += waiting
                order = running
        if order is None:
            deciding = set(epoch)
            order = [*epoch, *[j for j in running if j not in deciding], *waiting]
        del order[n:]
        # (Conditional expressions, not min(): a builtin's call costs more, at every step.)
        m, k = len(order), len(epoch) if len(epoch) < n else n
        slots = self._slots
        cluster = (sim.free, len(waiting))
        if cluster != self._cluster_shown:  # the two numbers change only at starts and ends
            head[0], head[1] = self._cluster_shown = cluster
        # present, decide, running: each a prefix of ones (deciding jobs run, and come first)
        counts = (m, k, n_running if n_running < m else m)
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
        # A slot shows (job, checkpoints); only slots where either changed are
        # rewritten.  The epoch's other jobs report their checkpoint at this very
        # instant (the engine pops their events one decision at a time): one more.
        ckpts = sim.checkpoints_of(order)
        if k > 1:
            for s in range(1, k):
                ckpts[s] += 1
        jobs, shown = self._slot_jobs, self._slot_ckpts
        # Written through memoryviews: a plain copy of D floats, or one float, no numpy
        # indexing.
        head_flat, gpus_at, gpus_of = self._flat_head, 2 + 4 * n, self._job_gpus
        flat, spans, row = self._flat_rows, self._row_spans, core.row
        # One pass over zipped lists finds the changed slots: fewer instructions than
        # chained map()s and compress() (interpreter calls per slot), at 6 slots as at 32.
        for slot, jid, ckpt, was, was_ckpt in zip(range(m), order, ckpts, jobs, shown):
            if jid == was and ckpt == was_ckpt:
                continue
            head_flat[gpus_at + slot] = gpus_of[jid]
            if ckpt:
                flat[spans[slot]] = row(jid, ckpt)
            else:
                rows[slot] = 0.0
                if self._type_col >= 0:
                    rows[slot, self._type_col + self._job_types[jid]] = 1.0
        jobs[:m] = order
        shown[:m] = ckpts
        if self._shown > m:
            rows[m : self._shown] = 0.0
            self._slots[4, m : self._shown] = 0.0
            jobs[m : self._shown] = [-1] * (self._shown - m)
        self._shown = m
        return self._views()

    def _bind(self) -> None:
        """The views the steps write through (the slot fields (5, N), head and rows as flat
        memoryviews) and the function that cuts the observation's copies into its keys."""
        self._slots = self._head[2:].reshape(len(SLOT_FIELDS), self.max_jobs)
        self._flat_head = memoryview(self._head)
        self._flat_rows = memoryview(self._rows.reshape(-1))
        parts = list(self._obs_parts.items())
        self._split = _dict_display(
            "h, r",
            [(key, f"{part}[_{i}]") for i, (key, (part, _)) in enumerate(parts)],
            {f"_{i}": index for i, (_, (_, index)) in enumerate(parts)},
        )
        width = self._rows.shape[1]
        #: Each slot's row in the flat rows.
        self._row_spans = [slice(s * width, (s + 1) * width) for s in range(self.max_jobs)]

    def _forget(self) -> None:
        """Mark every slot empty (the arrays are zero): a new episode's rows differ."""
        n = self.max_jobs
        self._slot_jobs = [-1] * n
        self._slot_ckpts = [0] * n
        self._counts = (0, 0, 0)
        self._cluster_shown = (0, 0)
        self._shown = 0
        self._demoted_shown = False

    def _views(self) -> dict[str, np.ndarray]:
        """The observation dict: every key a view of a fresh copy of the head or the rows."""
        obs = self._obs = self._split(self._head.copy(), self._rows.copy())
        return obs

    def _info(self, n_decided: int) -> dict[str, Any]:
        """EvalStop-v0's info without its clock (see the class docstring), plus the epoch's size."""
        sim = self.core.sim
        assert sim is not None
        # EpisodeCore.info's counters, written out: one dict per step instead of a dict,
        # a deletion and two insertions (the lockstep test holds it to EvalStop-v0's).
        return {
            "free_gpus": sim.free,
            "jobs_in_system": sim.n_in_system,
            "jobs_done": sim.n_done,
            "decisions": sim.n_decisions,
            "epoch_jobs": len(self._epoch),
            "decided": n_decided,
        }


def per_job_actions(
    obs: Mapping[str, np.ndarray], act: Callable[[dict[str, np.ndarray]], int]
) -> np.ndarray:
    """A cluster action from a per-job stopper: ``act`` on each deciding slot's own observation.

    ``act`` receives, per slot with ``decide = 1``, the dict of that slot's
    ``EvalStop-v0`` fields (exactly the observation ``EvalStop-v0`` shows for
    the job), so scripted policies run unchanged: ``per_job_actions(obs, policy.act)``.
    """
    decide = obs["decide"]
    # The env's own observation decides on its first k slots: its bytes are k float32
    # ones, then zeros (compared bytewise, exactly); any other gets a byte per slot,
    # 1 where it decides, and the deciding slots are found by C scans.
    raw = decide.tobytes()
    n = len(raw) // 4
    # Such bytes hold no four zero bytes before their first zero (a one ends in 0x3f),
    # so that zero's place gives k (found faster than the ones are counted); the
    # comparison then checks it.
    zero = raw.find(_ZERO)
    k = n if zero < 0 else zero // 4
    if decide.dtype is _FLOAT32 and raw == _ONE * k + _ZERO * (n - k):
        deciding: Any = range(k)
    else:
        flags = np.greater(decide, 0.5).tobytes()
        n = len(flags)
        deciding = list(_ones(flags))
    out = np.zeros(n, dtype=np.int64)
    if deciding:
        job_obs = _job_observation(tuple(obs))
        for slot in deciding:
            out[slot] = int(act(job_obs(obs, slot)))
    return out


#: A float32 one and zero, as bytes.
_ONE, _ZERO = np.float32(1.0).tobytes(), np.float32(0.0).tobytes()
_FLOAT32 = np.dtype(np.float32)


def _ones(flags: bytes) -> Any:
    """The positions of the bytes 1 in ``flags``, found by C scans."""
    slot = -1
    for _ in range(flags.count(1)):
        slot = flags.index(1, slot + 1)
        yield slot


#: The actions a slot may take (an integer action array's values are checked against it).
_ACTIONS = frozenset((0, 1, 2))


def _dict_display(
    args: str, items: list[tuple[str, str]], names: dict[str, Any]
) -> Callable[..., dict[str, Any]]:
    """``lambda args: {key: expression, ...}``, compiled once (``names``: what the expressions read).

    The observation dicts are built at every step, and a dict display builds its dict
    presized in one instruction: half the instructions of ``dict(zip(keys, values))``.
    The keys are the observation's field names, repr'd; the expressions are this module's.
    """
    body = ", ".join(f"{key!r}: {expression}" for key, expression in items)
    return eval(f"lambda {args}: {{{body}}}", dict(names))


@functools.lru_cache(maxsize=64)
def _job_observation(keys: tuple[str, ...]) -> Callable[[Mapping[str, Any], int], dict[str, Any]]:
    """``(obs, slot) -> the EvalStop-v0 observation of the slot's job``, for observations with these keys.

    The per-job fields are every key but the cluster's own.  Only string keys (the env's)
    are written into the compiled display, as literals: the caller's dict may hold any
    key, and a key's ``repr`` is never code to run.
    """
    fields = [k for k in keys if k not in SLOT_FIELDS and k not in ("free_gpus", "queue_length")]
    if all(type(f) is str for f in fields):
        return _dict_display("o, s", [(f, f"o[{f!r}][s]") for f in fields], {})
    return lambda o, s: {f: o[f][s] for f in fields}
