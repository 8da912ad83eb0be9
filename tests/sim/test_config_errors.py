"""Bad input fails at construction, naming the field, the value and what is allowed."""

from __future__ import annotations

import pytest

from evalstop_gym import ConfigError, KDeclineRule, SimConfig, Simulator, TraceError
from evalstop_gym.sim.calibration import Calibration


@pytest.mark.parametrize(
    ("kwargs", "field", "allowed"),
    [
        ({"load": -0.5}, "load", "offered load (e.g. 0.9) in [0.001, 1000]"),
        ({"load": 0}, "load", "offered load (e.g. 0.9) in [0.001, 1000]"),
        ({"num_gpus": 8}, "num_gpus", ">= 16"),
        ({"num_gpus": 0}, "num_gpus", "integer in [1, 100000]"),
        ({"scheduler": "round-robin"}, "scheduler", "one of"),
        ({"workload": "everything"}, "workload", "one of"),
        ({"calibration": "nope"}, "calibration", "one of"),
        ({"eval_noise": -0.01}, "eval_noise", "standard deviation in [0, 10]"),
        ({"hack_fraction": 1.5}, "hack_fraction", "fraction in [0, 1]"),
        ({"n_jobs": 0}, "n_jobs", "integer in [1, 1000000]"),
        ({"eval_window": 0}, "eval_window", "integer in [1, 10]"),
        ({"trace_cluster": "6214e9"}, "trace_cluster", "only with trace"),
        ({"trace": "/no/such/file.csv"}, "trace", "existing CSV"),
    ],
)
def test_bad_config_names_field_value_and_allowed(kwargs, field, allowed) -> None:
    with pytest.raises(ConfigError) as exc:
        SimConfig(**kwargs)
    msg = str(exc.value)
    assert exc.value.field == field
    assert msg.startswith(f"{field}=")
    assert repr(next(iter(kwargs.values()))) in msg
    assert allowed in msg


@pytest.mark.parametrize("k", [0, -1, 1.5, True])
def test_k_below_one_is_refused(k) -> None:
    with pytest.raises(ConfigError, match=r"k=.*integer >= 1"):
        KDeclineRule(k)


def test_bad_calibration_fields() -> None:
    with pytest.raises(ConfigError, match="evals_per_job"):
        Calibration("x", evals_per_job=1)
    with pytest.raises(ConfigError, match="hack_peak"):
        Calibration("x", hack_peak=(0.8, 0.2))
    with pytest.raises(ConfigError, match="healthy_peak"):
        Calibration("x", healthy_peak=(0.5, 2.0))


@pytest.mark.parametrize(
    ("row", "field"),
    [
        ("2017-13-01 00:00:00,60.0,1,60.0,aa", "timestamp"),
        ("2017-10-01 00:00:00,-5,1,-5,aa", "duration"),
        ("2017-10-01 00:00:00,abc,1,60.0,aa", "duration"),
        ("2017-10-01 00:00:00,60.0,zero,60.0,aa", "num_gpus"),
        ("2017-10-01 00:00:00,60.0,0,60.0,aa", "num_gpus"),
        ("2017-10-01 00:00:00,60.0,1,60.0,", "cluster"),
        ("2017-10-01 00:00:00,60.0", "row"),
    ],
)
def test_malformed_trace_row_names_line_and_field(tmp_path, row, field) -> None:
    p = tmp_path / "bad.csv"
    p.write_text(
        "timestamp,duration,num_gpus,gpu_time,cluster\n"
        "2017-10-01 00:00:00,60.0,1,60.0,aa\n"
        "2017-10-01 00:01:00,60.0,2,120.0,aa\n" + row + "\n"
    )
    with pytest.raises(TraceError) as exc:
        Simulator(SimConfig(trace=str(p), num_gpus=8), 0)
    assert exc.value.line == 4 and exc.value.field == field
    assert "line 4" in str(exc.value) and str(p) in str(exc.value)


def test_trace_missing_column_and_too_large_job(tmp_path) -> None:
    p = tmp_path / "nocol.csv"
    p.write_text("timestamp,duration,gpu_time,cluster\n2017-10-01 00:00:00,60.0,60.0,aa\n")
    with pytest.raises(TraceError, match="num_gpus"):
        Simulator(SimConfig(trace=str(p)), 0)
    p = tmp_path / "big.csv"
    p.write_text(
        "timestamp,duration,num_gpus,gpu_time,cluster\n"
        "2017-10-01 00:00:00,60.0,1,60.0,aa\n"
        "2017-10-01 00:00:01,60.0,128,7680.0,aa\n"
    )
    with pytest.raises(TraceError, match=r"line 3.*128 GPUs exceed.*num_gpus=64"):
        Simulator(SimConfig(trace=str(p)), 0)


def test_unknown_trace_cluster_lists_the_known_ones() -> None:
    from evalstop_gym import SAMPLE_TRACE

    with pytest.raises(ConfigError, match=r"trace_cluster='zz'.*6214e9"):
        Simulator(SimConfig(trace=SAMPLE_TRACE, trace_cluster="zz", num_gpus=16), 0)
