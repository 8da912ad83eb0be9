"""The command line: flag types come from the environment's annotations, help lists values."""

from __future__ import annotations

import argparse
import typing

import pytest

# The harness's statistics need SciPy (the cli extra); a core install has none.
pytest.importorskip("scipy")

from evalstop_cli.envargs import (
    add_env_arguments,
    allowed_values,
    env_kwargs_from_args,
    env_parameters,
    flag_type,
)
from evalstop_cli.main import build_parser, main
from evalstop_gym import CALIBRATIONS, SAMPLE_TRACE, SCHEDULERS, WORKLOADS
from evalstop_gym.envs import EvalStopEnv


def _parse(*argv: str) -> dict[str, object]:
    parser = argparse.ArgumentParser()
    add_env_arguments(parser)
    return env_kwargs_from_args(parser.parse_args(list(argv)))


def test_strings_that_look_like_numbers_stay_strings() -> None:
    assert _parse("--trace-cluster", "6214e9") == {"trace_cluster": "6214e9"}
    assert _parse("--workload", "1e3") == {"workload": "1e3"}
    assert _parse("--obs-fields", "job_type,evals") == {"obs_fields": "job_type,evals"}


def test_numbers_and_none_follow_the_annotation() -> None:
    got = _parse("--n-jobs", "100", "--eval-noise", "0.02", "--gpu-hour-price", "1e-3")
    assert got == {"n_jobs": 100, "eval_noise": 0.02, "gpu_hour_price": 1e-3}
    assert type(got["n_jobs"]) is int and type(got["eval_noise"]) is float
    assert _parse("--eval-noise", "none", "--n-jobs", "None") == {
        "eval_noise": None,
        "n_jobs": None,
    }
    assert _parse() == {}  # nothing given: the environment's own defaults apply


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--n-jobs", "1.5"], "--n-jobs takes int"),
        (["--num-gpus", "none"], "--num-gpus takes int, not 'none'"),
        (["--time-cost", "cheap"], "--time-cost takes float"),
    ],
)
def test_bad_numbers_are_refused_naming_the_flag(argv, message, capsys) -> None:
    with pytest.raises(SystemExit) as e:
        _parse(*argv)
    assert e.value.code == 2
    assert message in capsys.readouterr().err


def test_every_env_argument_is_a_flag_with_a_type_from_its_annotation() -> None:
    for p in env_parameters().values():
        kind, optional = flag_type(p.annotation)
        assert kind in (str, int, float, bool, dict)
        assert optional == (type(None) in typing.get_args(p.annotation))
    # Every flag is an argument of the env, with the env's own default.
    defaults = {name: p.default for name, p in env_parameters().items()}
    assert EvalStopEnv(**defaults).env_config == EvalStopEnv().env_config


def test_scheduler_options_take_a_json_object(capsys) -> None:
    got = _parse("--scheduler", "loss-aware", "--scheduler-options", '{"window": 3}')
    assert got == {"scheduler": "loss-aware", "scheduler_options": {"window": 3}}
    env = EvalStopEnv(n_jobs=10, **got)
    env.reset(seed=0)
    assert env.config.make_scheduler().window == 3
    with pytest.raises(SystemExit):
        _parse("--scheduler-options", "[3]")
    assert "--scheduler-options takes a JSON object" in capsys.readouterr().err
    assert flag_type(int | None) == (int, True)
    assert flag_type(str | list[str] | None) == (str, True)
    assert flag_type(float) == (float, False)
    assert flag_type(bool) == (bool, False)


def test_help_lists_the_allowed_values(capsys) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["benchmark", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for values in (WORKLOADS, SCHEDULERS, CALIBRATIONS):
        assert f"one of {', '.join(sorted(values))}" in text
    assert set(allowed_values()["workload"]) == set(WORKLOADS)


def test_benchmark_on_a_trace_cluster_named_like_a_number(capsys) -> None:
    code = main(
        [
            "benchmark",
            "--seeds",
            "2",
            "--workers",
            "1",
            "--trace",
            SAMPLE_TRACE,
            "--trace-cluster",
            "6214e9",
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "trace_cluster=6214e9" in out and "EvalStop" in out


def test_benchmark_refuses_an_unknown_workload_naming_the_allowed_ones(capsys) -> None:
    assert main(["benchmark", "--seeds", "2", "--workers", "1", "--workload", "1e3"]) == 2
    err = capsys.readouterr().err
    assert "workload" in err and "1e3" in err and "heavy-rlhf" in err


def test_bool_and_cost_flags(capsys) -> None:
    assert _parse("--deprioritize", "true", "--restore-h", "0.1", "--costs", "realistic") == {
        "deprioritize": True,
        "restore_h": 0.1,
        "costs": "realistic",
    }
    assert _parse("--deprioritize", "no") == {"deprioritize": False}
    with pytest.raises(SystemExit):
        _parse("--deprioritize", "maybe")
    assert "--deprioritize takes true or false" in capsys.readouterr().err
