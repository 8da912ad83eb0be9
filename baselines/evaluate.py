"""Run a policy through ``EvalStop-v0``: the one path scripted and learned stoppers share."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import gymnasium as gym

from evalstop_gym import METRIC_KEYS  # the import registers EvalStop-v0
from evalstop_gym.errors import ConfigError, is_integer
from evalstop_gym.sim.metrics import EpisodeRecord, honest_metrics

from .oracle import OracleStopper, PrivilegedStopper
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
    return play_episode(policy, seed, env_kwargs)[0]


def play_episode(
    policy: Policy | PrivilegedStopper | None, seed: int, env_kwargs: dict[str, Any]
) -> tuple[dict[str, Any], EpisodeRecord]:
    """:func:`run_episode`'s row, and the episode's outcome record for the harness.

    A privileged stopper (an object with ``privileged = True``, such as
    :class:`~baselines.oracle.OracleStopper` or
    :class:`~baselines.curve_oracle.CurveOracle`) is an upper bound that reads
    the simulator's hidden curves, never a stopper behind the boundary: it is
    bound to the episode's simulator (``policy.bind(sim, price)``) and decides
    through ``act_pending()``.  ``policy=None`` plays the
    :class:`~baselines.oracle.Oracle`.  The record holds the hidden labels; it
    is read after the episode, never by a policy.
    """
    stopper: Any = OracleStopper() if policy is None else policy
    privileged = bool(getattr(stopper, "privileged", False))
    env = gym.make("EvalStop-v0", disable_env_checker=True, **env_kwargs)
    try:
        if not privileged:
            _show_space(stopper, env)
            stopper.reset()
        obs, info = env.reset(seed=seed)
        base: Any = env.unwrapped
        act = (
            _pending_act(stopper.bind(base.sim, base.gpu_hour_price)) if privileged else stopper.act
        )
        total, steps, terminated, truncated = 0.0, 0, False, False
        while not (terminated or truncated):
            obs, reward, terminated, truncated, info = env.step(act(obs))
            total += float(reward)
            steps += 1
        return _outcome(stopper, seed, base, steps, total, info)
    finally:
        env.close()


def _show_space(stopper: Any, env: Any) -> None:
    """Let a policy that checks the observation space (learned ones) refuse ``env``'s.

    A copy of the space only: never the env, whose simulator holds the hidden labels.
    """
    check = getattr(stopper, "check_observation_space", None)
    if check is not None:
        check(copy.deepcopy(env.observation_space))


def _outcome(
    stopper: Any, seed: int, base: Any, steps: int, total: float, info: dict[str, Any]
) -> tuple[dict[str, Any], EpisodeRecord]:
    """The row and record of an episode that just ended on ``base`` (the unwrapped env)."""
    sim, price = base.sim, base.gpu_hour_price
    record = sim.record()
    honest = honest_metrics(record, sim.curves.obs_eval, price, sim.deliver_best, sim.step_frac)
    row: dict[str, Any] = {"policy": stopper.name, "seed": int(seed), "steps": steps}
    # The env leaves an undefined metric out of info; rows are numeric columns
    # for the statistics, where NaN is what "undefined" means.
    row.update(dict.fromkeys(METRIC_KEYS, math.nan))
    row.update(info["episode_metrics"])
    row.update(honest)
    row["return"] = total
    return row, record


def _pending_act(actor: Any) -> Any:
    """A bound privileged stopper as an ``act(obs)``: it ignores the observation, reads the simulator."""
    return lambda obs: actor.act_pending()


#: The most episodes :func:`run_episodes` plays side by side (one live env each); more
#: seeds are played in blocks of this many, with the same rows.
SIDE_BY_SIDE = 64


def run_episodes(
    policy: Policy, seeds: Sequence[int], env_kwargs: dict[str, Any]
) -> list[dict[str, Any]]:
    """:func:`run_episode`'s row for each seed, in order: the same rows, fewer network calls.

    A policy with a ``batch_actor()`` that gives one (a greedy, non-recurrent learned
    model: :meth:`baselines.learned.Learned.batch_actor`) plays the episodes side by
    side, at most :data:`SIDE_BY_SIDE` at a time, one env per seed, and decides for
    every episode still running in one call; its actions are those ``act`` gives one at
    a time, and each env is built, reset and stepped as :func:`run_episode` does it, so
    every row is the same.  Any other policy plays the seeds one after another.
    """
    actor = getattr(policy, "batch_actor", None)
    act = actor() if callable(actor) and len(seeds) > 1 else None
    if act is None:
        return [run_episode(policy, int(s), **env_kwargs) for s in seeds]
    return [
        row
        for start in range(0, len(seeds), SIDE_BY_SIDE)  # bounded memory: live envs
        for row in _side_by_side(policy, act, seeds[start : start + SIDE_BY_SIDE], env_kwargs)
    ]


def _side_by_side(
    policy: Policy,
    act: Callable[[Sequence[Any]], list[int]],
    seeds: Sequence[int],
    env_kwargs: dict[str, Any],
) -> list[dict[str, Any]]:
    """:func:`run_episodes` on ``seeds``, played side by side with the batch actor ``act``."""
    envs: list[Any] = []
    try:
        for _ in seeds:
            envs.append(gym.make("EvalStop-v0", disable_env_checker=True, **env_kwargs))
            _show_space(policy, envs[-1])
        policy.reset()
        obs = [env.reset(seed=int(s))[0] for env, s in zip(envs, seeds)]
        totals, steps = [0.0] * len(envs), [0] * len(envs)
        rows: list[dict[str, Any]] = [{} for _ in envs]
        playing = list(range(len(envs)))
        while playing:
            still = []
            for k, a in zip(playing, act([obs[k] for k in playing])):
                obs[k], reward, terminated, truncated, info = envs[k].step(a)
                totals[k] += float(reward)
                steps[k] += 1
                if terminated or truncated:
                    base = envs[k].unwrapped
                    rows[k] = _outcome(policy, seeds[k], base, steps[k], totals[k], info)[0]
                else:
                    still.append(k)
            playing = still
    finally:
        for env in envs:
            env.close()
    return rows


def evaluate(policy: Policy, seeds: Iterable[int], **env_kwargs: Any) -> list[dict[str, Any]]:
    """Each seed's episode metrics of ``policy`` (a list of flat dicts; see :func:`run_episodes`).

    Raises:
        ConfigError: ``seeds`` is not a non-empty iterable of distinct ints >= 0 (a float
            was truncated, a bool played seed 0 or 1, a count was a TypeError).
    """
    return run_episodes(policy, check_seeds(seeds), env_kwargs)


def check_seeds(
    seeds: Iterable[int],
    allowed: str = "a non-empty iterable of distinct ints >= 0 (e.g. range(10))",
    limit: int | None = None,
) -> list[int]:
    """``seeds`` as a list of ints, once each is an int in [0, ``limit``) and none repeats.

    ``allowed`` is what the error says is allowed (the scorer also takes ``"fresh"``).
    """
    try:
        if isinstance(seeds, str | bytes):
            raise TypeError
        out = list(seeds)
    except TypeError:
        raise ConfigError("seeds", seeds, allowed) from None
    bad = [s for s in out if not is_integer(s) or s < 0 or (limit is not None and s >= limit)]
    if bad or not out:
        raise ConfigError("seeds", bad[:3] if bad else out, allowed)
    out = [int(s) for s in out]
    if len(set(out)) < len(out):
        # A seed played twice counts its episode twice: an interval over seeds narrows on
        # no new evidence.
        twice = ", ".join(map(str, sorted({x for x in out if out.count(x) > 1})[:3]))
        raise ConfigError(
            "seeds", out, f"{allowed} ({twice} repeated: a repeated seed counts twice)"
        )
    return out
