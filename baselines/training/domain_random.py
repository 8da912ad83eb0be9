"""Domain randomisation for training: each cluster episode drawn from one of several regimes.

A platform's stopper must work on runs whose regime (calibration) and eval
noise it does not know.  :class:`DomainRandomised` holds one ``EvalStop-v0``
per domain (a dict of env arguments, e.g. ``suite_task("hard-0.12")``) and, at
each reset, draws a domain uniformly from its own seeded random stream, then
plays that domain's next cluster episode.  Every domain must observe the same
fields; their eval windows may differ (``paper`` declares 10 checkpoints, the
others 20): a domain with a narrower window is seen through the widest one
(:class:`evalstop_gym.envs.wrappers.PadWindow`: empty slots on the left, exactly
what a wider window shows of the same history), so every episode has one space.

It composes with :class:`evalstop_gym.envs.wrappers.JobEpisodes`: that wrapper
reads the cluster episode through ``env.unwrapped``, which here is the base
env of the domain in play, and its observations through
:meth:`DomainRandomised.observation_at` (padded), so
``JobEpisodes(DomainRandomised(...))`` replays every job of a cluster episode
before the next reset draws a new domain.

:class:`PaddedPolicy` is the same padding on the policy side: a model trained
on a wide window plays an env with a narrower one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

from evalstop_gym.envs.wrappers import WINDOW_FIELDS, PadWindow, pad_observation

#: The regimes and noise levels of the default mixture (E9).
DEFAULT_CALIBRATIONS: tuple[str, ...] = ("paper", "realistic", "hard")
DEFAULT_SIGMAS: tuple[float, ...] = (0.02, 0.05, 0.12)
#: The eval window of E9's models: the others' 20 checkpoints; ``paper`` (10) is padded to it.
COMMON_WINDOW = 20


def mixture_tasks(
    calibrations: Sequence[str] = DEFAULT_CALIBRATIONS, sigmas: Sequence[float] = DEFAULT_SIGMAS
) -> list[str]:
    """Task names (``"<calibration>-<sigma>"``) of every calibration x sigma pair."""
    return [f"{c}-{s:g}" for c in calibrations for s in sigmas]


def domain_kwargs(
    tasks: Sequence[str], n_jobs: int | None = None, eval_window: int | None = COMMON_WINDOW
) -> list[dict[str, Any]]:
    """The env arguments of each suite task, with a shared ``n_jobs`` and ``eval_window``.

    A task declaring fewer checkpoints K than ``eval_window`` gets ``eval_window=K``
    (its whole history): :class:`DomainRandomised` pads it to the widest window.
    """
    from evalstop_gym.suite import suite_task

    out = []
    for t in tasks:
        kw = suite_task(t)
        if n_jobs is not None:
            kw["n_jobs"] = n_jobs
        kw["eval_window"] = None if eval_window is None else min(eval_window, checkpoints(kw))
        out.append(kw)
    return out


def checkpoints(kw: dict[str, Any]) -> int:
    """K, the checkpoints a job declares in the env of ``kw`` (its largest eval window)."""
    from evalstop_gym.envs import EvalStopEnv

    return EvalStopEnv(**{**kw, "eval_window": None}).window


class DomainRandomised(gym.Env):
    """``EvalStop-v0`` whose every cluster episode comes from a randomly drawn domain.

    Args:
        domains: Env arguments of each domain (``gym.make("EvalStop-v0", **d)``).
        weights: Probability of each domain (default uniform).
        window: The eval window every episode is seen through (default: the widest
            domain's); a domain with a narrower one is padded to it.

    Raises:
        ValueError: no domain, weights that do not match, or domains whose
            observation or action spaces differ.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(
        self,
        domains: Sequence[dict[str, Any]],
        weights: Sequence[float] | None = None,
        window: int | None = None,
    ) -> None:
        """Make one env per domain and check that they share their spaces."""
        import evalstop_gym  # noqa: F401  (registers EvalStop-v0)

        if not domains:
            raise ValueError("domains=[] is not allowed: give at least one dict of env arguments")
        self.domains = [dict(d) for d in domains]
        envs = [gym.make("EvalStop-v0", disable_env_checker=True, **d) for d in self.domains]
        windows = [window_of(e.observation_space) for e in envs]
        #: The window every episode is seen through (None: no windowed field observed).
        self.window = None if None in windows else window or max(windows)  # type: ignore[type-var]
        self._envs = [
            PadWindow(e, self.window) if w is not None and w < self.window else e  # type: ignore[operator]
            for e, w in zip(envs, windows)
        ]
        p = np.full(len(domains), 1.0 / len(domains)) if weights is None else np.asarray(weights)
        if p.shape != (len(domains),) or (p < 0).any() or not np.isclose(p.sum(), 1.0):
            raise ValueError(
                f"weights={list(p)} is not allowed: {len(domains)} probabilities summing to 1"
            )
        self.weights = p
        self.observation_space = _union_space([e.observation_space for e in self._envs])
        self.action_space = self._envs[0].action_space
        self.domain = 0  # index of the domain in play

    @property
    def unwrapped(self) -> gym.Env:
        """The base ``EvalStopEnv`` of the domain in play (what ``JobEpisodes`` reads)."""
        return self._envs[self.domain].unwrapped

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Draw a domain and start its next cluster episode (reproducible from ``seed``)."""
        super().reset(seed=seed)
        self.domain = int(self.np_random.choice(len(self._envs), p=self.weights))
        sub_seed = int(self.np_random.integers(2**31 - 1))
        obs, info = self._envs[self.domain].reset(seed=sub_seed, options=options)
        return obs, {**info, "domain": self.domain}

    def step(self, action: Any):
        """Step the cluster episode of the domain in play."""
        return self._envs[self.domain].step(action)

    def observation_at(self, jid: int, ckpt: int) -> dict[str, np.ndarray]:
        """``EvalStopEnv.observation_at`` of the domain in play, in this env's window."""
        return self._envs[self.domain].get_wrapper_attr("observation_at")(jid, ckpt)

    def close(self) -> None:
        """Close every domain's env."""
        for env in self._envs:
            env.close()

    def __repr__(self) -> str:
        """``DomainRandomised(9 domains)``."""
        return f"DomainRandomised({len(self._envs)} domains)"


def _union_space(spaces_: Sequence[gym.spaces.Dict]) -> gym.spaces.Dict:
    """One Dict space holding every domain's observations (same fields and shapes, widest bounds).

    Bounds may differ (``consecutive_declines`` is bounded by a calibration's
    checkpoint count); fields and shapes (windows padded already) may not.
    """
    first = spaces_[0]
    shapes = {k: s.shape for k, s in first.spaces.items()}
    for sp in spaces_[1:]:
        got = {k: s.shape for k, s in sp.spaces.items()}
        if got != shapes:
            raise ValueError(
                f"domains give observation fields/shapes {got} and {shapes}: pass the same "
                f"obs_fields to every domain"
            )
    return gym.spaces.Dict(
        {
            k: gym.spaces.Box(
                np.min([sp[k].low for sp in spaces_], axis=0),
                np.max([sp[k].high for sp in spaces_], axis=0),
                dtype=first[k].dtype,
            )
            for k in first.spaces
        }
    )


def window_of(space: gym.spaces.Dict) -> int | None:
    """The eval window W of an ``EvalStop-v0`` observation space (None: no windowed field)."""
    for f in WINDOW_FIELDS:
        if f in space.spaces:
            return space[f].shape[0] // 2
    return None


class PaddedPolicy:
    """A stopper trained on a ``window``-slot observation, playing an env with a narrower one.

    Each observation is padded (:func:`evalstop_gym.envs.wrappers.pad_observation`)
    before ``policy.act`` sees it: exactly what a ``window``-slot env shows of the
    same history.  ``reset`` and ``name`` are the policy's.
    """

    def __init__(self, policy: Any, window: int) -> None:
        """Wrap ``policy`` (``reset()``, ``act(obs)``) to see ``window``-slot observations."""
        self.policy, self.window = policy, window
        self.name = getattr(policy, "name", repr(policy))

    def reset(self) -> None:
        """Reset the wrapped policy."""
        self.policy.reset()

    def act(self, obs: dict[str, np.ndarray]) -> int:
        """The wrapped policy's action on the padded observation."""
        return self.policy.act(pad_observation(obs, self.window))

    def __repr__(self) -> str:
        """``PaddedPolicy(Learned('m.zip'), 20)``."""
        return f"PaddedPolicy({self.policy!r}, {self.window})"
