"""Bayes on the published regimes decides as it did when their figures were published.

The grounded family's look-ahead simulates every hypothesis and probes; the ``paper``,
``realistic`` and ``hard`` families keep the open-loop look-ahead over their heaviest
hypotheses.  The fixture holds every decision of two 60-job episodes per case, recorded
with the stopper before the grounded family's look-ahead changed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from baselines.bayes import BayesStopper
from evalstop_gym.sim import SimConfig
from evalstop_gym.sim.engine import Simulator

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "bayes_published_decisions.json"
CASES = [
    ("paper", 0.12, "best"),
    ("paper", 0.05, "final"),
    ("realistic", 0.12, "best"),
    ("hard", 0.05, "best"),
    ("hard", 0.12, "best"),
]


@pytest.mark.parametrize(("calibration", "noise", "deliver"), CASES)
def test_published_regimes_take_the_recorded_decisions(calibration, noise, deliver) -> None:
    want = json.loads(FIXTURE.read_text())[f"{calibration}-{noise}-{deliver}"]
    stopper = BayesStopper(calibration, noise, gpu_hour_price=1.2e-3, deliver=deliver)
    bits: list[bool] = []
    for seed in range(2):
        cfg = SimConfig(n_jobs=60, calibration=calibration, eval_noise=noise, deliver=deliver)

        def record(view) -> bool:
            bits.append(stopper(view))
            return bits[-1]

        Simulator(cfg, seed).run(record)
    assert "".join("1" if b else "0" for b in bits) == want
