"""``benchmarks/suite/grounded_suite.py`` refuses bad input before any episode is played."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def script():
    """The script as a module (benchmarks/ is not a package)."""
    spec = importlib.util.spec_from_file_location(
        "grounded_suite", ROOT / "benchmarks" / "suite" / "grounded_suite.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", ["E8.csv", "E8.md"])
def test_a_finished_table_is_never_overwritten(script, tmp_path, capsys, monkeypatch, name):
    (tmp_path / name).write_text("finished")
    monkeypatch.setattr(script, "run_e8", lambda *a, **k: pytest.fail("played an episode"))
    assert script.main(["--out", str(tmp_path), "--seeds", "1"]) == 2
    err = capsys.readouterr().err
    assert "error: out=" in err and name in err and "never overwritten" in err
    assert (tmp_path / name).read_text() == "finished"


def test_no_seeds_and_a_bad_policy_are_refused_before_any_episode(
    script, tmp_path, capsys, monkeypatch
):
    monkeypatch.setattr(script, "run_e8", lambda *a, **k: pytest.fail("played an episode"))
    assert script.main(["--out", str(tmp_path / "a"), "--seeds", "0"]) == 2
    assert "seeds=0" in capsys.readouterr().err
    assert script.main(["--out", str(tmp_path / "b"), "--policy", "nope:x"]) == 2
    assert "error:" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
