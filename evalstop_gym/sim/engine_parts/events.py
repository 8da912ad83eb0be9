"""The engine's vocabulary: heap event kinds, the decisions at a checkpoint, the event log.

:data:`ARRIVAL` and :data:`CHECKPOINT` tag the events the loop pops; a stopper
(:data:`Stopper`) answers :data:`CONTINUE`, :data:`STOP` or :data:`DEPRIORITIZE`; with
``record_events=True`` the engine keeps an :class:`Event` per change of state.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..boundary import JobView

# Heap event kinds.  At equal times the counter keeps insertion order.
ARRIVAL, CHECKPOINT = 0, 1
#: Decisions at a checkpoint: continue, stop, deprioritise (``decide`` also takes the names).
CONTINUE, STOP, DEPRIORITIZE = 0, 1, 2

Stopper = Callable[[JobView], Any]


@dataclass(frozen=True)
class Event:
    """One entry of the optional event log (``record_events=True``)."""

    time: float
    kind: str  # arrival | start | eval | preempt | complete | stop
    jid: int
    free_gpus: int
