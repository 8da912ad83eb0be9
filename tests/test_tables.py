"""The env's per-episode tables agree with the engine's step-by-step bookkeeping."""

from __future__ import annotations

import inspect
import re

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import evalstop_gym.envs.evalstop as env_module
from evalstop_gym.sim.checkpoints import best_so_far, consecutive_declines

# Small integer grids make ties (and hence the strict comparisons) frequent.
curves = st.integers(1, 6).flatmap(
    lambda n: st.integers(2, 8).flatmap(
        lambda k: st.lists(
            st.lists(st.integers(0, 3).map(float), min_size=k, max_size=k),
            min_size=n,
            max_size=n,
        )
    )
)


def _engine_bookkeeping(ev: list[float]) -> tuple[list[int], list[int]]:
    """The engine's per-checkpoint rule, written out (Simulator._checkpoint)."""
    best, dec, bests, decs = -1, 0, [], []
    for i in range(1, len(ev) + 1):
        dec = dec + 1 if i >= 2 and ev[i - 1] < ev[i - 2] else 0
        if best < 0 or ev[i - 1] > ev[best]:
            best = i - 1
        bests.append(best)
        decs.append(dec)
    return bests, decs


@settings(max_examples=60, deadline=None)
@given(curves)
def test_tables_match_the_engine_rule(rows: list[list[float]]) -> None:
    ev = np.asarray(rows)
    best, dec = best_so_far(ev), consecutive_declines(ev)
    for j, row in enumerate(rows):
        b, d = _engine_bookkeeping(row)
        assert best[j].tolist() == b
        assert dec[j].tolist() == d


def test_env_uses_only_the_simulators_public_api() -> None:
    source = inspect.getsource(env_module)
    assert not re.search(r"sim\._\w", source)
    for name in (r"\bckpt_done\b", r"\bbest_idx\b", r"\bfinished_order\b", r"sim\.jobs\b"):
        assert not re.search(name, source), name
