"""Run a policy through ``EvalStop-v0``: the one path scripted and learned stoppers share."""

from __future__ import annotations

import copy
import math
from collections.abc import Iterable
from typing import Any

import gymnasium as gym

from evalstop_gym import METRIC_KEYS  # the import registers EvalStop-v0
from evalstop_gym.sim.metrics import honest_metrics

from .policies import Policy


def run_episode(policy: Policy, seed: int, **env_kwargs: Any) -> dict[str, Any]:
    """One episode of ``policy`` on ``EvalStop-v0`` built with ``env_kwargs``.

    Returns the episode's metrics (:data:`~evalstop_gym.METRIC_KEYS`), the honest
    ones (:data:`~evalstop_gym.sim.metrics.HONEST_METRIC_KEYS`, at the env's ``gpu_hour_price``), plus ``seed``,
    ``policy``, ``steps`` and ``return`` (the sum of rewards, equal to the closed form
    of the reward mode).

    The policy sees only what crosses the information boundary: observations
    through ``act(obs)``, and, if it defines ``check_observation_space(space)``,
    a copy of the observation space before the episode.  It never receives the
    environment (whose simulator holds the hack labels) nor the rewards.
    """
    env = gym.make("EvalStop-v0", disable_env_checker=True, **env_kwargs)
    try:
        check = getattr(policy, "check_observation_space", None)
        if check is not None:  # learned policies refuse an env they were not trained on
            # A copy of the space only: never the env, whose simulator holds the hidden labels.
            check(copy.deepcopy(env.observation_space))
        policy.reset()
        obs, info = env.reset(seed=seed)
        total, steps, terminated, truncated = 0.0, 0, False, False
        while not (terminated or truncated):
            obs, reward, terminated, truncated, info = env.step(policy.act(obs))
            total += float(reward)
            steps += 1
        honest = _honest(env.unwrapped)
    finally:
        env.close()
    row: dict[str, Any] = {"policy": policy.name, "seed": int(seed), "steps": steps}
    # The env leaves an undefined metric out of info; rows are numeric columns
    # for the statistics, where NaN is what "undefined" means.
    row.update(dict.fromkeys(METRIC_KEYS, math.nan))
    row.update(info["episode_metrics"])
    row.update(honest)
    row["return"] = total
    return row


def _honest(base: Any) -> dict[str, float]:
    """The honest metrics of the episode the env just ended (read after it, never by the policy)."""
    sim = base.sim
    m = honest_metrics(
        sim.record(), sim.curves.obs_eval, base.gpu_hour_price, sim.deliver_best, sim.step_frac
    )
    return m


def evaluate(policy: Policy, seeds: Iterable[int], **env_kwargs: Any) -> list[dict[str, Any]]:
    """Each seed's episode metrics of ``policy`` (a list of flat dicts)."""
    return [run_episode(policy, int(s), **env_kwargs) for s in seeds]
