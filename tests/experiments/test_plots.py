"""The report's figures can go into a paper: no legend over the data, every axis labelled."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from matplotlib.backends.backend_agg import FigureCanvasAgg

from evalstop_experiments import plots
from evalstop_experiments.cells import EVALSTOP, STOPAT

METRICS = (
    "precision",
    "recall",
    "fpr",
    "d_jct_pct",
    "d_jct_completed_pct",
    "d_waste_pct",
    "detection_delay_evals",
)


def _row(exp: str, spec: Any, value: Any, **params: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "experiment": exp,
        "policy_kind": spec.kind,
        "policy_params": dict(spec.params, **params),
        "policy": spec.label,
        "value": value,
        "variant": "",
    }
    for i, m in enumerate(METRICS):
        row[m], row[f"{m}_ci95"] = 0.1 * (i + 1), 0.02
    return row


@pytest.fixture
def figures(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every figure the plot functions save, instead of writing it."""
    saved: list[Any] = []

    def keep(fig: Any, path: Path, **kwargs: Any) -> Path:
        FigureCanvasAgg(fig).draw()  # lay the figure out, as saving does
        saved.append(fig)
        return Path(path)

    monkeypatch.setattr(plots, "atomic_savefig", keep)
    return saved


def _check(fig: Any) -> None:
    """No axes carries its own legend; the figure's legend lies outside every panel; y labels set."""
    axes = [ax for ax in fig.axes if ax.get_visible() and ax.axison]
    assert all(ax.get_legend() is None for ax in axes)
    renderer = fig.canvas.get_renderer()
    for legend in fig.legends:
        box = legend.get_window_extent(renderer)
        for ax in axes:
            panel = ax.get_window_extent(renderer)
            assert not box.overlaps(panel), "a legend over a panel"
    labelled_rows = {round(ax.get_position().y0, 3) for ax in axes if ax.get_ylabel()}
    rows = {round(ax.get_position().y0, 3) for ax in axes}
    assert labelled_rows == rows, "a row of panels without a y label"


def test_scheduler_and_k_figures(figures: list[Any], tmp_path: Path) -> None:
    """E2 and E5: the legend sits under the panels."""
    summary = [_row("E2", EVALSTOP, v) for v in ("fifo", "srtf-est", "tiresias")]
    summary += [_row("E5", EVALSTOP, None, k=k) for k in (1, 2, 3, 4)]
    summary += [_row("E3", EVALSTOP, s) for s in (0.02, 0.05)]
    summary += [_row("E3", STOPAT, s) for s in (0.02, 0.05)]
    plots.plot_schedulers(summary, tmp_path / "a.png")
    plots.plot_k(summary, tmp_path / "b.png")
    plots.plot_sweep(summary, "E3", "eval noise σ", tmp_path / "c.png")
    assert len(figures) == 3
    for fig in figures:
        _check(fig)
        assert fig.legends


def test_learning_curves_name_the_band(figures: list[Any], tmp_path: Path) -> None:
    """E6: the shaded band is in the legend, and so is each reference line."""
    curve = [(t, 0.1 * np.log(t), 0.05) for t in (1000, 2000, 4000)]
    plots.plot_learning_curves(
        {"PPO σ=0.02": curve, "PPO σ=0.1": curve}, tmp_path / "l.png", {"EvalStop σ=0.02": 0.5}
    )
    (fig,) = figures
    _check(fig)
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "±1 s.d. over eval episodes" in labels
    assert "EvalStop σ=0.02 (reference)" in labels


def test_stop_positions_annotations_stay_off_the_panels(figures: list[Any], tmp_path: Path) -> None:
    """The '% stopped' notes are in the margin right of the healthy panel."""
    rng = np.random.default_rng(0)
    pos = {n: (rng.normal(0, 0.2, 50), rng.uniform(0.2, 1.0, 80)) for n in ("A", "B")}
    plots.plot_stop_positions(pos, tmp_path / "s.png")
    (fig,) = figures
    renderer = fig.canvas.get_renderer()
    healthy = fig.axes[1]
    right = healthy.get_window_extent(renderer).x1
    notes = [t for t in healthy.texts if t.get_text().endswith("stopped")]
    assert len(notes) == 2
    assert all(t.get_window_extent(renderer).x0 >= right for t in notes)
    assert fig.get_window_extent(renderer).x1 >= max(
        t.get_window_extent(renderer).x1 for t in notes
    )
