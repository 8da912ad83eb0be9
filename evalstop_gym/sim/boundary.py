"""The information boundary (the paper's C1): what a stopping policy may see.

A policy never receives a simulator object.  At each eval checkpoint the
engine copies the whitelisted fields of that job into a fresh, immutable
:class:`JobView` holding only numbers; hidden state (hack label, true peak,
true duration, noise-free curve) is not reachable from it.
"""

from __future__ import annotations

from typing import NamedTuple

#: The whitelist of observable fields, in observation order.
BOUNDARY_FIELDS: tuple[str, ...] = ("job_type", "evals", "consecutive_declines", "progress", "loss")

#: Fields a policy must never see during an episode (they reach only the metrics).
HIDDEN_FIELDS: tuple[str, ...] = (
    "hacking",
    "peak_progress",
    "duration",
    "true_eval",
    "proxy",
)


class JobView(NamedTuple):
    """What a stopper knows about the job at its current eval checkpoint.

    An immutable tuple of numbers (cheap to build at every checkpoint, and
    holding no reference to any simulator object).

    Attributes:
        job_type: 0 LoRA, 1 DPO, 2 RLHF.
        evals: The last W observed eval scores, oldest first (fewer early on).
        consecutive_declines: Evals in a row lower than the one before.
        progress: Declared progress, checkpoints done / checkpoints declared.
        loss: The last W observed training-loss values (relative to the initial loss).
    """

    job_type: int
    evals: tuple[float, ...]
    consecutive_declines: int
    progress: float
    loss: tuple[float, ...]
