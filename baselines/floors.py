"""Floors that catch exploits: a stopper that cannot beat them learned the calibration.

* :class:`StopAtProgress` (in :mod:`baselines.policies`), swept over its
  threshold, stops every RLHF run at one progress: it detects nothing.
* :class:`FirstEvalGate` stops an RLHF run at a fixed progress if its first
  evals look like those of a hacking run (above a threshold).  In a regime
  whose early evals identify the label (``paper``: AUC ~1) this floor is
  nearly optimal; in ``hard`` it can only be as good as the best StopAt-p.

Both are tuned on validation seeds (``evalstop_experiments.scoring``).
"""

from __future__ import annotations

import numpy as np

from evalstop_gym.errors import ConfigError
from evalstop_gym.sim.workloads import RLHF

from .policies import Obs, need_field, observed


class FirstEvalGate:
    """Stop an RLHF run at progress ``stop_at`` if the mean of its first evals exceeds ``threshold``.

    The first evals are those at declared progress <= ``early`` (at least one),
    so the policy needs the whole history (``eval_window = K``).
    """

    def __init__(self, stop_at: float, threshold: float, early: float = 0.1) -> None:
        """Validate the stop progress, the threshold and the early window."""
        if not isinstance(stop_at, int | float) or not 0.0 < stop_at <= 1.0:
            raise ConfigError("stop_at", stop_at, "a progress in (0, 1]")
        if not isinstance(threshold, int | float) or np.isnan(threshold):
            raise ConfigError("threshold", threshold, "a number (-inf stops every RLHF run)")
        if not isinstance(early, int | float) or not 0.0 < early < 1.0:
            raise ConfigError("early", early, "a progress in (0, 1)")
        self.stop_at, self.threshold, self.early = float(stop_at), float(threshold), float(early)
        self.name = f"Gate-{stop_at:g}@{threshold:.3g}"

    def reset(self) -> None:
        """Stateless."""

    def act(self, obs: Obs) -> int:
        """Stop once at ``stop_at`` if the job is RLHF and its first evals were high."""
        progress = float(need_field(obs, "progress", self.name)[0])
        if int(np.argmax(need_field(obs, "job_type", self.name))) != RLHF:
            return 0
        if progress < self.stop_at - 1e-6:
            return 0
        return int(float(np.mean(self.first_evals(obs))) > self.threshold)

    def first_evals(self, obs: Obs) -> np.ndarray:
        """The observed evals at declared progress <= ``early`` (at least the first one)."""
        evals = observed(need_field(obs, "evals", self.name))
        progress = float(need_field(obs, "progress", self.name)[0])
        # n evals at `progress` means K = n / progress checkpoints in all.
        n_early = max(1, int(np.floor(self.early * len(evals) / progress + 1e-6)))
        return evals[:n_early]

    def __repr__(self) -> str:
        """Its parameters."""
        return f"FirstEvalGate({self.stop_at:g}, {self.threshold:g}, early={self.early:g})"
