"""Every script in examples/ runs to the end and prints what its docstring promises."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))
#: A line each script must print (so a script that silently does nothing fails).
EXPECTED = {
    "compare_stoppers.py": "EvalStop",
    "random_agent.py": "closed form",
    "vector_env.py": "episodes finished",
}


def test_every_example_has_an_expectation() -> None:
    assert {p.name for p in EXAMPLES} == set(EXPECTED)


#: Examples over ~5 s of CPU (the vector env's runs many episodes).
SLOW = {"vector_env.py"}


@pytest.mark.parametrize(
    "script",
    [pytest.param(p, marks=pytest.mark.slow) if p.name in SLOW else p for p in EXAMPLES],
    ids=lambda p: p.name,
)
def test_example_runs(script: Path, tmp_path: Path) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    res = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr
    assert EXPECTED[script.name] in res.stdout
