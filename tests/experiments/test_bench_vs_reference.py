"""``benchmarks/speed/bench_vs_reference.py``'s pure parts: ratios, the learning-curve parse, CSV checks."""

from __future__ import annotations

import csv
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench():
    """The benchmark script as a module (it is not a package), beside its ``timing``."""
    sys.path.insert(0, str(ROOT / "benchmarks" / "speed"))
    spec = importlib.util.spec_from_file_location(
        "bench_vs_reference", ROOT / "benchmarks" / "speed" / "bench_vs_reference.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _write(path: Path, rows: list[dict[str, object]]) -> None:
    path.mkdir(parents=True, exist_ok=True)
    with (path / "E8.csv").open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def test_ratio_line_best_and_median(bench):
    line = bench.seconds_ratio_line("x", [2.0, 3.0, 4.0], [4.0, 5.0, 10.0], 0.7)
    assert "ratio best 0.500" in line
    assert "median 0.500" in line  # per-round ratios 0.5, 0.6, 0.4
    assert "met" in line and "NOT" not in line
    assert "NOT met" in bench.seconds_ratio_line("x", [3.0], [4.0], 0.7)


def test_learning_curve_parsed_from_train_output(bench):
    out = "saved m.zip: 1 steps\nlearning curve (timesteps, mean eval return):\n[[20000, 1.5]]\n"
    assert bench.learning_curve(out) == [[20000, 1.5]]
    with pytest.raises(SystemExit):
        bench.learning_curve("saved m.zip\n")


def test_compare_csv_names_the_rows_that_differ(bench, tmp_path):
    base = [
        {"task": "t", "price_factor": "1.0", "stopper": "NoStop", "params": "a", "score": "0.0"},
        {"task": "t", "price_factor": "1.0", "stopper": "Gate", "params": "b", "score": "0.5"},
    ]
    _write(tmp_path / "ref", base)
    _write(tmp_path / "same", base)
    assert "every shared numeric value equal" in bench.compare_csv(
        "E8", tmp_path / "same", tmp_path / "ref"
    )
    other = [dict(base[0]), {**base[1], "params": "c", "score": "0.7"}]
    _write(tmp_path / "new", other)
    msg = bench.compare_csv("E8", tmp_path / "new", tmp_path / "ref")
    assert "1 values differ" in msg and "t/1.0/Gate" in msg and "NoStop" not in msg.split("(")[0]


def test_refuses_a_folder_that_is_not_a_source_tree(bench, tmp_path):
    with pytest.raises(SystemExit, match="not a source tree"):
        bench.main(["--ref", str(tmp_path), "train"])


@pytest.mark.parametrize(
    "argv",
    [
        ["--rounds", "0", "train"],  # before the subcommand
        ["train", "--rounds", "0"],  # after it, as docs/PERFORMANCE.md writes it
        ["--rounds", "3", "e8", "--rounds", "0"],  # after it wins
    ],
)
def test_rounds_is_read_before_or_after_the_subcommand(bench, tmp_path, argv):
    """--rounds is parsed in either place and refused below 1 before any tree is read."""
    with pytest.raises(SystemExit, match="--rounds: 0 is not allowed"):
        bench.main(["--ref", str(tmp_path), *argv])
