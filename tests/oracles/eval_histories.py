"""A hypothesis strategy for the eval histories the Bayes stopper's equivalence tests feed it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from hypothesis import strategies as st


@st.composite
def eval_histories(
    draw: st.DrawFn, stoppers: Mapping[str, Any], short_of_k: int
) -> tuple[str, int, np.ndarray]:
    """(stopper key, job type, evals): 1 .. K - ``short_of_k`` evals of a level, a trend and
    noise of any spread (0: every eval equal), rounded to 2 decimals or not (ties between
    evals, and evals that equal simulated ones less often)."""
    key = draw(st.sampled_from(sorted(stoppers)))
    stopper = stoppers[key]
    job_type = draw(st.sampled_from(sorted(stopper._families)))
    n = draw(st.integers(1, stopper.k - short_of_k))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    level, trend = draw(st.floats(-0.5, 1.5)), draw(st.floats(-0.05, 0.08))
    spread = draw(st.sampled_from([0.0, 0.02, 0.1, 0.3]))
    evals = level + trend * np.arange(n) + spread * rng.standard_normal(n)
    if draw(st.booleans()):
        evals = np.round(evals, 2)
    return key, job_type, evals
