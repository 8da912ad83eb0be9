"""Domain randomisation for training: each cluster episode drawn from one of several regimes.

A platform's stopper must work on runs whose regime (calibration) and eval
noise it does not know.  :class:`DomainRandomised` holds one ``EvalStop-v0``
per domain (a dict of env arguments, e.g. ``suite_task("hard-0.12")``) and, at
each reset, draws a domain uniformly from its own seeded random stream, then
plays that domain's next cluster episode.  Every domain must give the same
observation space (for calibrations with different checkpoint counts, pass
one ``eval_window`` no larger than the smallest; :data:`COMMON_WINDOW`).

It composes with :class:`evalstop_gym.envs.wrappers.JobEpisodes`: that wrapper
reads the cluster episode through ``env.unwrapped``, which here is the base
env of the domain in play, so ``JobEpisodes(DomainRandomised(...))`` replays
every job of a cluster episode before the next reset draws a new domain.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

#: The regimes and noise levels of the default mixture (issue 11, E9).
DEFAULT_CALIBRATIONS: tuple[str, ...] = ("paper", "realistic", "hard")
DEFAULT_SIGMAS: tuple[float, ...] = (0.02, 0.05, 0.12)
#: An eval window every calibration allows (``paper`` declares 10 checkpoints, the others 20).
COMMON_WINDOW = 10


def mixture_tasks(
    calibrations: Sequence[str] = DEFAULT_CALIBRATIONS, sigmas: Sequence[float] = DEFAULT_SIGMAS
) -> list[str]:
    """Task names (``"<calibration>-<sigma>"``) of every calibration x sigma pair."""
    return [f"{c}-{s:g}" for c in calibrations for s in sigmas]


def domain_kwargs(
    tasks: Sequence[str], n_jobs: int | None = None, eval_window: int | None = COMMON_WINDOW
) -> list[dict[str, Any]]:
    """The env arguments of each suite task, with a shared ``n_jobs`` and ``eval_window``."""
    from evalstop_gym.suite import suite_task

    out = []
    for t in tasks:
        kw = suite_task(t)
        kw["eval_window"] = eval_window
        if n_jobs is not None:
            kw["n_jobs"] = n_jobs
        out.append(kw)
    return out


class DomainRandomised(gym.Env):
    """``EvalStop-v0`` whose every cluster episode comes from a randomly drawn domain.

    Args:
        domains: Env arguments of each domain (``gym.make("EvalStop-v0", **d)``).
        weights: Probability of each domain (default uniform).

    Raises:
        ValueError: no domain, weights that do not match, or domains whose
            observation or action spaces differ.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(
        self, domains: Sequence[dict[str, Any]], weights: Sequence[float] | None = None
    ) -> None:
        """Make one env per domain and check that they share their spaces."""
        import evalstop_gym  # noqa: F401  (registers EvalStop-v0)

        if not domains:
            raise ValueError("domains=[] is not allowed: give at least one dict of env arguments")
        self.domains = [dict(d) for d in domains]
        self._envs = [gym.make("EvalStop-v0", disable_env_checker=True, **d) for d in self.domains]
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
    checkpoint count); fields and shapes may not.
    """
    first = spaces_[0]
    shapes = {k: s.shape for k, s in first.spaces.items()}
    for sp in spaces_[1:]:
        got = {k: s.shape for k, s in sp.spaces.items()}
        if got != shapes:
            raise ValueError(
                f"domains give observation fields/shapes {got} and {shapes}: pass the same "
                f"obs_fields and one eval_window (<= {COMMON_WINDOW}) to every domain"
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
