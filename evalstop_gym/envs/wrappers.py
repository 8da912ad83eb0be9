"""Small Gymnasium wrappers for EvalStop-v0."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from ..sim.metrics import METRIC_KEYS
from ..sim.utility import stop_values


def with_metrics_so_far(env: gym.Env, truncated: bool, info: dict[str, Any]) -> dict[str, Any]:
    """``info``, plus the metrics so far and ``episode_metrics_partial=True`` if cut short.

    On a ``truncated`` step without ``info["episode_metrics"]`` (a time limit
    ended the episode before its last job): a new dict with
    ``info["episode_metrics"]``, the base env's ``episode_metrics()`` so far
    without its None entries, as the last step of an episode carries them.
    Any other ``info`` is returned as it is.
    """
    if not truncated or "episode_metrics" in info:
        return info
    so_far = env.unwrapped.episode_metrics()  # type: ignore[attr-defined]
    metrics = {k: v for k, v in so_far.items() if v is not None}
    return {**info, "episode_metrics": metrics, "episode_metrics_partial": True}


class EpisodeMetricsSoFar(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Give a truncated episode's last ``info`` the metrics so far (:func:`with_metrics_so_far`).

    Gymnasium's ``TimeLimit`` (``gym.make(..., max_episode_steps=N)``) cuts an
    episode outside the env, which cannot tell its last step from any other,
    so the env itself never adds ``info["episode_metrics"]`` there.  Wrapped
    outside the time limit, as in ``EpisodeMetricsSoFar(gym.make("EvalStop-v0",
    max_episode_steps=N))``, this adds them, marked
    ``info["episode_metrics_partial"] = True``.  Every other step's ``info``
    is the env's own.  For ``EvalStop-v0``, ``EvalStopFlat-v0`` and
    ``EvalStopCluster-v0``.
    """

    def __init__(self, env: gym.Env) -> None:
        """Wrap ``env`` (an env whose base has ``episode_metrics()``)."""
        gym.utils.RecordConstructorArgs.__init__(self)
        super().__init__(env)

    def step(self, action: Any):
        """Step the env; on a truncated last step, add the metrics so far to ``info``."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward, terminated, truncated, with_metrics_so_far(self.env, truncated, info)


class EpisodeMetricsInfo(gym.Wrapper):
    """Copy the final step's ``info["episode_metrics"]`` to top-level ``info`` keys.

    So that tools that read flat info keys at the end of an episode (SB3's
    ``Monitor(info_keywords=...)``) log the episode metrics.  Every key of
    ``METRIC_KEYS`` is there at the end of every episode: a metric undefined
    in the episode (left out of ``info["episode_metrics"]``) is None.  A
    truncated episode gets its metrics so far first (:func:`with_metrics_so_far`,
    with ``episode_metrics_partial=True``), so a time limit does not leave the
    keys out.
    """

    def step(self, action: Any):
        """Step the env; on the last step, lift the episode metrics into ``info``."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        info = with_metrics_so_far(self.env, truncated, info)
        if "episode_metrics" in info:
            info = {**info, **dict.fromkeys(METRIC_KEYS), **info["episode_metrics"]}
        return obs, reward, terminated, truncated, info


