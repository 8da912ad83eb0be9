"""Replay of a user's own logs: the decisions OnlineStopper takes live, per run and stopper."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from baselines import Cusum, EvalStop, LossPlateau, NoStop, StopAtProgress
from baselines.bayes import BayesStopper
from baselines.floors import FirstEvalGate
from baselines.online import OnlineStopper, ScaleRule
from evalstop_cli.main import main
from evalstop_experiments.replay import (
    format_table,
    read_runs,
    replay,
    stopper_factory,
)
from evalstop_gym.corpus import CurveTrace, write_traces
from evalstop_gym.errors import ConfigError

DATA = Path(__file__).resolve().parents[1] / "data" / "curves"
DPO_NOISY = DATA / "trl" / "dpo_noisy" / "trainer_state.json"
LONG_REPLAY = Path(__file__).resolve().parents[2] / "benchmarks" / "speed" / "bench_long_replay.py"
DPO_CLEAN = DATA / "trl" / "dpo_clean"  # a folder holding trainer_state.json
GRPO = DATA / "trl" / "grpo" / "trainer_state.json"


def test_replay_of_an_over_fitting_dpo_run_on_its_eval_loss() -> None:
    (trace,) = read_runs(DPO_NOISY, metric="eval_loss", greater_is_better=False)
    r = replay(trace, "evalstop:2", gpus=8, gpu_hours_per_step=0.01)
    # eval_loss bottoms out at step 48, rises at 54 and 60: two declines of the score.
    assert (r.stop_step, r.delivered_step) == (60, 48)
    assert r.delivered_value == pytest.approx(0.5786, abs=1e-4)  # the log's own units
    assert r.steps_saved == 60 and r.gpu_hours_saved == pytest.approx(60 * 0.01 * 8)
    assert r.best_step == 102 and r.delivered_gold is None
    never = replay(trace, "nostop")
    assert never.stop_step is None and never.delivered_step == never.best_step == 102
    assert never.steps_saved == 0


def test_replay_goes_through_the_online_stopper() -> None:
    (trace,) = read_runs(GRPO, metric="eval_reward")
    for policy in (EvalStop(1), Cusum(0.05), LossPlateau(1, 0.5)):
        live = OnlineStopper(policy, len(trace))
        for s, v, lo in zip(trace.step, trace.eval, trace.loss, strict=True):
            if live.observe(float(v), loss=float(lo), step=int(s)):
                break
        r = replay(trace, policy)
        assert list(r.decisions) == live.decisions
        assert r.stop_step == live.stop_step


def test_replay_needs_no_gold_and_no_label() -> None:
    t = CurveTrace("mine", [10, 20, 30, 40, 50], [0.1, 0.5, 0.4, 0.3, 0.2], [1.0] * 5)
    r = replay(t, EvalStop(2))
    assert (r.stop_step, r.delivered_step, r.steps_saved) == (40, 20, 10)
    assert "mine" in format_table([r])


def test_a_scale_changes_what_a_scale_dependent_stopper_sees() -> None:
    t = CurveTrace("r", np.arange(8), [1.0, 3.0, 2.8, 3.5, 3.9, 3.0, 2.0, 1.0], np.ones(8))
    assert replay(t, "cusum:0.1").stop_step == 2
    rule = ScaleRule.fit([[1.0, 3.0, 5.0], [1.2, 2.7, 3.6], [0.9, 4.2, 3.9]])
    assert replay(t, "cusum:0.1", scale=rule).stop_step == 5


def test_a_corpus_jsonl_replays_each_run_and_can_watch_gold(tmp_path) -> None:
    runs = read_runs(DATA / "traces.jsonl")
    assert [t.run_id for t in runs] == ["toy-hacking", "toy-healthy"]
    r = replay(runs[0], "evalstop:1")
    assert r.delivered_gold == runs[0].gold[list(runs[0].step).index(r.delivered_step)]
    write_traces(runs[:1], tmp_path / "one.jsonl")
    (gold,) = read_runs(tmp_path / "one.jsonl", metric="gold")
    assert gold.eval.tolist() == runs[0].gold.tolist()
    with pytest.raises(ConfigError, match=r"'toy-healthy'.*has none"):
        read_runs(DATA / "traces.jsonl", metric="gold")  # the healthy run has none
    with pytest.raises(ConfigError, match="'eval' or 'gold'"):
        read_runs(DATA / "traces.jsonl", metric="eval_reward")


def test_openrlhf_logs_replay() -> None:
    for name in ("openrlhf_metrics.jsonl", "openrlhf_metrics.csv"):
        (t,) = read_runs(DATA / name)
        assert len(replay(t, "evalstop:2").decisions) >= 1


@pytest.mark.parametrize(
    "spec, cls",
    [
        ("nostop", NoStop),
        ("evalstop", EvalStop),
        ("EvalStop:3", EvalStop),
        ("cusum", Cusum),
        ("cusum:0.2,0.01", Cusum),
        ("lossplateau:2,0.05", LossPlateau),
        ("stopat:0.5", StopAtProgress),
        ("gate:0.3,0.4", FirstEvalGate),
        ("bayes:hard", BayesStopper),
        ("baselines.policies:NoStop", NoStop),
    ],
)
def test_policy_specs(spec: str, cls: type) -> None:
    policy = stopper_factory(spec)(12)
    assert isinstance(policy, cls)
    if spec == "EvalStop:3":
        assert policy.k == 3
    if cls is BayesStopper:
        assert policy.k == 12  # a run of 12 evaluations, whatever the calibration's K


def test_a_user_policy_file(tmp_path) -> None:
    f = tmp_path / "mine.py"
    f.write_text(
        "class StopAtThird:\n"
        "    name = 'third'\n"
        "    def reset(self):\n        pass\n"
        "    def act(self, obs):\n        return int(obs['progress'][0] > 0.25)\n"
    )
    t = CurveTrace("r", np.arange(10), np.arange(10.0), np.ones(10))
    assert replay(t, f"{f}:StopAtThird").stop_step == 2


@pytest.mark.parametrize(
    "spec", ["evalstop:x", "evalstop:1.5", "cusum:-1", "cusum:1,2,3", "gate:0.3", "stopat", "what"]
)
def test_bad_specs_are_one_line_errors(spec: str) -> None:
    with pytest.raises(ConfigError) as e:
        stopper_factory(spec)
    assert "\n" not in str(e.value)


ARGS = [
    "curves",
    "replay",
    str(DPO_NOISY),
    str(DPO_CLEAN),
    "--metric",
    "eval_loss",
    "--lower-is-better",
    "--policy",
    "evalstop:2",
    "--policy",
    "cusum:0.02",
    "--gpus",
    "8",
    "--gpu-hours-per-step",
    "0.01",
]


def test_cli_prints_a_table_and_writes_json(tmp_path, capsys) -> None:
    assert main([*ARGS, "--json", str(tmp_path / "r.json")]) == 0
    text = capsys.readouterr().out
    lines = [ln for ln in text.splitlines() if ln.startswith("dpo_noisy  evalstop:2")]
    assert lines and " 60 " in lines[0] and "48 (0.5786)" in lines[0] and "4.8" in lines[0]
    rows = json.loads((tmp_path / "r.json").read_text())
    assert {(r["run_id"], r["stopper"]) for r in rows} == {
        (run, s) for run in ("dpo_noisy", "dpo_clean") for s in ("evalstop:2", "cusum:0.02")
    }


@pytest.mark.slow
def test_cli_plots_each_curve_with_its_stops(tmp_path, capsys) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "stops.png"
    assert main([*ARGS, "--plot", str(out)]) == 0
    assert out.stat().st_size > 1000 and f"plot: {out}" in capsys.readouterr().out


@pytest.mark.parametrize("flag", ["--plot", "--json"])
def test_cli_never_overwrites_a_file_at_plot_or_json(flag, tmp_path, capsys) -> None:
    if flag == "--plot":
        pytest.importorskip("matplotlib")
    mine = tmp_path / ("stops.png" if flag == "--plot" else "r.json")
    mine.write_text("mine\n")
    assert main([*ARGS, flag, str(mine)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{flag}=" in err[0] and "never overwritten" in err[0]
    assert mine.read_text() == "mine\n" and sorted(tmp_path.iterdir()) == [mine]


def test_cli_refuses_one_file_for_both_plot_and_json(tmp_path, capsys) -> None:
    pytest.importorskip("matplotlib")
    same = str(tmp_path / "out.png")
    assert main([*ARGS, "--plot", same, "--json", same]) == 2
    assert "a file other than --plot's" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_cli_warns_on_one_line_and_scales_from_other_runs(capsys) -> None:
    code = main(
        [
            "curves",
            "replay",
            str(GRPO),
            "--metric",
            "eval_reward",
            "--policy",
            "cusum",
            "--scale-from",
            str(DPO_CLEAN),
        ]
    )
    assert code == 2  # the DPO log has no eval_reward: its keys are listed
    err = capsys.readouterr().err
    assert "eval_rewards/accuracies" in err and err.count("\n") == 1
    rloo = DATA / "trl" / "rloo"
    argv = ["curves", "replay", str(GRPO), "--metric", "eval_reward", "--policy", "cusum"]
    assert main([*argv, "--scale-from", str(rloo)]) == 0
    out = capsys.readouterr().out
    # RLOO's eval_reward starts at 1.75 and gains 0.7125: 1.75 -> 0.3, 2.4625 -> 0.9.
    assert out.startswith("scale: -1.17368 + 0.842105 x (fitted on 1 run(s))")
    assert main([*argv, "--scale", "0,1", "--scale-from", str(rloo)]) == 2


def test_cli_refuses_a_bad_policy_before_reading(capsys) -> None:
    assert main(["curves", "replay", str(GRPO), "--policy", "evalstop:zero"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("evalstop-gym: error:") and "evalstop[:K]" in err


def test_cli_loader_warnings_are_lines_on_stderr(capsys) -> None:
    code = main(
        ["curves", "replay", str(GRPO), "--metric", "eval_reward", "--loss-key", "train_loss"]
    )
    captured = capsys.readouterr()
    assert code == 0
    assert "evalstop-gym: warning:" in captured.err and "'train_loss'" in captured.err


def test_an_absurd_number_of_checkpoints_is_refused_or_ignored(tmp_path, capsys) -> None:
    """``--n-checkpoints 10**12`` (or an EvalStopCallback note saying so in the log) ended
    in a NumPy out-of-memory traceback: the flag is refused in one line, the note ignored
    (it is the callback's note, not data), so the replay uses the log's own length."""
    assert main([*ARGS, "--n-checkpoints", str(10**12)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "n_checkpoints=1000000000000 is not allowed" in err[0]
    state = json.loads(DPO_NOISY.read_text())
    state["stateful_callbacks"] = {"EvalStopCallback": {"args": {"n_checkpoints": 10**12}}}
    log = tmp_path / "trainer_state.json"
    log.write_text(json.dumps(state))
    trace = read_runs(log, metric="eval_loss", greater_is_better=False)[0]
    assert "n_checkpoints" not in trace.meta
    assert replay(trace, EvalStop(2)).decisions  # decided with the log's own length


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"greater_is_better": "no"}, "greater_is_better='no' is not allowed: True or False"),
        ({"greater_is_better": 0}, "greater_is_better=0"),
        ({"eval_key": None}, "eval_key=None is not allowed: a non-empty string"),
        ({"loss_key": 5}, "loss_key=5"),
        ({"eval_key": ["eval_loss"]}, "eval_key="),
        ({"gold_key": ["x"]}, "gold_key="),
        ({"signal_keys": {"entropy": 3}}, r"signal_keys\['entropy'\]=3"),
    ],
)
def test_loader_arguments_are_checked_before_the_file_is_read(kwargs, match) -> None:
    """``greater_is_better="no"`` (truthy) read a loss as a score, silently; a key that is
    not a string was a TypeError from inside difflib."""
    from evalstop_gym.corpus import load_trl_trainer_state

    with pytest.raises(ConfigError, match=match):
        load_trl_trainer_state(DPO_NOISY, **kwargs)
    if "greater_is_better" in kwargs:
        with pytest.raises(ConfigError, match="greater_is_better"):
            read_runs(DATA / "openrlhf_metrics.csv", **kwargs)
        with pytest.raises(ConfigError, match="greater_is_better"):
            read_runs(DATA / "traces.jsonl", metric="eval", **kwargs)


@pytest.mark.parametrize(
    ("row", "shown"),
    [("2,0.4,abc", "got 'abc'"), ("ten,0.4,1", "got 'ten'"), ("2,0.4,1e999", "got '1e999'")],
)
def test_a_bad_cell_is_shown_as_the_file_has_it(row, shown, tmp_path, capsys) -> None:
    """The message said ``got None`` (the failed conversion), not the cell."""
    log = tmp_path / "metrics.csv"
    log.write_text(f"global_step,train/policy_loss,eval/reward\n{row}\n")
    assert main(["curves", "replay", str(log)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "line 2" in err[0] and shown in err[0]


def _long_log(tmp_path: Path) -> tuple[Path, np.ndarray]:
    """The 2,000-eval trainer_state.json of benchmarks/speed/bench_long_replay.py (its eval
    peaks at eval 800 and falls), and its evals."""
    spec = importlib.util.spec_from_file_location("bench_long_replay", LONG_REPLAY)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    log = tmp_path / "trainer_state.json"
    bench.write_log(log, 2000)
    history = json.loads(log.read_text())["log_history"]
    return log, np.array([e["eval_reward"] for e in history if "eval_reward" in e])


def test_bayes_replays_a_run_longer_than_its_tables(tmp_path, capsys) -> None:
    """``--policy bayes`` was refused beyond 150 evaluations (its tables of every prefix
    grew as K**3: 7 GB at 150); a real run has more.  A 2,000-eval trainer_state.json that
    peaks at eval 800 and falls is replayed (about 2 s of CPU): Bayes stops after the peak,
    well before the end, and keeps the run's best checkpoint."""
    log, evals = _long_log(tmp_path)
    assert main(["curves", "replay", str(log), "--policy", "bayes:hard"]) == 0
    row = capsys.readouterr().out.strip().splitlines()[-1].split()
    stop, delivered, best = int(row[2]), int(row[3]), int(row[5])
    assert delivered == best == 10 * (int(evals.argmax()) + 1)
    assert 8000 < stop < 15000


@pytest.mark.parametrize(
    "policy",
    ["pretrained:general", "pretrained:routed", "pretrained:hard"],
)
def test_the_shipped_learned_stoppers_replay_a_long_run(policy, tmp_path, capsys) -> None:
    """The backward-induction, routed and PPO models on the same 2,000-eval log: no refusal, a
    row with the run's best (each in a few CPU-seconds and under 0.4 GB: docs/PERFORMANCE.md)."""
    log, evals = _long_log(tmp_path)
    assert main(["curves", "replay", str(log), "--policy", policy]) == 0
    row = capsys.readouterr().out.strip().splitlines()[-1].split()
    assert row[1] == policy and int(row[5]) == 10 * (int(evals.argmax()) + 1)
    assert row[2] == "-" or 10 <= int(row[2]) <= 20000
