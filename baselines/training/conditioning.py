"""Task conditioning: the settings a platform knows about a task, shown to a learned stopper.

A stopper trained on one task sees neither its eval-noise level nor the price of a
GPU-hour nor how many evals a run declares, so it cannot carry a rule from one
task to another: the same drop in a run's evals is a hacking signal at a noise of
0.05 and noise at 0.12, and a rule worth its compute at one price is not at twice
it.  A platform does know these three numbers (it sets the eval budget and pays
the bill, and can measure the noise of its evals), so they are no hidden field.

* :func:`task_settings` — the three settings of an env's config, scaled to O(1);
* :func:`summary_features` — a few statistics of the eval history every stopper
  could compute itself (gap to the running max, in units of the noise, evals since
  the best, trailing slope, ...): a better observation so PPO learns in fewer steps;
* :class:`TaskConditioned` — an observation wrapper of ``EvalStop-v0`` (or of a
  :class:`~baselines.training.domain_random.DomainRandomised` mixture) that adds
  the ``task`` field (and, with ``summary=True``, the ``summary`` field), and
  whose ``observation_at`` is what :class:`~evalstop_gym.envs.wrappers.JobEpisodes`
  replays;
* :class:`Conditioned` — the same fields added on the policy side, so a model
  trained with them plays any env built from the same settings;
* :class:`ConditionedSource` — a picklable ``factory(task, env_kwargs)`` that
  loads a conditioned model for a task (``StopperSpec(name, ConditionedSource(path))``).

The fields are computed from the env's documented settings and from the
observation only: nothing the boundary hides.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from evalstop_gym.errors import ConfigError

#: The observation keys the conditioning adds.
TASK_FIELD = "task"
SUMMARY_FIELD = "summary"
#: What a training run shows its model beyond the boundary fields (``TrainConfig.condition``).
CONDITIONS: tuple[str, ...] = ("none", "task", "task+summary")
#: Scales of the task settings: the suite's price (``evalstop_gym.suite.SUITE_PRICE``), an
#: eval noise of 0.1 and 20 evals a run (the ``hard`` regime's K) each map to 1.
PRICE_SCALE = 1.2e-3
NOISE_SCALE = 0.1
EVALS_SCALE = 20.0
#: ``task`` holds (eval noise / NOISE_SCALE, log2(price / PRICE_SCALE), K / EVALS_SCALE).
TASK_LOW = np.array([0.0, -8.0, 0.0], np.float32)
TASK_HIGH = np.array([20.0, 8.0, 20.0], np.float32)
#: How many of the last evals the summary shows one by one (relative to the max, in noise units).
RECENT = 6
#: Names of the ``summary`` values, in order (each clipped to ±SUMMARY_CLIP).
SUMMARY_NAMES: tuple[str, ...] = (
    "last_minus_max",
    "last_minus_max_z",
    "mean3_minus_max_z",
    "mean5_minus_max_z",
    "evals_since_best",
    "slope5_z",
    "slope10_z",
    "late_minus_early_z",
    "gain_z",
    "best_at",
    "n_evals",
    *(f"eval_minus_max_z_{i}" for i in range(RECENT, 0, -1)),
    "loss_change",
)
SUMMARY_CLIP = 20.0
#: The smallest noise a z-score divides by (a noise-free task still has model jitter).
MIN_NOISE = 0.01


def task_settings(config: Any) -> np.ndarray:
    """(3,) float32: the eval noise, the GPU-hour price and the evals a run declares, scaled.

    ``config`` is an :class:`~evalstop_gym.envs.config.EvalStopConfig` (``env.env_config``).
    The noise is what Bayes and the backward-induction stoppers are told
    (:func:`baselines.bayes.assumed_eval_noise`: on real runs the noise a measured eval
    carries, not the config's extra noise alone).  The price enters as a log2 ratio to
    the suite's price, so 1/2x, 1x and 2x are -1, 0 and 1.
    """
    from baselines.bayes import assumed_eval_noise

    sim = config.sim_config
    noise = assumed_eval_noise(sim)
    price = float(config.gpu_hour_price)
    k = sim.resolved_calibration().evals_per_job
    log_price = math.log2(price / PRICE_SCALE) if price > 0 else float(TASK_LOW[1])
    raw = np.array([noise / NOISE_SCALE, log_price, k / EVALS_SCALE], np.float32)
    return np.clip(raw, TASK_LOW, TASK_HIGH)


def task_settings_of(env_kwargs: dict[str, Any]) -> np.ndarray:
    """:func:`task_settings` of the env ``gym.make("EvalStop-v0", **env_kwargs)`` would build."""
    from evalstop_gym.envs.config import EvalStopConfig

    return task_settings(EvalStopConfig.from_kwargs(**env_kwargs))


def summary_features(obs: dict[str, np.ndarray], noise: float, k: int) -> np.ndarray:
    """(len(SUMMARY_NAMES),) float32: statistics of the observed eval history.

    z-scores divide by ``noise`` (at least :data:`MIN_NOISE`); counts divide by ``k``.
    Needs ``evals`` in the observation (zeros without it or before the first eval).
    """
    out = np.zeros(len(SUMMARY_NAMES), np.float32)
    if "evals" not in obs:
        return out
    y = _observed(obs["evals"])
    if len(y) == 0:
        return out
    s = max(float(noise), MIN_NOISE)
    best = int(np.argmax(y))
    top, last = float(y[best]), float(y[-1])
    half = len(y) // 2
    recent = np.zeros(RECENT)
    tail = y[-RECENT:]
    recent[RECENT - len(tail) :] = (tail - top) / s
    loss = _observed(obs["loss"]) if "loss" in obs else np.zeros(0)
    loss_change = float(loss[-1] - loss[-4]) if len(loss) >= 4 else 0.0
    out[:] = (
        last - top,
        (last - top) / s,
        (float(np.mean(y[-3:])) - top) / s,
        (float(np.mean(y[-5:])) - top) / s,
        (len(y) - 1 - best) / k,
        _slope(y[-5:]) / s,
        _slope(y[-10:]) / s,
        (float(np.mean(y[half:])) - float(np.mean(y[:half]))) / s if half else 0.0,
        (top - float(y[0])) / s,
        (best + 1) / k,
        len(y) / k,
        *recent,
        loss_change,
    )
    return np.clip(out, -SUMMARY_CLIP, SUMMARY_CLIP)


def _observed(window: np.ndarray) -> np.ndarray:
    """The values present in a windowed field (its first half, where its mask is set)."""
    w = len(window) // 2
    return np.asarray(window[:w], float)[np.asarray(window[w:]) > 0.5]


def _slope(y: np.ndarray) -> float:
    """Least-squares slope of ``y`` per eval (0 for fewer than two values)."""
    n = len(y)
    if n < 2:
        return 0.0
    x = np.arange(n) - (n - 1) / 2
    return float(x @ (y - y.mean()) / (x @ x))


def added_spaces(summary: bool) -> dict[str, spaces.Box]:
    """The Boxes of the fields the conditioning adds (``task``, and ``summary`` if asked)."""
    out = {TASK_FIELD: spaces.Box(TASK_LOW, TASK_HIGH, dtype=np.float32)}
    if summary:
        n = len(SUMMARY_NAMES)
        out[SUMMARY_FIELD] = spaces.Box(-SUMMARY_CLIP, SUMMARY_CLIP, (n,), np.float32)
    return out


def check_condition(condition: str) -> None:
    """Refuse a condition other than :data:`CONDITIONS`."""
    if condition not in CONDITIONS:
        raise ConfigError("condition", condition, f"one of {list(CONDITIONS)}")


class _Adder:
    """Adds the conditioning fields to one observation, for a task's settings."""

    def __init__(self, settings: np.ndarray, summary: bool) -> None:
        self.settings = np.asarray(settings, np.float32)
        self.summary = summary
        self.noise = float(self.settings[0]) * NOISE_SCALE
        self.k = max(1, round(float(self.settings[2]) * EVALS_SCALE))

    def __call__(self, obs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        out = dict(obs)
        out[TASK_FIELD] = self.settings.copy()
        if self.summary:
            out[SUMMARY_FIELD] = summary_features(obs, self.noise, self.k)
        return out


class TaskConditioned(gym.Wrapper):
    """``EvalStop-v0`` (or a mixture of tasks) whose observation also shows the task's settings.

    The settings are read from ``env.unwrapped.env_config`` at every reset, so under a
    :class:`~baselines.training.domain_random.DomainRandomised` mixture each cluster
    episode shows its own domain's noise, price and K.

    Args:
        env: An env with ``EvalStop-v0``'s Dict observation.
        summary: Also add :func:`summary_features` as the ``summary`` field.
    """

    def __init__(self, env: gym.Env, summary: bool = False) -> None:
        """Extend ``env``'s observation space by the conditioning fields."""
        super().__init__(env)
        base = env.observation_space
        if not isinstance(base, spaces.Dict) or TASK_FIELD in base.spaces:
            raise ConfigError(
                "env", repr(env), f"an env with a Dict observation and no {TASK_FIELD!r} field"
            )
        self.summary = summary
        self.observation_space = spaces.Dict({**base.spaces, **added_spaces(summary)})
        self._inner_observation_at = env.get_wrapper_attr("observation_at")
        self._add = _Adder(task_settings(env.unwrapped.env_config), summary)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Reset ``env`` and read the settings of the episode it drew."""
        obs, info = self.env.reset(seed=seed, options=options)
        self._add = _Adder(task_settings(self.env.unwrapped.env_config), self.summary)
        return self._add(obs), info

    def step(self, action: Any):
        """Step ``env``; the observation gains the conditioning fields."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        return self._add(obs), reward, terminated, truncated, info

    def observation_at(self, jid: int, ckpt: int) -> dict[str, np.ndarray]:
        """``env``'s ``observation_at`` with the conditioning fields (what JobEpisodes replays)."""
        return self._add(self._inner_observation_at(jid, ckpt))


class Conditioned:
    """A stopper trained on conditioned observations, playing an env that shows none.

    Each observation gets the fields :class:`TaskConditioned` would have added for the
    env's settings before ``policy.act`` sees it.  ``reset`` and ``name`` are the
    policy's.

    Args:
        policy: The stopper (``reset()``, ``act(obs)``), e.g. a :class:`baselines.Learned`.
        settings: :func:`task_settings` of the env it plays (:func:`task_settings_of`).
        summary: Whether it was trained with the ``summary`` field too.
    """

    def __init__(self, policy: Any, settings: np.ndarray, summary: bool = False) -> None:
        """Wrap ``policy`` for an env with these settings."""
        self.policy = policy
        self._add = _Adder(settings, summary)
        self.summary = summary
        self.name = getattr(policy, "name", repr(policy))

    def reset(self) -> None:
        """Reset the wrapped policy."""
        self.policy.reset()

    def check_observation_space(self, space: spaces.Dict) -> None:
        """The wrapped policy's check, on ``space`` extended by the conditioning fields."""
        check = getattr(self.policy, "check_observation_space", None)
        if check is not None:
            check(spaces.Dict({**space.spaces, **added_spaces(self.summary)}))

    def act(self, obs: dict[str, np.ndarray]) -> int:
        """The wrapped policy's action on the conditioned observation."""
        return int(self.policy.act(self._add(obs)))

    def __repr__(self) -> str:
        """``Conditioned(Learned('m.zip'), [1.2, 0.0, 1.0])``."""
        shown = [round(float(x), 3) for x in self._add.settings]
        return f"Conditioned({self.policy!r}, {shown})"


def condition_of(meta: dict[str, Any]) -> str:
    """The condition a model was trained with, from its metadata (``"none"`` if unrecorded)."""
    fields = meta.get("obs_fields") or []
    if TASK_FIELD not in fields:
        return "none"
    return "task+summary" if SUMMARY_FIELD in fields else "task"


@dataclass(frozen=True)
class ConditionedSource:
    """A picklable ``factory(task, env_kwargs)``: the conditioned model at ``path`` for a task.

    Loads the model (its ``.sha256`` record checked, as :class:`baselines.Learned` does)
    and wraps it in :class:`Conditioned` with the settings of ``env_kwargs``; a model
    trained without conditioning is returned unwrapped.
    """

    path: str
    label: str | None = None

    def __call__(self, task: str, kw: dict[str, Any]) -> Any:
        """The stopper for ``task`` (env kwargs ``kw``)."""
        from ..learned import Learned

        model = Learned(self.path, label=self.label)
        condition = condition_of(model.meta)
        if condition == "none":
            return model
        return Conditioned(model, task_settings_of(kw), summary=condition == "task+summary")


def make_conditioned_env(
    env_kwargs: dict[str, Any] | None = None,
    summary: bool = False,
    make_base: Any = None,
) -> gym.Env:
    """``TaskConditioned`` over ``EvalStop-v0(**env_kwargs)`` (or over ``make_base()``).

    Module-level, so a :func:`functools.partial` of it is picklable (SubprocVecEnv, the
    batched periodic evaluation).
    """
    import evalstop_gym  # noqa: F401  (registers EvalStop-v0)

    env = make_base() if make_base is not None else None
    if env is None:
        env = gym.make("EvalStop-v0", disable_env_checker=True, **(env_kwargs or {}))
    return TaskConditioned(env, summary=summary)


__all__ = [
    "CONDITIONS",
    "SUMMARY_FIELD",
    "SUMMARY_NAMES",
    "TASK_FIELD",
    "Conditioned",
    "ConditionedSource",
    "TaskConditioned",
    "added_spaces",
    "check_condition",
    "condition_of",
    "make_conditioned_env",
    "summary_features",
    "task_settings",
    "task_settings_of",
]
