"""The env's per-episode tables agree with the engine's step-by-step bookkeeping."""

from __future__ import annotations

import ast
import inspect
from types import ModuleType

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalstop_gym import KDeclineRule, SimConfig, Simulator
from evalstop_gym.envs import cluster, core, evalstop, flat, render, rewards, vector, wrappers
from evalstop_gym.envs.core import SIMULATOR_SURFACE
from evalstop_gym.sim.checkpoints import best_so_far, consecutive_declines
from evalstop_gym.sim.utility import delivered_quality, stop_values

#: Every module of the env layer that touches a simulator or another env's state.
ENV_MODULES: tuple[ModuleType, ...] = (
    core,
    rewards,
    render,
    evalstop,
    vector,
    cluster,
    flat,
    wrappers,
)

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


def _attributes(module: ModuleType) -> list[ast.Attribute]:
    return [
        n for n in ast.walk(ast.parse(inspect.getsource(module))) if isinstance(n, ast.Attribute)
    ]


def _is_simulator(node: ast.expr) -> bool:
    """``sim``, or ``<anything>.sim``: how the env modules name the simulator."""
    return (isinstance(node, ast.Name) and node.id == "sim") or (
        isinstance(node, ast.Attribute) and node.attr == "sim"
    )


def test_env_modules_read_the_simulator_only_through_its_named_surface() -> None:
    for module in ENV_MODULES:
        used = {n.attr for n in _attributes(module) if _is_simulator(n.value)}
        assert used <= SIMULATOR_SURFACE, (module.__name__, sorted(used - SIMULATOR_SURFACE))
    # The surface is the simulator's own, public and present during an episode.
    sim = Simulator(SimConfig(n_jobs=5, deliver="best"), 0)
    sim.next_decision()
    for name in SIMULATOR_SURFACE:
        assert not name.startswith("_") and hasattr(sim, name), name


def test_env_modules_read_no_other_objects_private_members() -> None:
    for module in ENV_MODULES:
        private = [
            f"{module.__name__}:{n.lineno} .{n.attr}"
            for n in _attributes(module)
            if n.attr.startswith("_")
            and not n.attr.startswith("__")
            and not (isinstance(n.value, ast.Name) and n.value.id in ("self", "cls"))
        ]
        assert private == []


@pytest.mark.parametrize("deliver", ["final", "best"])
def test_delivered_quality_is_what_the_simulator_delivers(deliver: str) -> None:
    sim = Simulator(SimConfig(n_jobs=30, deliver=deliver), 3)
    sim.run(KDeclineRule(2))
    c = sim.curves
    q = delivered_quality(c.true_eval, sim.best_observed, sim.deliver_best)
    for jid in range(sim.n_jobs):
        assert (
            q[jid, sim.checkpoints_done(jid) - 1] == c.true_eval[jid, sim.delivered_checkpoint(jid)]
        )
    # stop_values' quality part is the same table (price 0), from the observed evals alone.
    zero = stop_values(c.true_eval, c.obs_eval, np.ones(sim.n_jobs), 0.0, sim.deliver_best)
    np.testing.assert_array_equal(zero, q)
