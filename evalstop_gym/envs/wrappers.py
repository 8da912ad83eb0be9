"""Small Gymnasium wrappers for EvalStop-v0."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from ..sim.metrics import METRIC_KEYS, stop_values


class EpisodeMetricsInfo(gym.Wrapper):
    """Copy the final step's ``info["episode_metrics"]`` to top-level ``info`` keys.

    So that tools that read flat info keys at the end of an episode (SB3's
    ``Monitor(info_keywords=...)``) log the episode metrics.  Every key of
    ``METRIC_KEYS`` is there at the end of every episode: a metric undefined
    in the episode (left out of ``info["episode_metrics"]``) is None.
    """

    def step(self, action: Any):
        """Step the env; on the last step, lift the episode metrics into ``info``."""
        obs, reward, terminated, truncated, info = self.env.step(action)
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

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Start the next job (a new cluster episode when the last one is used up or seeded)."""
        if self._values is None or seed is not None or self._job + 1 >= len(self._values):
            self.env.reset(seed=seed, options=options)
            self._values = self._job_values()
            self._job = 0
        else:
            self._job += 1
        self._ckpt = 1
        return self.env.unwrapped.observation_at(self._job, 1), {"job": self._job}

    def step(self, action: Any):
        """Continue (0) or stop (1) the current job at its current checkpoint."""
        assert self._values is not None, "step() before reset()"
        values = self._values[self._job]
        if int(np.asarray(action).item()):
            return self.env.unwrapped.observation_at(self._job, self._ckpt), 0.0, True, False, {}
        reward = float(values[self._ckpt] - values[self._ckpt - 1])
        self._ckpt += 1
        done = self._ckpt >= len(values)
        obs_ckpt = self._ckpt - 1 if done else self._ckpt
        obs = self.env.unwrapped.observation_at(self._job, obs_ckpt)
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
