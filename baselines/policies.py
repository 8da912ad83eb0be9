"""Scripted stopping policies: one interface, ``reset()`` and ``act(obs) -> int``.

Every policy reads only the observation the environment hands it (the
information boundary), so scripted and learned stoppers run through the very
same code path (:func:`baselines.evaluate`).  Actions: 0 continue, 1 stop,
and 2 deprioritise (:data:`DEPRIORITIZE`), which only :class:`Deprioritize`
returns and only an env built with ``deprioritize=True`` accepts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, runtime_checkable

import numpy as np

from evalstop_gym.envs.tables import observed
from evalstop_gym.errors import ConfigError
from evalstop_gym.sim.workloads import JOB_TYPES

Obs = Mapping[str, np.ndarray]
#: The action that deprioritises a job instead of stopping it (the simulator's ``decide(2)``).
DEPRIORITIZE = 2


@runtime_checkable
class Policy(Protocol):
    """What :func:`baselines.evaluate` needs from a stopper."""

    name: str

    def reset(self) -> None:
        """Forget any per-episode state (called before every episode)."""
        ...

    def act(self, obs: Obs) -> int:
        """The decision on the job in ``obs``: 0 continue, 1 stop and save (2 deprioritise)."""
        ...


def need_field(obs: Obs, field: str, policy: str) -> np.ndarray:
    """``obs[field]``, or a KeyError saying which policy needs it and what the env gives."""
    try:
        return obs[field]
    except KeyError:
        raise KeyError(
            f"{policy} needs the observation field {field!r}; "
            f"the environment gives {sorted(obs)} (check obs_fields)"
        ) from None


class NoStop:
    """Never stop: the platform's baseline."""

    name = "NoStop"

    def reset(self) -> None:
        """Nothing to forget: the decision depends on the observation alone."""

    def act(self, obs: Obs) -> int:
        """Always continue."""
        return 0

    def __repr__(self) -> str:
        """Class name."""
        return "NoStop()"


class EvalStop:
    """The paper's detector: stop after ``k`` consecutive eval declines."""

    def __init__(self, k: int = 2) -> None:
        """Stop after ``k`` consecutive eval declines."""
        if not isinstance(k, int) or isinstance(k, bool) or k < 1:
            raise ConfigError("k", k, "an integer >= 1")
        self.k = k
        self.name = "EvalStop" if k == 2 else f"EvalStop(k={k})"

    def reset(self) -> None:
        """Nothing to forget: the decision depends on the observation alone."""

    def act(self, obs: Obs) -> int:
        """Stop once the job's consecutive eval declines reach ``k``."""
        # +0.5: the count travels as float32; compare robustly to the integer k.
        return int(need_field(obs, "consecutive_declines", self.name)[0] + 0.5 >= self.k)

    def __repr__(self) -> str:
        """Class name and k."""
        return f"EvalStop(k={self.k})"


class Deprioritize(EvalStop):
    """The prior work's alternative to stopping: on ``k`` consecutive eval declines, demote.

    The same detector as :class:`EvalStop`, but the flagged job is deprioritised
    (action 2) instead of stopped: it runs on at the back of the base
    scheduler's order, only while no waiting job could use its GPUs.  Needs
    ``EvalStop-v0`` with ``deprioritize=True``.
    """

    def __init__(self, k: int = 2) -> None:
        """Demote after ``k`` consecutive eval declines."""
        super().__init__(k)
        self.name = "Deprioritize" if k == 2 else f"Deprioritize(k={k})"

    def act(self, obs: Obs) -> int:
        """2 (deprioritise) once the job shows ``k`` consecutive declines, else 0."""
        return DEPRIORITIZE * super().act(obs)

    def __repr__(self) -> str:
        """Class name and k."""
        return f"Deprioritize(k={self.k})"


class StopAtProgress:
    """Stop every job of the given types once declared progress reaches ``threshold``.

    ``StopAtProgress(0.65)`` is the paper's StopAt-0.65 baseline (RLHF jobs only):
    a constant classifier whose precision equals the base rate of hacking.
    """

    def __init__(self, threshold: float = 0.65, job_types: tuple[str, ...] = ("rlhf",)) -> None:
        """Stop jobs of ``job_types`` at declared progress ``threshold``."""
        if not isinstance(threshold, int | float) or not 0.0 < threshold <= 1.0:
            raise ConfigError("threshold", threshold, "a progress in (0, 1]")
        bad = [t for t in job_types if t not in JOB_TYPES]
        if bad or not job_types:
            raise ConfigError("job_types", job_types, f"a non-empty subset of {list(JOB_TYPES)}")
        self.threshold = float(threshold)
        self.job_types = tuple(job_types)
        self._type_idx = [JOB_TYPES.index(t) for t in job_types]
        self.name = f"StopAt-{threshold:g}"

    def reset(self) -> None:
        """Nothing to forget: the decision depends on the observation alone."""

    def act(self, obs: Obs) -> int:
        """Stop a job of the chosen types once its declared progress reaches the threshold."""
        progress = float(need_field(obs, "progress", self.name)[0])
        job_type = int(np.argmax(need_field(obs, "job_type", self.name)))
        # A hair of tolerance: progress travels as float32 (e.g. 0.7 -> 0.69999).
        return int(job_type in self._type_idx and progress >= self.threshold - 1e-6)

    def __repr__(self) -> str:
        """Class name and parameters."""
        return f"StopAtProgress({self.threshold:g}, job_types={self.job_types})"


class LossPlateau:
    """Stop when the training loss stopped improving: a loss-based early stopper.

    Stops when the relative loss reduction over the last ``window`` checkpoints,
    (loss[-1 - window] - loss[-1]) / loss[-1 - window], is below ``tolerance``.
    Needs ``window + 1`` observed losses (so ``window`` < the env's eval_window).
    """

    def __init__(self, window: int = 3, tolerance: float = 0.02) -> None:
        """Stop when the loss fell by less than ``tolerance`` over ``window`` checkpoints."""
        if not isinstance(window, int) or isinstance(window, bool) or window < 1:
            raise ConfigError("window", window, "an integer >= 1")
        if not isinstance(tolerance, int | float) or tolerance < 0:
            raise ConfigError("tolerance", tolerance, "a number >= 0")
        self.window = window
        self.tolerance = float(tolerance)
        self.name = "LossPlateau"

    def reset(self) -> None:
        """Nothing to forget: the decision depends on the observation alone."""

    def act(self, obs: Obs) -> int:
        """Stop once the relative loss reduction over the window is below the tolerance."""
        loss = observed(need_field(obs, "loss", self.name))
        if len(loss) <= self.window:
            return 0
        before, now = float(loss[-1 - self.window]), float(loss[-1])
        if before <= 0:
            return 0
        return int((before - now) / before < self.tolerance)

    def __repr__(self) -> str:
        """Class name and parameters."""
        return f"LossPlateau(window={self.window}, tolerance={self.tolerance:g})"


def scripted_policies() -> list[Policy]:
    """The paper's four scripted stoppers, with their default parameters."""
    return [NoStop(), EvalStop(2), StopAtProgress(0.65), LossPlateau()]
