"""Hostile input files: every reader raises the package's own error naming file and line.

Readers: the Philly trace CSV (``read_trace``), the curve-trace JSONL corpus
(``read_traces``), TRL ``trainer_state.json`` and OpenRLHF logs (JSONL and CSV).  The reported
cases come first, one test each; then a fuzzer mutates the bytes of valid files and checks
that only :class:`EvalStopError` escapes and that what is read is finite.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalstop_gym import SAMPLE_TRACE, ConfigError, SimConfig, TraceError
from evalstop_gym.corpus import CurveTrace, CurveTraceError, read_traces, write_traces
from evalstop_gym.corpus.loaders import load_openrlhf_log, load_trl_trainer_state
from evalstop_gym.errors import EvalStopError
from evalstop_gym.sim.traces import _read_trace_cached, read_trace

DATA = Path(__file__).parents[1] / "data" / "curves"
HEADER = "timestamp,duration,num_gpus,gpu_time,cluster\n"
ROW = "2017-10-01 00:00:00,60.0,1,60.0,aa\n"


def _trace(rows: list[str]) -> list[str]:
    return [HEADER, *rows]


def _with_raw(line: str, field: str, raw: str) -> str:
    """``line`` (a JSON object) with ``field`` set to the literal JSON text ``raw``."""
    obj = json.loads(line)
    obj[field] = "__RAW__"
    return json.dumps(obj).replace('"__RAW__"', raw) + "\n"


def _corpus_lines() -> list[str]:
    step = np.arange(4) * 10
    x = np.linspace(0, 1, 4)
    tmp = Path(os.environ.get("TMPDIR", "/tmp")) / f"hostile-{os.getpid()}.jsonl"
    write_traces([CurveTrace("r", step, x, 1 - x, gold=x, label=False)], tmp)
    lines = tmp.read_text().splitlines(keepends=True)
    tmp.unlink()
    return lines


def _read_philly(p: Path) -> object:
    _read_trace_cached.cache_clear()
    return read_trace(p)


READERS: dict[str, tuple[str, Callable[[Path], object]]] = {
    "philly.csv": ("csv", _read_philly),
    "corpus.jsonl": ("jsonl", read_traces),
    "trainer_state.json": ("json", load_trl_trainer_state),
    "openrlhf.jsonl": ("jsonl", load_openrlhf_log),
    "openrlhf.csv": ("csv", load_openrlhf_log),
}


def _valid_bytes(name: str) -> bytes:
    if name == "philly.csv":
        return Path(SAMPLE_TRACE).read_bytes()
    if name == "corpus.jsonl":
        return "".join(_corpus_lines()).encode()
    if name == "trainer_state.json":
        return (DATA / "trainer_state.json").read_bytes()
    return (DATA / ("openrlhf_metrics" + Path(name).suffix)).read_bytes()


def _expect_own_error(name: str, data: bytes, tmp_path: Path, line: int | None = None) -> str:
    p = tmp_path / name
    p.write_bytes(data)
    with pytest.raises(EvalStopError) as exc:
        READERS[name][1](p)
    msg = str(exc.value)
    assert str(p) in msg
    if line is not None:
        assert f"line {line}" in msg, msg
    return msg


@pytest.mark.parametrize("name", sorted(READERS))
def test_non_utf8_byte_names_file_and_line(name: str, tmp_path: Path) -> None:
    lines = _valid_bytes(name).splitlines(keepends=True)
    lines[1] = lines[1][:5] + b"\xff" + lines[1][5:]
    msg = _expect_own_error(name, b"".join(lines), tmp_path, line=2)
    assert "0xff" in msg and "UTF-8" in msg


@pytest.mark.parametrize("name", sorted(READERS))
def test_utf8_bom_is_accepted(name: str, tmp_path: Path) -> None:
    plain, bom = tmp_path / name, tmp_path / ("bom-" + name)
    plain.write_bytes(_valid_bytes(name))
    bom.write_bytes(b"\xef\xbb\xbf" + _valid_bytes(name))
    read = READERS[name][1]
    a, b = read(plain), read(bom)
    if name == "philly.csv":
        assert np.array_equal(a.duration_s, b.duration_s) and np.array_equal(a.gpus, b.gpus)
    elif name == "corpus.jsonl":
        assert a == b
    else:
        assert np.array_equal(a.eval, b.eval) and np.array_equal(a.loss, b.loss)


def test_400_digit_numbers(tmp_path: Path) -> None:
    big = "9" * 400
    _expect_own_error(
        "philly.csv",
        "".join(_trace([ROW, f"2017-10-01 00:00:01,{big},1,1,aa\n"])).encode(),
        tmp_path,
        3,
    )
    _expect_own_error(
        "philly.csv",
        "".join(_trace([ROW, f"2017-10-01 00:00:01,60,{big},1,aa\n"])).encode(),
        tmp_path,
        3,
    )
    lines = _corpus_lines()
    for field in ("eval", "step"):
        bad = [lines[0], _with_raw(lines[1], field, big), *lines[2:]]
        _expect_own_error("corpus.jsonl", "".join(bad).encode(), tmp_path, 2)
    state = (
        (DATA / "trainer_state.json")
        .read_text()
        .replace('"eval_reward": 0.55', f'"eval_reward": {big}')
    )
    _expect_own_error("trainer_state.json", state.encode(), tmp_path)
    state = (DATA / "trainer_state.json").read_text().replace('"step": 20}', f'"step": {big}}}', 1)
    _expect_own_error("trainer_state.json", state.encode(), tmp_path)
    text = (DATA / "openrlhf_metrics.csv").read_text().replace("0.28", big, 1)
    _expect_own_error("openrlhf.csv", text.encode(), tmp_path, 3)


@pytest.mark.parametrize("name", ["philly.csv", "openrlhf.csv"])
def test_csv_field_over_the_csv_limit(name: str, tmp_path: Path) -> None:
    huge = '"' + "x" * (csv.field_size_limit() + 1) + '"'
    lines = _valid_bytes(name).decode().splitlines(keepends=True)
    lines.insert(2, huge + lines[1][lines[1].index(",") :])
    msg = _expect_own_error(name, "".join(lines).encode(), tmp_path, line=3)
    assert str(csv.field_size_limit()) in msg


@pytest.mark.parametrize("name", ["corpus.jsonl", "trainer_state.json", "openrlhf.jsonl"])
def test_deeply_nested_json(name: str, tmp_path: Path) -> None:
    nested = b"[" * 100_000 + b"\n"
    data = nested if name == "trainer_state.json" else _valid_bytes(name) + nested
    msg = _expect_own_error(name, data, tmp_path)
    assert "JSON" in msg


@pytest.mark.parametrize("value", ["1e308", "-1e308", "1e400", "NaN", "Infinity"])
def test_corpus_values_beyond_the_bound_are_refused(value: str, tmp_path: Path) -> None:
    lines = _corpus_lines()
    lines[1] = _with_raw(lines[1], "gold", value)
    msg = _expect_own_error("corpus.jsonl", "".join(lines).encode(), tmp_path, line=2)
    assert "'gold'" in msg and "1e+09" in msg
    with pytest.raises(CurveTraceError, match="magnitude"):
        CurveTrace("r", [0, 1], [0.0, float(value)], [1.0, 1.0])


def test_corpus_run_with_one_checkpoint_is_refused_at_construction(tmp_path: Path) -> None:
    lines = _corpus_lines()
    one = lines[0].replace('"run_id": "r"', '"run_id": "solo"')
    p = tmp_path / "corpus.jsonl"
    p.write_text("".join(lines) + one)
    with pytest.raises(CurveTraceError) as exc:
        SimConfig(curves=str(p))
    msg = str(exc.value)
    assert str(p) in msg and f"line {len(lines) + 1}" in msg and "'solo'" in msg


def test_corpus_without_gold_is_refused_at_construction() -> None:
    with pytest.raises(ConfigError, match="gold and label"):
        SimConfig(curves=str(DATA / "traces.jsonl"))


def test_philly_duration_is_bounded(tmp_path: Path) -> None:
    p = tmp_path / "philly.csv"
    p.write_text("".join(_trace([ROW, "2017-10-01 00:00:01,1e300,1,1,aa\n"])))
    with pytest.raises(TraceError) as exc:
        _read_philly(p)
    assert exc.value.line == 3 and exc.value.field == "duration" and "1e+08" in str(exc.value)


def test_philly_bad_year(tmp_path: Path) -> None:
    p = tmp_path / "philly.csv"
    p.write_text("".join(_trace([ROW, "0000-10-01 00:00:01,60,1,1,aa\n"])))
    with pytest.raises(TraceError, match="timestamp"):
        _read_philly(p)


# --------------------------------------------------------------------------- fuzzing

FUZZ = settings(
    max_examples=int(os.environ.get("EVALSTOP_FUZZ_EXAMPLES", "60")),
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

EDITS = st.lists(
    st.tuples(
        st.floats(0, 1),
        st.sampled_from(["insert", "replace", "delete", "truncate"]),
        st.one_of(
            st.binary(min_size=1, max_size=4),
            st.sampled_from(
                [
                    b"\xff",
                    b"\xef\xbb\xbf",
                    b"[[[[",
                    b"9" * 400,
                    b"1e308",
                    b"NaN",
                    b"\0",
                    b'"',
                    b",,",
                ]
            ),
        ),
    ),
    min_size=1,
    max_size=4,
)


def _mutate(data: bytes, edits: list[tuple[float, str, bytes]]) -> bytes:
    for where, op, blob in edits:
        i = int(where * len(data))
        if op == "insert":
            data = data[:i] + blob + data[i:]
        elif op == "replace":
            data = data[:i] + blob + data[i + len(blob) :]
        elif op == "delete":
            data = data[:i] + data[i + len(blob) :]
        else:
            data = data[:i]
    return data


def _assert_finite(result: object) -> None:
    traces = result if isinstance(result, list) else [result]
    for t in traces:
        if isinstance(t, CurveTrace):
            for name in ("eval", "loss", "proxy", "kl", "gold"):
                arr = getattr(t, name)
                assert arr is None or bool(np.all(np.isfinite(arr)))
        else:
            assert np.all(np.isfinite(t.duration_s)) and np.all(np.isfinite(t.arrival_s))


@pytest.mark.parametrize("name", sorted(READERS))
def test_fuzzed_files_raise_only_own_errors(name: str, tmp_path: Path) -> None:
    valid = _valid_bytes(name)

    @FUZZ
    @given(edits=EDITS)
    def run(edits: list[tuple[float, str, bytes]]) -> None:
        p = tmp_path / name
        p.write_bytes(_mutate(valid, edits))
        try:
            result = READERS[name][1](p)
        except EvalStopError as exc:
            assert str(p) in str(exc)
            return
        _assert_finite(result)

    run()


@pytest.mark.parametrize("command", ["reproduce", "benchmark-trace"])
def test_cli_unwritable_or_unreadable_path_is_a_message(
    command: str, tmp_path: Path, capsys
) -> None:
    # The command line runs the harness, whose statistics need SciPy (the cli extra).
    pytest.importorskip("scipy")
    from evalstop_cli.main import main

    blocker = tmp_path / "a-file"
    blocker.write_text("")
    if command == "reproduce":
        argv = ["reproduce", "--out", str(blocker / "out"), "--experiments", "E1", "--seeds", "2"]
    else:
        argv = ["benchmark", "--seeds", "1", "--workers", "1", "--trace", str(tmp_path / "no.csv")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("evalstop-gym: error: ") and "Traceback" not in err
    assert str(tmp_path) in err
