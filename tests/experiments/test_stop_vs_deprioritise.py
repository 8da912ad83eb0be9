"""E10 (issue #16): stop vs deprioritise across schedulers and loads, and the costs."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

# The harness's statistics need SciPy (the cli extra); a core install has none.
pytest.importorskip("scipy")

from evalstop_experiments.cells import SCHEDULERS
from evalstop_experiments.experiments.deprioritisation import COST_SWEEPS, LOADS, e10_cells
from evalstop_experiments.reproduce import reproduce


def test_cells_cover_schedulers_loads_and_costs() -> None:
    for quick, size in ((True, "quick"), (False, "default")):
        cells = e10_cells({"n_jobs": 10}, quick=quick)
        n_costs = sum(len(v) for v in COST_SWEEPS[size].values())
        assert len(cells) == len(SCHEDULERS) * len(LOADS[size]) * 3 + 2 * n_costs
        assert all(c.env["deprioritize"] is True and c.env["n_jobs"] == 10 for c in cells)
        assert len({c.key for c in cells}) == len(cells)


def test_tiny_e10_run_and_section(tmp_path: Path) -> None:
    res = reproduce(
        tmp_path,
        quick=True,
        seeds=2,
        n_jobs=20,
        experiments=("E10",),
        progress=False,
        workers=1,
    )
    assert res.ran == len(e10_cells({}, quick=True)) * 2
    with open(tmp_path / "E10.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    demoted = [r for r in rows if r["policy_kind"] == "Deprioritize"]
    stopped = [r for r in rows if r["policy_kind"] == "EvalStop"]
    assert demoted and stopped
    for r in demoted:
        # Demotion never ends a job: nothing is stopped, every GPU-hour is still spent.
        assert float(r["n_stopped"]) == 0 and abs(float(r["d_gpu_hours_pct"])) < 1e-9
    for r in stopped:
        assert float(r["n_deprioritized"]) == 0
    report = (tmp_path / "REPORT.md").read_text()
    assert "## E10" in report
    for s in SCHEDULERS:
        assert f"| {s} | 0.7 | Deprioritize |" in report
    assert "| restore_h | 0.5 h |" in report and "| costs | realistic |" in report
