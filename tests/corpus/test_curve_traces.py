"""Tests of evalstop_gym.corpus: format, loaders, labels, resampling and the Gao fit."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalstop_gym.corpus import (
    CurveTrace,
    CurveTraceError,
    fit_gao,
    fit_gao_trace,
    label_hacking,
    load_openrlhf_log,
    load_trl_trainer_state,
    read_traces,
    resample,
    write_traces,
)

DATA = Path(__file__).parents[1] / "data" / "curves"

finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)


@st.composite
def traces(draw: st.DrawFn, run_id: str | None = None) -> CurveTrace:
    n = draw(st.integers(1, 12))
    steps = np.cumsum(draw(st.lists(st.integers(1, 1000), min_size=n, max_size=n))) - 1
    series = {
        name: np.array(draw(st.lists(finite, min_size=n, max_size=n))) for name in ("eval", "loss")
    }
    for name in ("proxy", "gold"):
        if draw(st.booleans()):
            series[name] = np.array(draw(st.lists(finite, min_size=n, max_size=n)))
    if draw(st.booleans()):
        series["kl"] = np.array(
            draw(st.lists(st.floats(0, 1e3, allow_nan=False), min_size=n, max_size=n))
        )
    meta = draw(
        st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=3)
    )
    return CurveTrace(
        run_id=run_id or draw(st.text(min_size=1, max_size=8)),
        step=steps,
        label=draw(st.none() | st.booleans()),
        meta=meta,
        **series,
    )


# ---------------------------------------------------------------------------------------------
# Our JSONL format
# ---------------------------------------------------------------------------------------------


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(batch=st.lists(traces(), min_size=1, max_size=4, unique_by=lambda t: t.run_id))
def test_write_read_round_trip_is_identical(tmp_path: Path, batch: list[CurveTrace]) -> None:
    path = tmp_path / "sub" / "t.jsonl"
    write_traces(batch, path)
    back = read_traces(path)
    assert back == batch
    for a, b in zip(back, batch, strict=True):
        for name in ("step", "eval", "loss", "proxy", "kl", "gold"):
            x, y = getattr(a, name), getattr(b, name)
            assert (x is None and y is None) or (x.dtype == y.dtype and np.array_equal(x, y))


def test_sample_trace_file_reads_interleaved_runs() -> None:
    hack, healthy = read_traces(DATA / "traces.jsonl")
    assert hack.run_id == "toy-hacking" and healthy.run_id == "toy-healthy"
    assert hack.step.tolist() == [0, 100, 200, 300, 400]
    assert hack.gold.tolist() == [0.0, 0.55, 0.9, 0.45, 0.1]
    assert hack.label is True and hack.meta == {"source": "hand-made", "kl_beta": 0.0}
    assert healthy.gold is None and healthy.kl is None and healthy.label is None
    assert healthy.loss.tolist() == [1.1, 1.0, 0.95]
    # The file's label agrees with the one rule applied to its gold curve.
    assert label_hacking(hack.gold) is True


def test_write_is_atomic_on_failure(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    good = CurveTrace("a", np.arange(3), np.zeros(3), np.ones(3))
    write_traces([good], path)
    before = path.read_bytes()
    bad = CurveTrace("b", np.arange(3), np.zeros(3), np.ones(3), meta={"x": object()})
    with pytest.raises(CurveTraceError, match="meta"):
        write_traces([good, bad], path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["t.jsonl"]  # no temp file left behind
    with pytest.raises(CurveTraceError, match="duplicate run_id 'a'"):
        write_traces([good, good], path)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"step": [0, 2, 2]}, "strictly increasing"),
        ({"step": [-1, 0, 1]}, "non-negative"),
        ({"step": [0.5, 1, 2]}, "integers"),
        ({"eval": [0.0, math.nan, 1.0]}, "'eval' must be finite"),
        ({"loss": [0.0, 1.0]}, "'loss' has shape"),
        ({"kl": [0.0, math.inf, 1.0]}, "'kl' must be finite"),
        ({"run_id": ""}, "run_id"),
    ],
)
def test_curve_trace_validation(kwargs: dict, match: str) -> None:
    base = {"run_id": "r", "step": [0, 1, 2], "eval": [0.0, 1.0, 2.0], "loss": [1.0, 1.0, 1.0]}
    with pytest.raises(CurveTraceError, match=match):
        CurveTrace(**{**base, **kwargs})


def test_curve_trace_arrays_are_read_only() -> None:
    tr = CurveTrace("r", [0, 1], [0.0, 1.0], [1.0, 1.0], gold=[0.0, 0.5])
    with pytest.raises(ValueError):
        tr.eval[0] = 3.0
    assert tr.step.dtype == np.int64 and tr.gold.dtype == np.float64 and len(tr) == 2


GOOD = '{"run_id": "r", "step": 0, "eval": 0.1, "loss": 1.0, "gold": 0.0}'

BAD_TRACE_FILES = [
    # (content, expected line, expected field / phrase)
    (GOOD + "\n{not json\n", 2, "not valid JSON"),
    (GOOD + "\n[1, 2]\n", 2, "expected a JSON object"),
    (GOOD + '\n{"run_id": "r", "step": 1, "eval": 0.1, "gold": 0.0}\n', 2, "'loss'"),
    (GOOD + '\n{"run_id": "r", "step": 0, "eval": 0.1, "loss": 1.0, "gold": 0.0}\n', 2, "'step'"),
    (GOOD + '\n{"run_id": "r", "step": 1.5, "eval": 0.1, "loss": 1.0, "gold": 0.0}\n', 2, "'step'"),
    (GOOD + '\n\n{"run_id": "r", "step": 1, "eval": "x", "loss": 1.0, "gold": 0.0}\n', 3, "'eval'"),
    (GOOD + '\n{"run_id": "r", "step": 1, "eval": NaN, "loss": 1.0, "gold": 0.0}\n', 2, "'eval'"),
    (GOOD + '\n{"run_id": "r", "step": 1, "eval": 0.1, "loss": 1.0}\n', 2, "'gold'"),
    (
        GOOD + '\n{"run_id": "r", "step": 1, "eval": 0.1, "loss": 1, "gold": 0, "label": "meh"}\n',
        2,
        "'label'",
    ),
    (GOOD + '\n{"run_id": 3, "step": 1, "eval": 0.1, "loss": 1.0, "gold": 0.0}\n', 2, "'run_id'"),
    (
        GOOD + '\n{"run_id": "r", "step": 1, "eval": 0.1, "loss": 1.0, "gold": 0.0, "x": 1}\n',
        2,
        "'x'",
    ),
    (GOOD.replace('"gold": 0.0', '"kl": 1e300'), 1, "'kl'"),
]


@pytest.mark.parametrize(("content", "line", "field"), BAD_TRACE_FILES)
def test_malformed_trace_file_names_file_line_field(
    tmp_path: Path, content: str, line: int, field: str
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(CurveTraceError) as err:
        read_traces(path)
    msg = str(err.value)
    assert str(path) in msg and f"line {line}" in msg and field in msg, msg


def test_empty_and_missing_trace_files(tmp_path: Path) -> None:
    (tmp_path / "e.jsonl").write_text("\n\n")
    with pytest.raises(CurveTraceError, match="empty"):
        read_traces(tmp_path / "e.jsonl")
    with pytest.raises(CurveTraceError, match="cannot open"):
        read_traces(tmp_path / "missing.jsonl")


# ---------------------------------------------------------------------------------------------
# TRL trainer_state.json
# ---------------------------------------------------------------------------------------------


def test_trl_loader_aligns_last_loss_at_or_before_each_eval() -> None:
    tr = load_trl_trainer_state(
        DATA / "trainer_state.json", kl_key="objective/kl", proxy_key="objective/scores"
    )
    assert tr.run_id == "curves"  # the folder holding the file
    assert tr.step.tolist() == [0, 20, 40, 60]
    assert tr.eval.tolist() == [0.10, 0.55, 0.71, 0.48]
    # step 0 precedes every training log: it takes the first logged loss.
    assert tr.loss.tolist() == [0.69, 0.61, 0.47, 0.42]
    assert tr.kl.tolist() == [0.0, 0.8, 3.9, 8.4]
    assert tr.proxy.tolist() == [0.05, 0.40, 1.35, 1.95]
    assert tr.gold is None and tr.label is None  # no gold: no label
    assert tr.meta["source"] == "trl"


def test_trl_loader_with_other_eval_key_and_gold() -> None:
    tr = load_trl_trainer_state(
        DATA / "trainer_state.json",
        eval_key="eval_rewards/accuracies",
        run_id="dpo",
        gold_key="eval_reward",
    )
    assert tr.run_id == "dpo" and tr.eval.tolist() == [0.50, 0.66, 0.72, 0.61]
    assert tr.gold.tolist() == [0.10, 0.55, 0.71, 0.48]
    assert tr.label is label_hacking(tr.gold)


def test_trl_default_run_id_skips_checkpoint_folder(tmp_path: Path) -> None:
    ckpt = tmp_path / "my-run" / "checkpoint-60"
    ckpt.mkdir(parents=True)
    (ckpt / "trainer_state.json").write_bytes((DATA / "trainer_state.json").read_bytes())
    assert load_trl_trainer_state(ckpt / "trainer_state.json").run_id == "my-run"


def _trl(entries: list) -> str:
    return json.dumps({"global_step": 1, "log_history": entries}, indent=1)


BAD_TRL = [
    (
        '{"log_history": [\n  {"step": 1, "loss": 0.5},\n  {"step": 2 "loss": 0.4}\n]}',
        "line 3",
        "not valid JSON",
    ),
    ('{"global_step": 3}', "log_history", "'log_history'"),
    (_trl([{"step": 1, "loss": 0.5}, {"eval_reward": 0.3}]), "log_history[1]", "'step'"),
    (
        _trl([{"step": 1, "loss": 0.5}, {"step": "two", "eval_reward": 0.3}]),
        "log_history[1]",
        "'step'",
    ),
    (_trl([{"step": 1, "loss": 0.5}, 7]), "log_history[1]", "expected an object"),
    (
        _trl([{"step": 1, "loss": "high"}, {"step": 1, "eval_reward": 0.3}]),
        "log_history index 0",
        "'loss'",
    ),
    (
        _trl([{"step": 1, "loss": 0.5}, {"step": 2, "eval_reward": None}]),
        "'eval_reward'",
        "no entry carries",
    ),
    (
        _trl(
            [
                {"step": 2, "eval_reward": 0.3},
                {"step": 2, "eval_reward": 0.4},
                {"step": 2, "loss": 1.0},
            ]
        ),
        "log_history index 1",
        "strictly increasing",
    ),
    (_trl([{"step": 2, "eval_reward": 0.3}]), "'loss'", "no entry carries"),
]


@pytest.mark.parametrize(("content", "where", "field"), BAD_TRL)
def test_malformed_trainer_state_rejected(
    tmp_path: Path, content: str, where: str, field: str
) -> None:
    path = tmp_path / "trainer_state.json"
    path.write_text(content)
    with pytest.raises(CurveTraceError) as err:
        load_trl_trainer_state(path)
    msg = str(err.value)
    assert str(path) in msg and where in msg and field in msg, msg


# ---------------------------------------------------------------------------------------------
# OpenRLHF logs
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["openrlhf_metrics.jsonl", "openrlhf_metrics.csv"])
def test_openrlhf_loaders_agree(name: str) -> None:
    tr = load_openrlhf_log(DATA / name)
    assert tr.run_id == "openrlhf_metrics"
    assert tr.step.tolist() == [2, 4, 6]
    assert tr.eval.tolist() == [0.12, 0.40, 0.33]
    assert tr.loss.tolist() == [0.28, 0.19, 0.16]
    assert tr.proxy.tolist() == [0.10, 0.52, 0.95]
    assert tr.kl.tolist() == [0.05, 0.41, 1.32]
    assert tr.gold is None and tr.label is None and tr.meta["source"] == "openrlhf"


def test_openrlhf_optional_keys_absent_give_none(tmp_path: Path) -> None:
    path = tmp_path / "log.csv"
    path.write_text(
        "step,train/policy_loss,eval/reward,eval/gold\n1,0.5,,\n2,0.4,0.1,0.0\n4,0.3,0.2,0.5\n6,0.2,0.3,0.1\n"
    )
    tr = load_openrlhf_log(path, gold_key="eval/gold", run_id="x")
    assert tr.proxy is None and tr.kl is None and tr.run_id == "x"
    assert tr.gold.tolist() == [0.0, 0.5, 0.1] and tr.label is True


BAD_OPENRLHF = [
    ("jsonl", '{"global_step": 1, "train/policy_loss": 0.3}\n{"eval/reward": 0.1}\n', 2, "step"),
    (
        "jsonl",
        '{"global_step": 1, "train/policy_loss": 0.3}\n{"global_step": -2, "eval/reward": 0.1}\n',
        2,
        "'global_step'",
    ),
    (
        "jsonl",
        '{"step": 1, "train/policy_loss": 0.3}\n\n{"step": 2, "eval/reward": "bad"}\n',
        3,
        "'eval/reward'",
    ),
    (
        "jsonl",
        '{"step": 1, "train/policy_loss": 0.3}\n{"step": 2, "eval/reward": 0.1,}\n',
        2,
        "not valid JSON",
    ),
    (
        "jsonl",
        '{"step": 1, "train/policy_loss": 0.3, "train/kl": "inf"}\n{"step": 2, "eval/reward": 0.1}\n',
        1,
        "'train/kl'",
    ),
    (
        "jsonl",
        '{"step": 3, "train/policy_loss": 0.3, "eval/reward": 0.2}\n'
        '{"step": 2, "eval/reward": 0.1}\n',
        2,
        "strictly increasing",
    ),
    ("csv", "step,train/policy_loss,eval/reward\n1,0.3,\n2,0.2,oops\n", 3, "'eval/reward'"),
    ("csv", "step,train/policy_loss,eval/reward\n1,0.3,\nx,0.2,0.1\n", 3, "'step'"),
    ("csv", "step,train/policy_loss,eval/reward\n1,0.3,\n2,0.2,0.1,9\n", 3, "more cells"),
    ("csv", "step,train/policy_loss,eval/reward\n1,0.3,0.1\n2,0.2\n", 3, "fewer cells"),
    ("csv", "step,train/policy_loss,eval/reward\n1,0.3,inf\n", 2, "'eval/reward'"),
    ("csv", "train/policy_loss,eval/reward\n0.3,0.1\n", 2, "missing step"),
]


@pytest.mark.parametrize(("fmt", "content", "line", "field"), BAD_OPENRLHF)
def test_malformed_openrlhf_log_names_file_line_field(
    tmp_path: Path, fmt: str, content: str, line: int, field: str
) -> None:
    path = tmp_path / f"log.{fmt}"
    path.write_text(content)
    with pytest.raises(CurveTraceError) as err:
        load_openrlhf_log(path)
    msg = str(err.value)
    assert str(path) in msg and f"line {line}" in msg and field in msg, msg


def test_openrlhf_missing_eval_key_says_what_to_pass(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_text('{"step": 1, "train/policy_loss": 0.3, "eval/acc": 0.5}\n')
    with pytest.raises(CurveTraceError, match="eval_key"):
        load_openrlhf_log(path)
    assert load_openrlhf_log(path, eval_key="eval/acc").eval.tolist() == [0.5]


# ---------------------------------------------------------------------------------------------
# Labels
# ---------------------------------------------------------------------------------------------


def test_label_rule_examples() -> None:
    assert label_hacking([0, 1, 2, 3, 2, 1, 0.5])  # peak mid-run, falls most of the way back
    assert not label_hacking([0, 1, 2, 3, 3.5, 4, 4])  # still at its best at the end
    assert not label_hacking([0, 1, 2, 3, 4, 3.9])  # peak in the last 10 %: too late to tell
    assert not label_hacking([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 9.5])  # dip of 5 % of range
    assert label_hacking([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 9, 7.9])  # fall of 21 % of range
    assert not label_hacking([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 7.9])  # peak in the last 10 %
    assert label_hacking([1.0, 0.5, 0.2, 0.0])  # only ever falls: over-optimised from the start
    assert not label_hacking([0.0, 1.0])  # too short to peak before the end
    assert not label_hacking([0, 1, 0.9, 1.0], min_abs_drop=0.5)
    assert not label_hacking([0.0, 0.0, 0.0])


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.floats(-100, 100, allow_nan=False), min_size=1, max_size=30),
    st.floats(0.01, 100),
    st.floats(-100, 100),
)
def test_label_rule_is_scale_and_shift_free(values: list[float], a: float, b: float) -> None:
    g = np.array(values)
    # Rounding of a * g + b could turn near-ties around; compare only well-separated curves.
    if g.size > 1 and np.min(np.abs(np.subtract.outer(g, g))[~np.eye(g.size, dtype=bool)]) < 1e-3:
        return
    assert label_hacking(g) == label_hacking(a * g + b)


@given(st.lists(st.floats(0, 10, allow_nan=False), min_size=1, max_size=30))
def test_non_decreasing_curves_are_healthy(increments: list[float]) -> None:
    assert not label_hacking(np.cumsum(increments))


# ---------------------------------------------------------------------------------------------
# Resampling
# ---------------------------------------------------------------------------------------------


@given(
    st.lists(st.integers(1, 50), min_size=1, max_size=20),
    st.integers(1, 40),
    st.floats(-5, 5),
    st.floats(-5, 5),
)
def test_resample_reproduces_linear_curves(gaps: list[int], n: int, a: float, b: float) -> None:
    steps = np.cumsum(gaps)
    x = steps / steps[-1]
    tr = CurveTrace("r", steps, a * x + b, 2 * x, gold=-x)
    progress, ev, loss, gold = resample(tr, n)
    assert np.allclose(progress, np.arange(1, n + 1) / n)
    lo = x[0]  # before the first checkpoint the first value is held
    assert np.allclose(ev, a * np.maximum(progress, lo) + b)
    assert np.allclose(loss, 2 * np.maximum(progress, lo))
    assert np.allclose(gold, -np.maximum(progress, lo))
    assert ev[-1] == tr.eval[-1]


def test_resample_interpolates_and_handles_missing_gold() -> None:
    tr = CurveTrace("r", [0, 10, 40], [0.0, 1.0, 4.0], [3.0, 2.0, 2.0])
    progress, ev, loss, gold = resample(tr, 4)
    assert progress.tolist() == [0.25, 0.5, 0.75, 1.0]
    assert ev.tolist() == [1.0, 2.0, 3.0, 4.0] and loss.tolist() == [2.0, 2.0, 2.0, 2.0]
    assert gold is None
    with pytest.raises(ValueError):
        resample(tr, 0)
    with pytest.raises(CurveTraceError, match="last step is 0"):
        resample(CurveTrace("z", [0], [0.0], [0.0]), 3)


# ---------------------------------------------------------------------------------------------
# Gao et al. law
# ---------------------------------------------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(st.floats(0.05, 5), st.floats(0.0, 2), st.integers(5, 40), st.floats(1.0, 20))
def test_gao_fit_recovers_parameters_exactly(
    alpha: float, beta: float, n: int, d_max: float
) -> None:
    d = np.linspace(0, d_max, n)  # includes d = 0, which must be skipped
    r = np.where(d > 0, d * (alpha - beta * np.log(np.where(d > 0, d, 1))), 0.0)
    fit = fit_gao(d, r)
    assert fit.alpha == pytest.approx(alpha, rel=1e-6, abs=1e-8)
    assert fit.beta == pytest.approx(beta, rel=1e-6, abs=1e-8)
    assert fit.r2 == pytest.approx(1.0, abs=1e-9) or math.isnan(fit.r2)


def test_gao_fit_with_noise() -> None:
    rng = np.random.default_rng(0)
    alpha, beta = 1.2, 0.15
    d = np.linspace(0.05, 6, 200)
    r = d * (alpha - beta * np.log(d))
    noisy = r + rng.normal(0, 0.02 * np.ptp(r), d.size)
    fit = fit_gao(d, noisy)
    assert fit.alpha == pytest.approx(alpha, abs=0.03)
    assert fit.beta == pytest.approx(beta, abs=0.02)
    assert 0.98 < fit.r2 < 1.0


def test_gao_fit_errors_and_trace_shift() -> None:
    with pytest.raises(ValueError, match="at least 2"):
        fit_gao([0.0, 1.0], [0.0, 1.0])
    with pytest.raises(ValueError, match="equal length"):
        fit_gao([1.0, 2.0], [1.0])
    d = np.array([0.0, 0.5, 1.0, 2.0, 3.0])
    gold = 7.0 + d * (1.0 - 0.5 * np.log(np.where(d > 0, d, 1)))  # offset by the initial gold
    tr = CurveTrace("g", np.arange(5), gold, np.zeros(5), kl=d**2, gold=gold)
    fit = fit_gao_trace(tr)
    assert fit.alpha == pytest.approx(1.0) and fit.beta == pytest.approx(0.5)
    with pytest.raises(CurveTraceError, match="'gold' and 'kl'"):
        fit_gao_trace(CurveTrace("h", np.arange(3), np.zeros(3), np.zeros(3)))


def test_module_imports_without_torch() -> None:
    code = (
        "import sys, evalstop_gym.corpus as m; "
        "assert 'torch' not in sys.modules, 'torch imported'; print('ok')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "ok"
