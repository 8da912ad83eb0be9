from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from evalstop_gym.sim.synthetic_curves import Curves
from evalstop_gym.sim.workloads import JobBatch

PHILLY = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "philly" / "philly.csv"
PHILLY = Path(os.environ.get("EVALSTOP_PHILLY", PHILLY)).resolve()

# No test is timed (speed targets live in benchmarks/): hypothesis's default 200 ms
# deadline per example would fail a correct example on a busy machine.  (CI's RLlib venv
# runs one test file without hypothesis.)
try:
    from hypothesis import settings
except ImportError:  # pragma: no cover - only the RLlib venv lacks it
    pass
else:
    settings.register_profile("evalstop", deadline=None)
    settings.load_profile("evalstop")


@pytest.fixture
def philly_path() -> str:
    if not PHILLY.is_file():
        pytest.skip(f"the Philly trace is not at {PHILLY}")
    return str(PHILLY)


def hand_jobs(
    arrival: list[float],
    gpus: list[int],
    duration: list[float],
    *,
    estimate: list[float] | None = None,
    job_type: list[int] | None = None,
    hacking: list[bool] | None = None,
    evals: list[list[float]] | None = None,
    true_eval: list[list[float]] | None = None,
    loss: list[list[float]] | None = None,
    peak: list[float] | None = None,
    k: int = 4,
) -> tuple[JobBatch, Curves]:
    """A hand-built episode: flat noise-free curves unless given."""
    n = len(arrival)
    ev = np.asarray(evals if evals is not None else [[0.5] * k] * n, dtype=float)
    k = ev.shape[1]
    te = np.asarray(true_eval, dtype=float) if true_eval is not None else ev.copy()
    ls = np.asarray(loss if loss is not None else [np.linspace(0.9, 0.5, k)] * n, dtype=float)
    batch = JobBatch(
        arrival_h=np.asarray(arrival, dtype=float),
        job_type=np.asarray(job_type if job_type is not None else [2] * n),
        gpus=np.asarray(gpus),
        duration_h=np.asarray(duration, dtype=float),
        estimate_h=np.asarray(estimate if estimate is not None else duration, dtype=float),
        hacking=np.asarray(hacking if hacking is not None else [False] * n),
    )
    curves = Curves(
        progress=np.arange(1, k + 1) / k,
        true_eval=te,
        obs_eval=ev,
        loss=ls,
        proxy=np.zeros_like(ev),
        peak_progress=np.asarray(peak if peak is not None else [np.inf] * n, dtype=float),
    )
    return batch, curves


@pytest.fixture
def one_torch_thread():
    """Run the test with one torch thread (two spin-waiting threads on a busy 2-core box cost 20x)."""
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
