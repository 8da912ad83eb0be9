"""Stoppers that cheat, for tests/experiments/test_isolated.py (loaded by spec, also in children).

* :class:`FramePeeker` walks the call stack from ``act()`` to an env that holds
  a simulator and plays the privileged Oracle on it.
* :class:`SeedMatcher` recognises a public seed (0..29) from the first
  observation, replays that episode in an env of its own, and plays the Oracle
  there in lockstep: it never touches the evaluated env.

Both fall back to :class:`~baselines.policies.EvalStop` ``(2)`` (the fair stopper
the test compares them with) when their trick finds nothing.
"""

from __future__ import annotations

import sys
from typing import Any

import gymnasium as gym
import numpy as np

import evalstop_gym  # noqa: F401  (registers EvalStop-v0)
from baselines.oracle import Oracle
from baselines.policies import EvalStop

#: The env the tests score on (a small hard task).
TASK = "hard-0.12"
N_JOBS = 40


def task_kwargs() -> dict[str, Any]:
    """The env kwargs of the test task (what :func:`evalstop_experiments.scoring.score` plays)."""
    from evalstop_experiments.scoring import env_kwargs

    return env_kwargs(TASK, n_jobs=N_JOBS)


class Fair(EvalStop):
    """The fair comparison: EvalStop(k=2), built with no arguments."""

    def __init__(self) -> None:
        """k = 2."""
        super().__init__(2)


class FramePeeker(Fair):
    """Reads the evaluated env through ``sys._getframe`` and plays the Oracle on it."""

    name = "FramePeeker"

    def reset(self) -> None:
        """Forget the last episode's env."""
        super().reset()
        self.oracle: Oracle | None = None
        self.peeked = False

    def act(self, obs: dict[str, np.ndarray]) -> int:
        """The Oracle's decision if an env is on the stack, else EvalStop(2)'s."""
        if not self.peeked:
            self.peeked = True
            frame = sys._getframe(1)
            while frame is not None and self.oracle is None:
                for value in list(frame.f_locals.values()):
                    base = getattr(value, "unwrapped", None)
                    sim = getattr(base, "sim", None)
                    if sim is not None and hasattr(sim, "curves"):
                        self.oracle = Oracle(sim, base.gpu_hour_price)
                        break
                frame = frame.f_back
        if self.oracle is not None:
            return self.oracle.act_pending()
        return super().act(obs)


class SeedMatcher(Fair):
    """Identifies a public seed from the first observation and replays it with the Oracle."""

    name = "SeedMatcher"

    def reset(self) -> None:
        """A new episode: match again at its first observation."""
        super().reset()
        self.first = True
        self.env: Any = None
        self.oracle: Oracle | None = None

    def act(self, obs: dict[str, np.ndarray]) -> int:
        """The Oracle's decision in the replayed episode, else EvalStop(2)'s."""
        if self.first:
            self.first = False
            kw = task_kwargs()
            for seed in range(30):
                env = gym.make("EvalStop-v0", disable_env_checker=True, **kw)
                mine, _ = env.reset(seed=seed)
                if all(np.array_equal(mine[k], obs[k]) for k in obs):
                    self.env = env
                    self.oracle = Oracle(env.unwrapped.sim, env.unwrapped.gpu_hour_price)
                    break
                env.close()
        if self.oracle is not None:
            action = self.oracle.act_pending()
            self.env.step(action)  # lockstep: the replay sees what the evaluated env sees
            return action
        return super().act(obs)
