"""Bayes on the grounded family decides as the stopper that the suite's figures used.

The grounded family (``BayesStopper.for_task("grounded-0.05")``) simulates all of its
hypotheses and weighs probing policies (``_probe_value``), which the published-regime
fixture does not reach.  The fixture holds every decision of 60-job ``grounded-0.05``
episodes (seeds 5000-5002, both delivery modes, and two more price multiples), recorded
with the stopper whose look-ahead had no caches or shortcuts.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from baselines.bayes import BayesStopper
from evalstop_gym.sim.engine import Simulator
from evalstop_gym.suite import suite_config

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "bayes_grounded_decisions.json"
CASES = [
    ("best", 1.0, 5000),
    ("best", 1.0, 5001),
    ("best", 1.0, 5002),
    ("final", 1.0, 5000),
    ("final", 1.0, 5001),
    ("final", 1.0, 5002),
    ("best", 0.5, 5000),
    ("best", 2.0, 5000),
]


def case_key(deliver: str, price_factor: float, seed: int) -> str:
    """The fixture's key of one episode."""
    return f"grounded-0.05-{deliver}-x{price_factor}-{seed}"


def decisions(deliver: str, price_factor: float, seed: int) -> str:
    """Every decision of one 60-job episode, in order, as a string of 0 (go on) and 1 (stop)."""
    task = suite_config("grounded-0.05")
    sim_cfg = replace(task.sim_config, n_jobs=60, deliver=deliver)
    stopper = BayesStopper.from_config(replace(task, sim_config=sim_cfg), price_factor)
    bits: list[bool] = []

    def record(view) -> bool:
        bits.append(stopper(view))
        return bits[-1]

    Simulator(sim_cfg, seed).run(record)
    return "".join("1" if b else "0" for b in bits)


@pytest.mark.parametrize(("deliver", "price_factor", "seed"), CASES)
def test_grounded_family_takes_the_recorded_decisions(deliver, price_factor, seed) -> None:
    want = json.loads(FIXTURE.read_text())[case_key(deliver, price_factor, seed)]
    got = decisions(deliver, price_factor, seed)
    assert len(got) == len(want)
    assert got == want
