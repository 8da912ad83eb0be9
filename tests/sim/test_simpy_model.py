"""The SimPy reference model of benchmarks/ replays our episodes event for event."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from evalstop_gym import SAMPLE_TRACE, KDeclineRule, SimConfig, Simulator

pytest.importorskip("simpy")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "speed"))
from simpy_cluster import SimPyCluster


@pytest.mark.parametrize(
    "cfg",
    [
        SimConfig(n_jobs=200),
        SimConfig(n_jobs=300, num_gpus=256, load=1.3, calibration="realistic"),
        SimConfig(trace=SAMPLE_TRACE, num_gpus=32),
    ],
)
def test_same_events_stops_and_jct_as_the_engine(cfg: SimConfig) -> None:
    ours = Simulator(cfg, 3).run(KDeclineRule(2))
    theirs = SimPyCluster(Simulator(cfg, 3), KDeclineRule(2)).run()
    for k in ("n_events", "n_stopped", "mean_jct_h"):
        assert theirs[k] == ours[k], k


def test_refuses_other_schedulers() -> None:
    with pytest.raises(ValueError, match="srtf-est"):
        SimPyCluster(Simulator(SimConfig(n_jobs=5, scheduler="fifo"), 0), KDeclineRule(2))
