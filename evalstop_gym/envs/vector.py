"""A native batched ``EvalStop-v0``: N simulators in one process, one batch per step.

``gym.make_vec("EvalStop-v0", num_envs=N, vectorization_mode="vector_entry_point")``
builds :class:`EvalStopVectorEnv`.  Where Gymnasium's ``SyncVectorEnv`` steps N
wrapped environments and stacks N observation dicts, this one drives the
:class:`~evalstop_gym.envs.core.EpisodeCore` of N
:class:`~evalstop_gym.envs.EvalStopEnv` directly.  Each episode's observation
rows are tabulated at its reset into its slot of one table shared by the N
sub-environments (:class:`~evalstop_gym.envs.tables.SharedRows`); a step
collects each core's key of its next row and gathers the N rows in one
``take`` into an (N, D) float32 array.  The batch observation is that array,
or a dict of column views of it.  A trace replay (episodes of varying
length, up to the whole trace) keeps each core's own tables instead, joined
into the array with one ``bytearray.join`` of the rows.

Episodes, rewards and observations are exactly those of N single envs seeded
``seed, seed + 1, ...`` (tested).  Autoreset follows Gymnasium's default,
next-step mode: the step that ends an episode returns its terminal
observation (zeros) and ``terminated=True``; the next step resets that
sub-environment, ignores its action, and returns the new episode's first
observation with reward 0.  ``autoreset_mode=AutoresetMode.SAME_STEP`` (what
Stable-Baselines3 expects) resets in the step that ends the episode instead:
that step returns the new episode's first observation, with the terminal one
in ``info["final_obs"]``.

Per-step ``info`` is left empty (building N info dicts a step would cost
more than the step); the step that ends a sub-environment's episode carries
its ``episode_metrics`` in Gymnasium's vector-info layout (arrays with an
``_episode_metrics`` mask), under ``info["final_info"]`` in same-step mode.
The same metrics, one dict per ended episode, are in ``envs.ended`` after the
step: ``[(sub-environment index, episode_metrics), ...]`` (what an adapter
such as SB3's ``NativeVecEnv`` reads instead of un-batching the arrays).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from ..errors import ConfigError, is_integer, shown
from .config import EvalStopConfig
from .core import ROW_BLOCK
from .evalstop import EvalStopEnv
from .tables import SharedRows

#: Most sub-environments one vector env builds (see the module docstring).
MAX_NUM_ENVS = 1024


def _seed(field: str, value: Any) -> int | None:
    """A seed as the Python int Gymnasium wants (None stays None), else :class:`ConfigError`."""
    if value is None:
        return None
    if not is_integer(value) or value < 0:
        raise ConfigError(field, value, "None or a non-negative integer")
    return int(value)


class EvalStopVectorEnv(VectorEnv):
    """N ``EvalStop-v0`` episodes stepped as one batch (see the module docstring).

    Args:
        num_envs: Number of sub-environments N.
        flatten: Observations as one (N, D) float32 Box (the fields
            concatenated in boundary order) instead of a Dict; what an
            ``MlpPolicy`` wants, with no flattening cost.
        copy: Return a copy of the observation buffer (default).  False
            returns the buffer itself, overwritten by the next step.
        autoreset_mode: ``NEXT_STEP`` (Gymnasium's default) or ``SAME_STEP``.
        **env_kwargs: Arguments of :class:`~evalstop_gym.envs.EvalStopEnv`.
    """

    metadata: dict[str, Any] = {"autoreset_mode": AutoresetMode.NEXT_STEP}  # noqa: RUF012

    def __init__(
        self,
        num_envs: int = 1,
        *,
        flatten: bool = False,
        copy: bool = True,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        **env_kwargs: Any,
    ) -> None:
        """Build N sub-environments with the same arguments."""
        if not is_integer(num_envs) or not 1 <= num_envs <= MAX_NUM_ENVS:
            raise ConfigError("num_envs", num_envs, f"an integer in [1, {MAX_NUM_ENVS}]")
        num_envs = int(num_envs)
        modes = (AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP)
        if autoreset_mode not in modes and autoreset_mode not in [m.value for m in modes]:
            raise ConfigError(
                "autoreset_mode", autoreset_mode, f"one of {[m.value for m in modes]}"
            )
        self.same_step = AutoresetMode(autoreset_mode) == AutoresetMode.SAME_STEP
        self.metadata = {"autoreset_mode": AutoresetMode(autoreset_mode)}
        self.num_envs = num_envs
        # Validated once; a sub-environment's render mode is checked, never used (a batch
        # step renders nothing).
        render_mode = env_kwargs.pop("render_mode", None)
        config = EvalStopConfig.from_kwargs(**env_kwargs)
        #: The sub-environments (for per-env attributes and methods); their cores are stepped.
        self.envs = [
            EvalStopEnv(render_mode=render_mode, env_config=config) for _ in range(num_envs)
        ]
        self._cores = [env.core for env in self.envs]
        first = self.envs[0]
        self.flatten = flatten
        self.copy = copy
        self.layout = layout = first.layout
        width = layout.width
        if flatten:
            self.single_observation_space = layout.row_space()
        else:
            self.single_observation_space = first.observation_space
        self.single_action_space = first.action_space
        self._deprioritize = first.deprioritize
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.render_mode = None
        self._buf = np.zeros((num_envs, width), np.float32)
        self._empty = bytearray()
        sc = config.sim_config
        #: Every sub-environment's rows in one table (None: each core's own tables).
        self.shared_rows: SharedRows | None = None
        if sc.trace is None and sc.resolved_workload().n_jobs <= ROW_BLOCK:
            # A synthetic workload: as many jobs every episode, so each slot is written
            # in place episode after episode (a trace's episodes vary, up to the whole trace).
            self.shared_rows = SharedRows(
                num_envs,
                sc.resolved_calibration().evals_per_job,
                width,
                self._cores[0].write_constant_columns,
            )
        self._field_slices = layout.field_slices
        self._zero_row = np.zeros(width, np.float32)  # the terminal observation
        #: Each core's step (set by reset): ``step_key`` with the shared rows, else ``step_row``.
        self._core_steps: list[Callable[[Any], tuple[Any, float]]] = []
        #: What a step calls per sub-environment: its core's step, or, for one whose
        #: episode ended in the previous step (next-step autoreset), its reset (see _end).
        #: One loop then serves every step, with no per-sub-environment check for resets.
        self._steps: list[Callable[[Any], tuple[Any, float]]] = []
        #: The episodes the last step ended: (sub-environment, its ``episode_metrics``).
        self.ended: list[tuple[int, dict[str, float]]] = []
        self._started = False

    def reset(
        self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset every sub-environment; an int seed s seeds them s, s + 1, ...

        ``seed``: None, a non-negative (Python or NumPy) integer, or a list of
        ``num_envs`` of those.
        """
        if isinstance(seed, list | tuple):
            if len(seed) != self.num_envs:
                raise ConfigError("seed", seed, f"a list of {self.num_envs} seeds (one per env)")
            seeds = [_seed(f"seed[{i}]", s) for i, s in enumerate(seed)]
            super().reset(seed=None)
        else:
            first = _seed("seed", seed)
            super().reset(seed=first)
            seeds = [None if first is None else first + i for i in range(self.num_envs)]
        rows = []
        for i, (env, s) in enumerate(zip(self.envs, seeds)):
            gym.Env.reset(env, seed=s)  # seeds its np_random as env.reset(seed=s) does
            rows.append(self._reset_one(i))
        shared = self.shared_rows is not None
        self._core_steps = [core.step_key if shared else core.step_row for core in self._cores]
        self._steps = list(self._core_steps)
        self.ended = []
        self._started = True
        return self._batch(rows), {}

    def _reset_one(self, i: int) -> Any:
        """Start sub-environment i's next episode; its first row (a key with shared rows)."""
        env, core = self.envs[i], self._cores[i]
        shared = self.shared_rows
        if shared is None:
            return core.reset_row(env.np_random)
        core.reset_sim(env.np_random)
        core.tabulate(shared.slot(i, core.sim.n_jobs))  # type: ignore[union-attr]
        return core.key()

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """One decision per sub-environment (0 continue, 1 stop, 2 deprioritise), next-step autoreset.

        Action 2 only with ``deprioritize=True`` (the action space offers it then).
        """
        if not self._started:
            raise RuntimeError("step() called before reset(): call envs.reset() first")
        acts = np.asarray(actions)
        if acts.shape != (self.num_envs,) or acts.dtype.kind not in "iub":
            raise ValueError(
                f"actions={shown(actions)}: an integer array of shape ({self.num_envs},) of 0 or 1"
            )
        stops = acts.tolist()
        # C-level scans of a short list (True counts as 1, False as 0): cheaper than a set.
        valid = stops.count(0) + stops.count(1)
        if self._deprioritize:
            valid += stops.count(2)
        if valid != self.num_envs:
            allowed = "0 (continue), 1 (stop)" + (
                " or 2 (deprioritise)" if self._deprioritize else ""
            )
            raise ValueError(f"actions={shown(actions)}: every action is {allowed}")
        if self._deprioritize and stops.count(2):
            stops = [s == 1 if s != 2 else 2 for s in stops]
        else:
            # 0/1 as the plain bools the single env passes (an np.bool_ or an int would
            # make the simulator's comparisons slower).
            stops = acts.astype(bool).tolist()
        rows: list[np.ndarray] = []
        append = rows.append
        rewards: list[float] = []
        add_reward = rewards.append
        ended: list[tuple[int, dict[str, float]]] = []
        if self.shared_rows is not None:
            # The hot loop, rows as keys (0: the episode ended).
            for step, stop in zip(self._steps, stops):
                key, reward = step(stop)
                add_reward(reward)
                if key:
                    append(key)
                else:  # one key per sub-environment so far: this one is len(rows)
                    append(self._end(len(rows), ended))
        else:
            # The same, with each core's row views (None: the episode ended).
            for step, stop in zip(self._steps, stops):
                row, reward = step(stop)
                add_reward(reward)
                if row is not None:
                    append(row)
                else:  # one row per sub-environment so far: this one is len(rows)
                    append(self._end(len(rows), ended))
        terminated = np.zeros(self.num_envs, dtype=bool)
        self.ended = ended
        infos: dict[str, Any] = {}
        if ended:
            terminated[[i for i, _ in ended]] = True
            infos = self._end_infos(ended)
        return (
            self._batch(rows),
            # fromiter with the length: a few times cheaper than np.array of a list of floats.
            np.fromiter(rewards, np.float64, self.num_envs),
            terminated,
            np.zeros(self.num_envs, dtype=bool),
            infos,
        )

    def _autoreset_step(self, i: int, stop: Any) -> tuple[Any, float]:
        """Sub-environment i's step after its episode ended: reset it, ignore ``stop``.

        Its first row (a key with the shared rows) and reward 0; its core steps again
        from the next step on.
        """
        self._steps[i] = self._core_steps[i]
        return self._reset_one(i), 0.0

    def _end(self, i: int, ended: list[tuple[int, dict[str, float]]]) -> Any:
        """Sub-environment i's episode ended: note its metrics; the row this step returns for it.

        A row, or with shared rows its key (0: the row of zeros).
        """
        core = self._cores[i]
        ended.append((i, core.info_metrics()))
        if self.same_step:
            return self._reset_one(i)
        self._steps[i] = functools.partial(self._autoreset_step, i)
        return self._zero_row if self.shared_rows is None else 0

    def _end_infos(self, ended: list[tuple[int, dict[str, float]]]) -> dict[str, Any]:
        """The step's ``info`` for the episodes that ended, in Gymnasium's vector-info layout.

        ``VectorEnv._add_info`` of each ended sub-environment's ``{"episode_metrics": ...}``
        (under ``final_info``, with ``final_obs``, in same-step mode).  When every
        metric is a Python float (the usual case) the metrics are built column by
        column: the same dict (keys in order of first appearance, each followed by its
        mask), float64 value arrays and bool masks with the same entries, for a few
        array operations in all instead of two new arrays per key and ended episode.
        """
        if all(type(v) is float for _, m in ended for v in m.values()):
            metrics_info = self._metric_columns(ended)
            if not self.same_step:
                return metrics_info
            infos: dict[str, Any] = {}
            for i, _ in ended:
                final = {"final_obs": self._single(self._zero_row.copy())}
                infos = self._add_info(infos, final, i)
            infos["final_info"], infos["_final_info"] = metrics_info, self._mask(ended)
            return infos
        infos = {}
        for i, metrics in ended:
            info: dict[str, Any] = {"episode_metrics": metrics}
            if self.same_step:
                info = {"final_obs": self._single(self._zero_row.copy()), "final_info": info}
            infos = self._add_info(infos, info, i)
        return infos

    def _mask(self, ended: list[tuple[int, dict[str, float]]]) -> np.ndarray:
        """(N,) bool: True at the sub-environments that ended."""
        mask = np.zeros(self.num_envs, dtype=bool)
        mask[[i for i, _ in ended]] = True
        return mask

    def _metric_columns(self, ended: list[tuple[int, dict[str, float]]]) -> dict[str, Any]:
        """``{"episode_metrics": {key: (N,) float64, "_key": mask, ...}, "_episode_metrics": mask}``.

        What ``_add_info`` builds from float metrics (see :meth:`_end_infos`): each
        key's values and mask are a row of one (keys, N) array, 0.0 and False where a
        sub-environment did not end or its metrics lack the key (an undefined metric).
        """
        keys = dict.fromkeys(ended[0][1])
        for _, m in ended[1:]:
            keys.update(dict.fromkeys(m))  # a key first met later goes last, as in _add_info
        n_keys, rows = len(keys), [i for i, _ in ended]
        values = np.zeros((n_keys, self.num_envs))
        masks = np.zeros((n_keys, self.num_envs), dtype=bool)
        # (keys, ended): each ended episode's values (Python floats, the same float64s)
        values[:, rows] = np.array([[m.get(k, 0.0) for k in keys] for _, m in ended]).T
        masks[:, rows] = np.array([[k in m for k in keys] for _, m in ended]).T
        columns: dict[str, Any] = {}
        for key, value_row, mask_row in zip(keys, values, masks):
            columns[key], columns[f"_{key}"] = value_row, mask_row
        return {"episode_metrics": columns, "_episode_metrics": self._mask(ended)}

    def _batch(self, rows: list[Any]) -> Any:
        """The batch observation of the rows: a Box, or a dict of column views (per ``flatten``).

        ``rows``: one per sub-environment, row views, or keys of the shared rows.
        """
        shared = self.shared_rows
        if shared is not None:
            # One gather of N rows: a fresh (N, D) array, or into the buffer.
            buf = shared.take(rows) if self.copy else shared.take(rows, self._buf)
        elif self.copy:
            # A fresh, writable (N, D) array in one C call: bytearray.join reads each
            # row through the buffer protocol, cheaper than concatenate + copy.
            buf = np.frombuffer(self._empty.join(rows), np.float32).reshape(self._buf.shape)
        else:
            buf = self._buf
            np.concatenate(rows, out=buf.reshape(-1))
        if self.flatten:
            return buf
        return {f: buf[:, s] for f, s in self._field_slices}

    def _single(self, row: np.ndarray) -> Any:
        """One sub-environment's observation from its row."""
        return row if self.flatten else self.layout.split(row)

    def close_extras(self, **kwargs: Any) -> None:
        """Close every sub-environment."""
        for env in self.envs:
            env.close()
