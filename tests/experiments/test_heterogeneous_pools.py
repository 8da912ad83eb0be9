"""E11 (heterogeneous pools in reproduce): its cells, its load matching and its report section."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

# The harness's statistics need SciPy (the cli extra); a core install has none.
pytest.importorskip("scipy")

from evalstop_experiments.experiments.pools import CLUSTERS, e11_cells, effective_gpus, matched_load
from evalstop_experiments.reproduce import reproduce
from evalstop_gym.sim.pools import GPU_SPEEDS, PLACEMENTS
from evalstop_gym.sim.traces import SAMPLE_TRACE


def test_cells_cover_every_cluster_placement_and_policy() -> None:
    """Homogeneous once; each heterogeneous cluster under both placements; NoStop beside EvalStop."""
    cells = e11_cells({"n_jobs": 50})
    homog = [c for c in cells if c.variant == "homogeneous"]
    assert len(homog) == 2 and all("pools" not in c.env for c in homog)
    for name, pools in CLUSTERS.items():
        mine = [c for c in cells if c.variant == name]
        assert {(c.value, c.policy.kind) for c in mine} == {
            (p, k) for p in PLACEMENTS for k in ("NoStop", "EvalStop")
        }
        assert all(c.env["pools"] == pools and c.env["placement"] == c.value for c in mine)
    assert len({c.key for c in cells}) == len(cells)
    traced = e11_cells({"trace": SAMPLE_TRACE})
    assert not any("load-matched" in c.variant for c in traced)


def test_load_matching_keeps_offered_work_over_capacity() -> None:
    """Reference GPUs count as themselves; faster pools raise the matched load in proportion."""
    env = {"workload": "heavy-rlhf"}
    assert effective_gpus({"gpu": 64}, env) == pytest.approx(64.0)
    assert matched_load({"gpu": 64}, env) == pytest.approx(0.9)
    h = effective_gpus({"h100": 32}, env)
    assert 32 * min(GPU_SPEEDS["h100"]) < h < 32 * max(GPU_SPEEDS["h100"])
    assert matched_load({"a100": 32, "h100": 32}, {**env, "load": 0.5}) == pytest.approx(
        0.5 * (32 + h) / 64
    )


def test_tiny_e11_reproduce_writes_rows_and_section(tmp_path: Path) -> None:
    """E11 runs through reproduce: rows per cell and seed, paired deltas, its REPORT.md table."""
    reproduce(
        tmp_path,
        experiments=["E11"],
        seeds=2,
        n_jobs=12,
        progress=False,
        workers=1,
        learned=False,
        real_curves=False,
    )
    with open(tmp_path / "E11.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == len(e11_cells({"n_jobs": 12})) * 2
    nostop = [r for r in rows if r["policy_kind"] == "NoStop"]
    assert nostop and all(float(r["d_gpu_hours_pct"]) == 0.0 for r in nostop)
    report = (tmp_path / "REPORT.md").read_text()
    assert "## E11" in report and "| a100+h100 | fastest |" in report
    assert "## E1 " not in report
