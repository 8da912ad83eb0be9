"""RL Zoo3: the commands of docs/CLIENTS.md train and replay EvalStopFlat-v0 from the installed package.

Each command is run as written, with a small budget appended (the Zoo's
argparse keeps the last value of a repeated option).
"""

from __future__ import annotations

import csv
import math
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from readme_snippets import snippet

pytest.importorskip("rl_zoo3")

# Per (script, algo): what shrinks the run to a few iterations.
BUDGET = {
    (
        "train",
        "ppo",
    ): "-n 1024 --env-kwargs n_jobs:20 --hyperparams n_steps:256 batch_size:64 n_epochs:2",
    ("train", "dqn"): "-n 1500 --env-kwargs n_jobs:20 --hyperparams n_envs:1 learning_starts:200",
    ("enjoy", "ppo"): "-n 100",
}


def _commands() -> list[list[str]]:
    """The rl_zoo3 command lines of docs/CLIENTS.md, continuation lines joined."""
    text = snippet("rl_zoo3").replace("\\\n", " ")
    return [
        shlex.split(line) for line in text.splitlines() if line.startswith("python -m rl_zoo3.")
    ]


def _run(cmd: list[str], cwd: Path) -> str:
    script = cmd[2].removeprefix("rl_zoo3.")
    algo = cmd[cmd.index("--algo") + 1]
    full = [sys.executable, *cmd[1:], "--seed", "0", *shlex.split(BUDGET[(script, algo)])]
    if script == "train":
        full += ["--eval-freq", "-1"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(full, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{shlex.join(full)}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


def _monitor_returns(run_dir: Path) -> list[float]:
    with open(run_dir / "0.monitor.csv", newline="") as fh:
        next(fh)  # the Monitor's JSON header line
        return [float(row["r"]) for row in csv.DictReader(fh)]


@pytest.mark.slow
def test_readme_zoo_commands_train_and_enjoy(tmp_path: Path) -> None:
    commands = _commands()
    assert [c[2] for c in commands] == ["rl_zoo3.train", "rl_zoo3.train", "rl_zoo3.enjoy"]
    assert "baselines.hyperparams.dqn" in commands[1]  # the tuned file, by module path
    for cmd in commands[:2]:
        out = _run(cmd, tmp_path)
        algo = cmd[cmd.index("--algo") + 1]
        returns = _monitor_returns(tmp_path / "logs" / algo / "EvalStopFlat-v0_1")
        assert returns and all(math.isfinite(r) for r in returns), out[-2000:]
    assert "Loading hyperparameters from: baselines.hyperparams.dqn" in out
    # Rendering on: enjoy asks for render_mode="human", which the env prints
    # itself, so Gymnasium adds no pygame HumanRendering wrapper.
    out = _run(commands[2], tmp_path)
    assert out.count("deciding:") >= 50
