"""Playing a simulator to its end with seeded random decisions (the fast-path tests' episode).

The fast-path tests run one episode twice, once with a shortcut and once without, and
compare what :func:`play` returns to the bit.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def play(sim: Any, stop_seed: int, n_actions: int = 2) -> tuple[Any, ...]:
    """Decide every checkpoint of ``sim`` (stop seed 0: always continue, else a random
    action of ``n_actions`` drawn from ``stop_seed``); its events and metrics."""
    rng = np.random.default_rng(stop_seed)
    while sim.next_decision() is not None:
        sim.decide(int(rng.integers(n_actions)) if stop_seed else 0)
    return sim.events, sim.metrics(), sim.cluster_metrics()
