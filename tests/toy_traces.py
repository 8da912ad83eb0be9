"""Toy curve traces for the tests that build a small corpus (real-curve jobs, E7)."""

from __future__ import annotations

import numpy as np

from evalstop_gym.corpus import CurveTrace


def toy_trace(run_id: str, gold: list[float], label: bool) -> CurveTrace:
    """A trace whose eval is its gold curve plus 0.01, with steady loss, proxy and KL."""
    n = len(gold)
    g = np.asarray(gold)
    return CurveTrace(
        run_id=run_id,
        step=np.arange(n) * 10,
        eval=g + 0.01,
        loss=np.linspace(2.0, 1.0, n),
        proxy=np.linspace(0, 1, n),
        kl=np.linspace(0, 4, n),
        gold=g,
        label=label,
    )
