"""Every error a user can cause reaches them as one line: input, value, what is allowed."""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import multiprocessing
import os
import pickle
import re
import shlex
import subprocess
import sys
import time
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import pytest

import evalstop_gym
from baselines.learned import ModelFileError
from evalstop_cli.envargs import allowed_values
from evalstop_cli.main import build_parser, main
from evalstop_experiments.isolated import IsolationError
from evalstop_gym import suite_task
from evalstop_gym.corpus.format import CurveTraceError
from evalstop_gym.envs.config import UnknownArgumentError
from evalstop_gym.errors import ConfigError, EvalStopError, TraceError
from evalstop_gym.fileio import FolderInUseError, UntrustedFileError
from evalstop_gym.parallel import Executor

ROOT = Path(__file__).resolve().parents[2]

ERRORS = [
    EvalStopError("bad input"),
    ConfigError("scheduler", "srtf", "one of ['fifo', 'srtf-est']"),
    TraceError("t.csv", 3, "num_gpus", "not an integer"),
    CurveTraceError("c.jsonl: line 2: eval: not a number"),
    UnknownArgumentError("got an unexpected keyword argument 'schedular'", "schedular", "fifo"),
    IsolationError("isolated stopper m:S, act(): no answer within 10 s"),
    UntrustedFileError("m.zip: no hash record m.zip.sha256"),
    FolderInUseError("out is in use by another run (pid 1: evalstop-gym reproduce)"),
    ModelFileError("m.zip is not an evalstop-gym model file: not a zip file"),
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
    # "evalstop-gym: error: ..." or, from the argument parser, "evalstop-gym train: error: ..."
    assert re.match(r"evalstop-gym( [a-z]+)?: error: ", lines[0]) and "Traceback" not in stderr
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


def die_on_seed_1(unit):
    """``timed_unit``, except that a worker given seed 1 dies as a killed process does."""
    from evalstop_experiments.runner import run_unit

    if 1 in unit[1] and multiprocessing.current_process().name != "MainProcess":
        os._exit(9)
    t0 = time.process_time()
    return run_unit(unit), time.process_time() - t0


@pytest.mark.slow
def test_a_worker_killed_mid_reproduce_ends_with_the_command_that_resumes(
    tmp_path, monkeypatch, capsys
) -> None:
    argv = ["reproduce", "--quick", "--experiments", "E1", "--seeds", "2", "--n-jobs", "20"]
    argv += ["--workers", "2", "--out", str(tmp_path / "out")]
    monkeypatch.setattr("evalstop_experiments.runner.timed_unit", die_on_seed_1)
    assert main(argv) == 1
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert "worker process died" in line and "kept" in line and "Traceback" not in line
    command = line.rpartition(": ")[2].removesuffix(" continues")
    assert command == shlex.join(["evalstop-gym", *argv, "--resume"])
    monkeypatch.undo()
    assert main([*shlex.split(command)[1:]]) == 0


def test_a_broken_pool_in_reproduce_prints_the_resume_command(
    tmp_path, monkeypatch, capsys
) -> None:
    def broken(*args, **kwargs):
        raise BrokenProcessPool("A process in the process pool was terminated abruptly")

    monkeypatch.setattr("evalstop_experiments.reproduce.reproduce", broken)
    assert main(["reproduce", "--quick", "--out", str(tmp_path)]) == 1
    line = _one_error_line(capsys.readouterr().err)
    assert line.endswith(f"evalstop-gym reproduce --quick --out {tmp_path} --resume continues")


def test_ray_failing_to_start_suggests_the_local_backend(tmp_path, monkeypatch, capsys) -> None:
    ray = pytest.importorskip("ray")

    def timed_out(*args, **kwargs):
        raise RuntimeError("The current node timed out during startup.\nmore detail")

    monkeypatch.setattr(ray, "init", timed_out)
    argv = ["reproduce", "--quick", "--experiments", "E1", "--backend", "ray"]
    assert main([*argv, "--out", str(tmp_path)]) == 1
    line = _one_error_line(capsys.readouterr().err)
    assert "Ray did not start" in line and "timed out during startup" in line
    assert line.endswith("--backend local")


@pytest.mark.parametrize(
    ("argv", "module", "extra"),
    [
        (["benchmark"], "rich", "cli"),
        (["benchmark", "--suite"], "scipy", "cli"),
        (["reproduce", "--quick"], "matplotlib", "plots"),
        (["train", "--out", "m.zip"], "stable_baselines3", "train"),
        (["benchmark", "--policy", "pretrained:hard"], "torch", "train"),
    ],
)
def test_a_missing_extra_is_named_before_any_work(
    argv, module, extra, tmp_path, monkeypatch, capsys
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == module else real(name, *a)
    )
    monkeypatch.chdir(tmp_path)
    t0 = time.perf_counter()
    assert main(argv) == 2
    captured = capsys.readouterr()
    line = _one_error_line(captured.err)
    assert repr(module) in line and f'pip install -e ".[{extra}]"' in line
    assert captured.out == "" and list(tmp_path.iterdir()) == []
    assert time.perf_counter() - t0 < 5  # refused before any episode


def test_a_missing_extra_found_during_work_names_the_extra(monkeypatch, capsys) -> None:
    def needs_scipy(args):
        raise ModuleNotFoundError("No module named 'scipy'", name="scipy")

    monkeypatch.setattr("evalstop_cli.main.cmd_benchmark", needs_scipy)
    monkeypatch.setattr("evalstop_cli.main.NEEDS", {})
    assert main(["benchmark"]) == 2
    assert '".[cli]"' in _one_error_line(capsys.readouterr().err)


@pytest.mark.parametrize(
    ("argv", "flag", "value", "allowed"),
    [
        (["benchmark", "--seeds", "0"], "--seeds", "'0'", ">= 1"),
        (["benchmark", "--seeds", "-3"], "--seeds", "'-3'", ">= 1"),
        (["benchmark", "--workers", "0"], "--workers", "'0'", ">= 1"),
        (["reproduce", "--n-jobs", "0"], "--n-jobs", "'0'", ">= 1"),
        (["reproduce", "--workers", "-1"], "--workers", "'-1'", ">= 1"),
        (["train", "--out", "m.zip", "--n-envs", "0"], "--n-envs", "'0'", ">= 1"),
        (["train", "--out", "m.zip", "--timesteps", "0"], "--timesteps", "'0'", ">= 1"),
    ],
)
def test_counts_below_their_minimum_are_refused_in_one_line(
    argv, flag, value, allowed, tmp_path, monkeypatch, capsys
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    captured = capsys.readouterr()
    line = _one_error_line(captured.err)
    assert f"argument {flag}: {value} is not allowed: an integer {allowed}" in line
    assert captured.out == "" and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv", [["benchmark", "--suite"], ["reproduce", "--quick"]])
def test_an_out_that_is_a_file_is_refused_before_any_work(argv, tmp_path, capsys) -> None:
    afile = tmp_path / "afile"
    afile.write_text("mine\n")
    with pytest.raises(SystemExit) as info:
        main([*argv, "--out", str(afile)])
    assert info.value.code == 2
    line = _one_error_line(capsys.readouterr().err)
    assert f"argument --out: {str(afile)!r} is a file, not allowed: a folder" in line
    assert afile.read_text() == "mine\n" and sorted(tmp_path.iterdir()) == [afile]


@pytest.mark.parametrize("seeds", ["1", "0", "-3"])
def test_reproduce_refuses_fewer_than_two_seeds_before_any_work(seeds, tmp_path, capsys) -> None:
    assert main(["reproduce", "--seeds", seeds, "--out", str(tmp_path / "out")]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert f"seeds={seeds} is not allowed: at least 2" in line
    assert not (tmp_path / "out").exists()


def test_version_is_the_installed_distributions(capsys) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"evalstop-gym {evalstop_gym.__version__}"
    assert evalstop_gym.__version__ == importlib.metadata.version("evalstop-gym")


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    (sub,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


@pytest.mark.parametrize("command", ["benchmark", "reproduce", "train", "curves"])
def test_every_flag_has_help_listing_its_allowed_values(command) -> None:
    parser = _subparsers()[command]
    for action in parser._actions:
        if not action.option_strings or action.help == argparse.SUPPRESS:
            continue
        assert action.help, f"{command} {action.option_strings[0]} has no help"
    text = parser.format_help()
    if command in ("benchmark", "train"):
        for name, values in allowed_values().items():
            flag = "--" + name.replace("_", "-")
            shown = " ".join(text.split(f"  {flag} ")[1].split("\n  --")[0].split())
            assert all(v in shown for v in values), (flag, shown)
        assert "a100=32,h100=32" in " ".join(text.split())


def test_train_documents_its_algo_and_seed() -> None:
    text = " ".join(_subparsers()["train"].format_help().split())
    assert "one of a2c, dqn, ppo, recurrentppo (default ppo" in text
    assert "(default 0)" in text.split("--seed SEED")[-1][:120]


def test_every_extra_the_cli_names_installs_its_module() -> None:
    """``EXTRAS`` (module -> pip extra) agrees with pyproject.toml's optional dependencies."""
    import re
    from pathlib import Path

    import tomllib

    from evalstop_cli.main import EXTRAS

    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    extras = tomllib.loads(pyproject.read_text())["project"]["optional-dependencies"]
    distribution = {"yaml": "pyyaml"}  # import names whose distribution is named otherwise
    for module, extra in EXTRAS.items():
        names = {re.split(r"[<>=!~ \[;]", r)[0].lower().replace("-", "_") for r in extras[extra]}
        wanted = distribution.get(module, module).lower().replace("-", "_")
        assert wanted in names, (module, extra, sorted(names))


@pytest.mark.parametrize("name", ["m.npz", "m.npz.sha256"])
def test_train_never_overwrites_a_model_file(name, tmp_path, capsys) -> None:
    """A file at --out (or at its .sha256 record) is refused before any episode; its bytes stay."""
    mine = tmp_path / name
    mine.write_text("mine\n")
    out = tmp_path / "m.npz"
    argv = ["train", "--algo", "lsm", "--task", "paper-0.12", "--episodes", "2", "--out", str(out)]
    assert main(argv) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert f"out={str(out)!r} is not allowed: a new file" in line and "never overwritten" in line
    assert mine.read_text() == "mine\n" and sorted(tmp_path.iterdir()) == [mine]


def test_train_with_sb3_never_overwrites_the_zip_it_would_write(tmp_path, capsys) -> None:
    pytest.importorskip("stable_baselines3")
    mine = tmp_path / "m.zip"
    mine.write_text("mine\n")
    assert (
        main(["train", "--task", "hard-0.05", "--timesteps", "10", "--out", str(tmp_path / "m")])
        == 2
    )
    assert "never overwritten" in _one_error_line(capsys.readouterr().err)
    assert mine.read_text() == "mine\n" and sorted(tmp_path.iterdir()) == [mine]


def test_curves_generate_never_overwrites_a_micro_rlhf_corpus(tmp_path, capsys) -> None:
    """Micro-RLHF runs keep no folders to resume from: a traces.jsonl there is refused, kept."""
    corpus = tmp_path / "traces.jsonl"
    corpus.write_text("mine\n")
    assert (
        main(["curves", "generate", "--runs", "1", "--workers", "1", "--out", str(tmp_path)]) == 2
    )
    line = _one_error_line(capsys.readouterr().err)
    assert f"out={str(tmp_path)!r}" in line and "never overwritten" in line
    assert corpus.read_text() == "mine\n" and sorted(tmp_path.iterdir()) == [corpus]


@pytest.mark.parametrize("source", ["english", "trl"])
def test_curves_generate_never_overwrites_a_corpus_it_did_not_build(
    source, tmp_path, capsys
) -> None:
    """A traces.jsonl without the runs/ folder a resumed generation rebuilds it from is kept."""
    pytest.importorskip("trl")
    corpus = tmp_path / "traces.jsonl"
    corpus.write_text("mine\n")
    argv = ["curves", "generate", "--source", source, "--runs", "1", "--out", str(tmp_path)]
    assert main(argv) == 2
    assert "never overwritten" in _one_error_line(capsys.readouterr().err)
    assert corpus.read_text() == "mine\n" and sorted(tmp_path.iterdir()) == [corpus]


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["--algo", "lsm", "--task", "paper-0.12", "--timesteps", "5"], "timesteps=5"),
        (
            ["--algo", "lsm", "--task", "paper-0.12", "--hyperparams", '{"gamma": 1}'],
            "hyperparams=",
        ),
        (["--algo", "lsm", "--task", "paper-0.12", "--vec", "native"], "vec='native'"),
        (["--algo", "lsm", "--task", "paper-0.12", "--last"], "last=True"),
        (["--algo", "ppo", "--task", "hard-0.05", "--episodes", "3"], "episodes=3"),
        (["--algo", "dqn", "--task", "hard-0.05", "--price-factor", "2"], "price_factor=2.0"),
        (["--algo", "lsm", "--task", "general", "--eval-noise", "0.1"], "task='general'"),
    ],
)
def test_train_refuses_an_option_its_algo_would_ignore(argv, match, tmp_path, capsys) -> None:
    """``--timesteps`` with ``--algo lsm`` (or ``--episodes`` with PPO, env flags with the
    general distribution) were silently ignored: the model trained was not the one asked for."""
    out = tmp_path / ("m.npz" if "lsm" in argv else "m.zip")
    assert main(["train", *argv, "--out", str(out)]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert match in line and "is not allowed" in line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["m.zip", "m"])
def test_train_lsm_refuses_a_path_that_is_not_an_npz(name, tmp_path, capsys) -> None:
    """It wrote the .npz model under a .zip name, which ``model:PATH`` then read as an SB3 zip."""
    argv = ["train", "--algo", "lsm", "--task", "paper-0.12", "--episodes", "1"]
    assert main([*argv, "--out", str(tmp_path / name)]) == 2
    assert "a path ending in .npz" in _one_error_line(capsys.readouterr().err)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("tasks", ["", " "])
def test_benchmark_suite_refuses_an_empty_task_list(tasks, tmp_path, capsys) -> None:
    """``--tasks ''`` played the whole suite (every task) instead of none."""
    argv = ["benchmark", "--suite", "--tasks", tasks, "--seeds", "1", "--out", str(tmp_path / "o")]
    assert main(argv) == 2
    assert f"tasks={tasks!r} is not allowed" in _one_error_line(capsys.readouterr().err)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("source", ["micro", "trl"])
@pytest.mark.parametrize(("flag", "value"), [("--runs", "0"), ("--workers", "0")])
def test_curves_generate_refuses_no_runs_or_no_workers_in_one_line(
    source, flag, value, tmp_path, capsys
) -> None:
    """``--runs 0`` said only "nothing to run"; ``--workers 0`` reached the process pool."""
    given = {"--runs": "1", "--workers": "1", flag: value}
    argv = ["curves", "generate", "--source", source, "--out", str(tmp_path / "g")]
    argv += [x for item in given.items() for x in item]
    assert main(argv) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert f"{flag[2:]}={value} is not allowed: an integer >= 1" in line
    assert list(tmp_path.iterdir()) == []
