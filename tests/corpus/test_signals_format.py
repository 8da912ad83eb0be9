"""Training-side signals in the curve-trace format and the TRL loader.

A trace carries TRL's per-step keys (proxy reward and its std, KL, entropy, completion
length, clip ratio) as optional series; the JSONL round-trips them; files without them
read as before; the TRL loader picks them up by default from genuine GRPO and RLOO logs.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from evalstop_gym.corpus import CurveTrace, load_trl_trainer_state, read_traces, write_traces
from evalstop_gym.corpus.format import SIGNAL_SERIES, CurveTraceError
from evalstop_gym.corpus.loaders import TRL_SIGNAL_KEYS
from evalstop_gym.corpus.packaged import TRL_CORPUS_QUICK, corpus_path

TRL = Path(__file__).resolve().parents[1] / "data" / "curves" / "trl"
NEW = ("reward_std", "entropy", "completion_length", "clip_ratio")


def _trace(**signals) -> CurveTrace:
    return CurveTrace("r-s1", [0, 5, 10], [0.1, 0.3, 0.2], [1.0, 0.8, 0.7], **signals)


def test_every_signal_round_trips_through_jsonl(tmp_path) -> None:
    given = {name: [0.5 + i, -0.25, 1e-3 * (i + 1)] for i, name in enumerate(SIGNAL_SERIES)}
    given["kl"] = [0.0, -0.02, 0.3]  # a signed estimate is kept as logged
    trace = _trace(**given)
    write_traces([trace], tmp_path / "t.jsonl")
    back = read_traces(tmp_path / "t.jsonl")[0]
    assert back == trace
    for name, values in given.items():
        assert getattr(back, name).tolist() == values
    first = json.loads((tmp_path / "t.jsonl").read_text().splitlines()[0])
    assert set(NEW) <= set(first) and "completions/mean_length" not in first


def test_a_file_without_signals_writes_the_same_bytes_as_before(tmp_path) -> None:
    # The new series come after the old ones on a line, and only when present.
    path = corpus_path(TRL_CORPUS_QUICK)
    traces = read_traces(path)
    assert all(getattr(t, name) is None for t in traces for name in NEW)
    write_traces(traces, tmp_path / "again.jsonl")
    digest = hashlib.sha256((tmp_path / "again.jsonl").read_bytes()).hexdigest()
    assert digest == hashlib.sha256(Path(path).read_bytes()).hexdigest()


@pytest.mark.parametrize("name", NEW)
def test_a_signal_must_be_finite_and_on_every_line_of_a_run(tmp_path, name) -> None:
    with pytest.raises(CurveTraceError, match=f"'{name}' must be finite"):
        _trace(**{name: [0.0, np.nan, 1.0]})
    path = tmp_path / "t.jsonl"
    path.write_text(
        f'{{"run_id": "r", "step": 0, "eval": 0.1, "loss": 1.0, "{name}": 0.5}}\n'
        '{"run_id": "r", "step": 1, "eval": 0.2, "loss": 0.9}\n'
    )
    with pytest.raises(CurveTraceError, match=f"line 2: field '{name}' is present on some"):
        read_traces(path)


@pytest.mark.parametrize("trainer", ["grpo", "rloo"])
def test_the_trl_loader_reads_the_trainers_signals_by_default(trainer) -> None:
    state = TRL / trainer / "trainer_state.json"
    history = json.loads(state.read_text())["log_history"]
    trace = load_trl_trainer_state(state)
    for name in SIGNAL_SERIES:
        series = getattr(trace, name)
        assert series is not None and series.shape == trace.step.shape, name
    # Each is the last training log at or before the checkpoint (the loader's alignment).
    last = {}
    for entry in sorted(history, key=lambda e: e["step"]):
        if "entropy" in entry:
            last[entry["step"]] = entry["entropy"]
    for step, value in zip(trace.step, trace.entropy, strict=True):
        before = [s for s in last if s <= step] or [min(last)]
        assert value == last[max(before)]
    assert trace.clip_ratio.tolist() == [
        max(
            (e for e in history if "clip_ratio/region_mean" in e and e["step"] <= s),
            key=lambda e: e["step"],
            default=None,
        )["clip_ratio/region_mean"]
        for s in trace.step
    ]


def test_online_dpo_keys_are_read_and_absent_signals_are_none(tmp_path) -> None:
    history = [
        {"step": 0, "eval_reward": 0.1},
        {
            "step": 1,
            "loss": 0.7,
            "objective/scores": 1.0,
            "objective/kl": 0.1,
            "objective/entropy": 3.0,
        },
        {
            "step": 2,
            "loss": 0.6,
            "objective/scores": 1.5,
            "objective/kl": 0.3,
            "objective/entropy": 2.5,
            "eval_reward": 0.3,
        },
    ]
    path = tmp_path / "trainer_state.json"
    path.write_text(json.dumps({"log_history": history}))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # absent default signals are no surprise
        trace = load_trl_trainer_state(path)
    assert trace.proxy.tolist() == [1.0, 1.5]
    assert trace.kl.tolist() == [0.1, 0.3] and trace.entropy.tolist() == [3.0, 2.5]
    assert trace.reward_std is None and trace.completion_length is None
    assert TRL_SIGNAL_KEYS["entropy"][-1] == "objective/entropy"


def test_signal_keys_choose_or_skip_the_other_signals() -> None:
    state = TRL / "grpo" / "trainer_state.json"
    none = load_trl_trainer_state(state, proxy_key=None, kl_key=None, signal_keys={})
    assert all(getattr(none, name) is None for name in SIGNAL_SERIES)
    with pytest.warns(UserWarning, match="clip_ratio key 'clip_ratio/high_mean' gives every"):
        # named alone, a constant key is worth a warning (a default one is not)
        clipped = load_trl_trainer_state(state, signal_keys={"clip_ratio": "clip_ratio/high_mean"})
    assert clipped.clip_ratio is not None and clipped.entropy is None
    with pytest.raises(CurveTraceError, match="signal_keys"):
        load_trl_trainer_state(state, signal_keys={"gold": "eval_reward"})
