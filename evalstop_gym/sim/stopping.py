"""The simulator's own stopping rules, usable as ``Simulator.run(stopper)``.

These are the reference implementations the paper describes, kept next to the
engine so that the simulator can run a whole episode without ``baselines``;
``baselines.EvalStop`` reproduces :class:`KDeclineRule` through the
Gymnasium observation, decision for decision.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigError
from .boundary import JobView


@dataclass(frozen=True)
class KDeclineRule:
    """EvalStop's detector: stop after ``k`` consecutive eval declines."""

    k: int = 2

    def __post_init__(self) -> None:
        """Refuse a ``k`` that is not an integer >= 1."""
        if not isinstance(self.k, int) or isinstance(self.k, bool) or self.k < 1:
            raise ConfigError("k", self.k, "an integer >= 1")

    def __call__(self, view: JobView) -> bool:
        """Stop when the job's evals have declined ``k`` times in a row."""
        return view.consecutive_declines >= self.k


def never_stop(view: JobView) -> bool:
    """The no-stop baseline."""
    return False