class JobEpisodes(gym.Wrapper):
    """One job per episode: the per-job view of EvalStop-v0's utility, for training.

    Under ``reward="utility"`` a per-job stopper's return is a sum of independent
    per-job terms, sum_j V_end(j) - V_1(j) (``EvalStopEnv``'s docstring), and the
    observation of a job holds only that job's own history.  The cluster episode
    interleaves jobs, so a discounted return there mixes every running job's
    rewards into each decision's credit: noise the value function cannot predict
    (the other jobs are not in the observation).  This wrapper replays each job
    of a cluster episode on its own: one episode per job, its decisions in
    order, continue paying V_{i+1} - V_i (the env's dense utility reward), stop
    ending the episode.  With gamma = 1 the return of a decision is exactly its
    job's V_end - V_i: exact credit, no other job's noise.  The sum of the
    job episodes' returns of one cluster episode equals the cluster episode's
    return for any per-job stopper.

    When every job of a cluster episode has been replayed, the wrapped env is
    reset (drawing the next cluster episode from its own random stream).
    """

    def __init__(self, env: gym.Env) -> None:
        """Wrap an ``EvalStop-v0`` env (``reward="utility"``)."""
        super().__init__(env)
        base = env.unwrapped
        if getattr(base, "reward_mode", None) != "utility":
            raise ValueError("JobEpisodes needs EvalStop-v0 with reward='utility'")
        self._values: np.ndarray | None = None
        self._job = 0
        self._ckpt = 1
        # The outermost ``observation_at``: a PadWindow (or a mixture of domains) in
        # between pads what the base env tabulates.
        self._observation_at = env.get_wrapper_attr("observation_at")

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Start the next job (a new cluster episode when the last one is used up or seeded)."""
        if self._values is None or seed is not None or self._job + 1 >= len(self._values):
            self.env.reset(seed=seed, options=options)
            self._values = self._job_values()
            self._job = 0
        else:
            self._job += 1
        self._ckpt = 1
        return self._observation_at(self._job, 1), {"job": self._job}

    def step(self, action: Any):
        """Continue (0) or stop (1) the current job at its current checkpoint."""
        assert self._values is not None, "step() before reset()"
        values = self._values[self._job]
        if int(np.asarray(action).item()):
            return self._observation_at(self._job, self._ckpt), 0.0, True, False, {}
        reward = float(values[self._ckpt] - values[self._ckpt - 1])
        self._ckpt += 1
        done = self._ckpt >= len(values)
        obs_ckpt = self._ckpt - 1 if done else self._ckpt
        obs = self._observation_at(self._job, obs_ckpt)
        return obs, reward, done, False, {}

    def _job_values(self) -> np.ndarray:
        """(n_jobs, K) utility terms V_i of the cluster episode just drawn."""
        base = self.env.unwrapped
        sim = base.sim
        c, b = sim.curves, sim.batch
        return stop_values(
            c.true_eval,
            c.obs_eval,
            b.gpus * b.duration_h,
            base.gpu_hour_price,
            sim.deliver_best,
            sim.step_frac,
        )


#: The fields that hold a window of W values followed by their W-slot mask.
WINDOW_FIELDS: tuple[str, ...] = ("evals", "loss")


def _pad_halves(x: np.ndarray, window: int, what: str, bounds: bool = False) -> np.ndarray:
    """``x`` (W values then W mask slots) with ``window - W`` new slots left of each half.

    The new slots are empty (0) for an observation; for a space's ``bounds`` they
    repeat each half's first bound.
    """
    w = x.shape[-1] // 2
    if window < w:
        raise ValueError(f"window={window} is not allowed: at least the {what}'s window {w}")
    extra = window - w

    def new_slots(half: np.ndarray) -> np.ndarray:
        return np.repeat(half[:1], extra) if bounds else np.zeros(extra, dtype=x.dtype)

    return np.concatenate([new_slots(x[:w]), x[:w], new_slots(x[w:]), x[w:]])


def pad_observation(obs: dict[str, np.ndarray], window: int) -> dict[str, np.ndarray]:
    """One ``EvalStop-v0`` observation as a ``window``-slot env would give it.

    The ``evals`` and ``loss`` fields are right-aligned and zero-padded with a
    mask (first W values, last W mask), so the W-slot observation of a job seen
    through a larger window is the same with ``window - W`` empty slots (value
    0, mask 0) on the left of each half; the other fields do not depend on the
    window.  A new dict; ``obs`` is not changed.

    Raises:
        ValueError: ``window`` smaller than the observation's window.
    """
    return {
        k: _pad_halves(v, window, "observation") if k in WINDOW_FIELDS else v
        for k, v in obs.items()
    }


def pad_observation_space(space: gym.spaces.Dict, window: int) -> gym.spaces.Dict:
    """The observation space :func:`pad_observation` maps ``space`` into.

    ``evals`` and ``loss`` keep their bounds on ``2 * window`` slots;
    ``consecutive_declines`` (bounded by the K checkpoints a job declares, and
    an env with a ``window``-slot window declares K >= ``window``) is bounded by
    ``max(K, window)``: the space of an env whose jobs declare ``window``
    checkpoints, the usual target.
    """
    out = {}
    for k, box in space.spaces.items():
        if k in WINDOW_FIELDS:
            low = _pad_halves(box.low, window, "space", bounds=True)
            high = _pad_halves(box.high, window, "space", bounds=True)
            box = gym.spaces.Box(low, high, dtype=box.dtype)
        elif k == "consecutive_declines":
            box = gym.spaces.Box(box.low, np.maximum(box.high, window), dtype=box.dtype)
        out[k] = box
    return gym.spaces.Dict(out)


class PadWindow(gym.ObservationWrapper):
    """An ``EvalStop-v0`` env whose W-slot eval window is seen through a larger one.

    A model trained with a ``window``-slot observation can then play (or train
    on) an env whose window is smaller, e.g. ``paper`` (10 checkpoints) beside
    regimes with 20: its observations are exactly what a ``window``-slot env
    would show for the same history (:func:`pad_observation`), in
    :func:`pad_observation_space` (or ``observation_space`` when given, e.g. a
    wider-bounded one shared with other envs, which must contain every padded
    observation's shape).  ``observation_at`` pads too, so :class:`JobEpisodes`
    replays padded jobs.
    """

    def __init__(
        self, env: gym.Env, window: int, observation_space: gym.spaces.Dict | None = None
    ) -> None:
        """Wrap ``env`` (a Dict observation with ``evals``/``loss`` windows) to ``window`` slots."""
        super().__init__(env)
        self.window = window
        padded = pad_observation_space(env.observation_space, window)
        if observation_space is not None:
            got = {k: s.shape for k, s in observation_space.spaces.items()}
            want = {k: s.shape for k, s in padded.spaces.items()}
            if got != want:
                raise ValueError(
                    f"observation_space has fields/shapes {got}; padding to window={window} "
                    f"gives {want}"
                )
            padded = observation_space
        self.observation_space = padded

    def observation(self, observation: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The observation padded to :attr:`window` slots."""
        return pad_observation(observation, self.window)

    def observation_at(self, jid: int, ckpt: int) -> dict[str, np.ndarray]:
        """The inner env's ``observation_at`` (job ``jid`` after ``ckpt`` checkpoints), padded."""
        inner = self.env.get_wrapper_attr("observation_at")
        return pad_observation(inner(jid, ckpt), self.window)
