"""Every error a user can cause reaches them as one line: input, value, what is allowed."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from evalstop_cli.main import main
from evalstop_gym import suite_task
from evalstop_gym.corpus.format import CurveTraceError
from evalstop_gym.envs.config import UnknownArgumentError
from evalstop_gym.errors import ConfigError, EvalStopError, TraceError
from evalstop_gym.parallel import Executor

ROOT = Path(__file__).resolve().parents[2]

ERRORS = [
    EvalStopError("bad input"),
    ConfigError("scheduler", "srtf", "one of ['fifo', 'srtf-est']"),
    TraceError("t.csv", 3, "num_gpus", "not an integer"),
    CurveTraceError("c.jsonl: line 2: eval: not a number"),
    UnknownArgumentError("got an unexpected keyword argument 'schedular'", "schedular", "fifo"),
]


def _all_subclasses(cls: type) -> set[type]:
    return {c for s in cls.__subclasses__() for c in (s, *_all_subclasses(s))}


def test_every_error_type_is_in_the_round_trip_list() -> None:
    assert _all_subclasses(EvalStopError) <= {type(e) for e in ERRORS}


@pytest.mark.parametrize("error", ERRORS, ids=lambda e: type(e).__name__)
def test_errors_survive_a_pickle_round_trip(error: EvalStopError) -> None:
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is type(error)
    assert str(back) == str(error) and back.args == error.args
    assert back.__dict__ == error.__dict__


def test_an_error_raised_in_a_worker_reaches_the_parent_as_itself() -> None:
    # suite_task refuses an unknown name with a ConfigError, inside each worker here.
    with pytest.raises(ConfigError, match="is not allowed") as info:
        Executor(workers=2).map(suite_task, ["nope-1", "nope-2"])
    assert info.value.field == "task"


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "evalstop_cli.main", *argv],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )


BAD_ENV_VALUES = [
    (("--scheduler", "srtf"), ("scheduler", "srtf", "srtf-est")),
    (("--calibration", "Hard"), ("calibration", "Hard", "hard")),
    (("--trace", "no_such.csv"), ("trace", "no_such.csv", "an existing CSV file")),
]


def _one_error_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("evalstop-gym: error: ") and "Traceback" not in stderr
    return lines[0]


@pytest.mark.parametrize(("flags", "words"), BAD_ENV_VALUES)
def test_benchmark_with_a_bad_env_value_prints_one_line(flags, words, capsys) -> None:
    # The default worker count: a worker's error used to break the process pool.
    assert main(["benchmark", "--seeds", "2", *flags]) == 2
    captured = capsys.readouterr()
    line = _one_error_line(captured.err)
    assert all(w in line for w in words) and captured.out == ""


def test_the_benchmark_command_with_a_bad_value_exits_2_in_one_line() -> None:
    res = _cli("benchmark", "--seeds", "2", "--scheduler", "srtf")
    assert res.returncode == 2, res.stderr
    assert "srtf-est" in _one_error_line(res.stderr) and res.stdout == ""
