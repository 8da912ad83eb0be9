"""EvalStopCallback on real (tiny, local) transformers training runs.

The planted decline is genuine over-fitting: a one-layer GPT-2 learns a counting
language (each token is the previous one plus one) from 8 sequences with half their
tokens replaced at random; the clean held-out eval loss first falls (it learns the
rule) and then rises (it memorises the noise).  Nothing is downloaded.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from transformers import (  # noqa: E402
    GPT2Config,
    GPT2LMHeadModel,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)

from baselines import Cusum, EvalStop, LossPlateau  # noqa: E402
from baselines.online import OnlineStopper  # noqa: E402
from evalstop_gym.errors import ConfigError  # noqa: E402
from evalstop_integrations.transformers import PIN_DIR, EvalStopCallback  # noqa: E402

VOCAB, LENGTH, MAX_STEPS, EVERY = 16, 12, 100, 5


@pytest.fixture(autouse=True)
def _one_thread():
    # Two cores shared by many processes: a tiny model is fastest on one thread.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    transformers.logging.set_verbosity_error()
    yield
    torch.set_num_threads(threads)


def counting(n: int, noise: float, seed: int) -> list[dict]:
    """``n`` counting sequences with a share ``noise`` of tokens replaced at random."""
    rng = np.random.default_rng(seed)
    x = (rng.integers(0, VOCAB, n)[:, None] + np.arange(LENGTH)[None]) % VOCAB
    x = np.where(rng.random(x.shape) < noise, rng.integers(0, VOCAB, x.shape), x)
    return [{"input_ids": torch.tensor(r), "labels": torch.tensor(r)} for r in x]


def tiny_gpt2() -> GPT2LMHeadModel:
    torch.manual_seed(0)
    config = GPT2Config(
        vocab_size=VOCAB,
        n_positions=LENGTH,
        n_embd=32,
        n_layer=1,
        n_head=2,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
    )
    return GPT2LMHeadModel(config)


def make_trainer(out: Path, callbacks: list, *, both_sets: bool = False, **overrides) -> Trainer:
    settings = {
        "max_steps": MAX_STEPS,
        "eval_strategy": "steps",
        "eval_steps": EVERY,
        "save_strategy": "steps",
        "save_steps": EVERY,
        "save_total_limit": 1,
        "learning_rate": 3e-3,
        "lr_scheduler_type": "constant",
        "per_device_train_batch_size": 8,
        "per_device_eval_batch_size": 64,
        "logging_steps": EVERY,  # the training loss goes with each eval (and into the log)
        "report_to": [],
        "seed": 0,
        "use_cpu": True,
        "disable_tqdm": True,
        **overrides,
    }
    train, clean = counting(8, 0.5, seed=1), counting(64, 0.0, seed=2)
    return Trainer(
        model=tiny_gpt2(),
        args=TrainingArguments(str(out), **settings),
        train_dataset=train,
        # both_sets: the metrics are eval_clean_loss and eval_train_loss
        eval_dataset={"clean": clean, "train": train} if both_sets else clean,
        callbacks=callbacks,
    )


def replay_log(checkpoint: Path, policy):
    """The offline replay of a checkpoint's ``trainer_state.json``, read by the package's loader.

    The run's planned evaluations K come from the callback's record in the same file: a
    stopped run's log ends at the stop, and its last logged eval is not its K-th.
    """
    from evalstop_experiments.replay import read_runs, replay

    trace = read_runs(checkpoint, metric="eval_loss", greater_is_better=False)[0]
    saved = json.loads((checkpoint / "trainer_state.json").read_text())
    k = saved["stateful_callbacks"]["EvalStopCallback"]["args"]["n_checkpoints"]
    assert trace.meta["n_checkpoints"] == k  # the loader keeps the callback's planned K
    # the loader negated the loss: higher is better, as replay() reads it
    return replay(trace, policy)


def bare_state(global_step: int):
    """A stand-in for a Trainer's state: 100 steps, an eval every 10, nothing logged yet."""
    from types import SimpleNamespace

    return SimpleNamespace(
        global_step=global_step,
        max_steps=100,
        eval_steps=10,
        num_train_epochs=1,
        log_history=[],
        stateful_callbacks={},
        is_world_process_zero=True,
    )


def eval_losses(state) -> list[float]:
    return [e["eval_loss"] for e in state.log_history if "eval_loss" in e]


def weights(folder: str) -> dict:
    import safetensors.torch

    return safetensors.torch.load_file(os.path.join(folder, "model.safetensors"))


class StopAt(TrainerCallback):
    """Interrupts a run at a step (a pre-empted job), leaving a checkpoint to resume from."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            control.should_training_stop = True


def test_it_stops_a_planted_decline_where_the_replay_of_its_log_says(tmp_path: Path) -> None:
    stop = EvalStopCallback(EvalStop(2), metric="eval_loss", load_best_at_end=True)
    trainer = make_trainer(tmp_path, [stop])
    trainer.train()
    losses = eval_losses(trainer.state)
    # The decline is planted: the loss fell first, then rose twice in a row.
    assert min(losses) < losses[0] and losses[-1] > losses[-2] > losses[-3]
    assert stop.stopped and stop.stop_step == trainer.state.global_step < MAX_STEPS
    assert stop.n_checkpoints == MAX_STEPS // EVERY

    replayed = replay_log(tmp_path / f"checkpoint-{stop.stop_step}", EvalStop(2))
    assert (replayed.stop_step, replayed.delivered_step) == (stop.stop_step, stop.best_step)
    assert [d["action"] for d in replayed.decisions] == [d["action"] for d in stop.decisions]
    assert stop.best_step == EVERY * (1 + int(np.argmin(losses)))

    # save_total_limit=1 deleted the original checkpoint; the pinned copy is whole.
    assert not (tmp_path / f"checkpoint-{stop.best_step}").exists()
    delivered = stop.delivered_checkpoint
    assert delivered == str(tmp_path / PIN_DIR / f"checkpoint-{stop.best_step}")
    pinned_state = json.loads(Path(delivered, "trainer_state.json").read_text())
    assert pinned_state["global_step"] == stop.best_step
    assert sorted(p.name for p in (tmp_path / PIN_DIR).iterdir()) == [Path(delivered).name]
    # load_best_at_end: the model holds the delivered weights, not the last step's.
    held = {k: v.detach() for k, v in trainer.model.state_dict().items()}
    for name, value in weights(delivered).items():
        torch.testing.assert_close(held[name], value)
    last_weights = weights(str(tmp_path / f"checkpoint-{stop.stop_step}"))
    assert any(not torch.equal(held[k], v) for k, v in last_weights.items())

    # The decisions are in the trainer's own log.
    logged = [e for e in trainer.state.log_history if "evalstop_stop" in e]
    assert [e["evalstop_stop"] for e in logged] == [
        int(d["action"] == "stop") for d in stop.decisions
    ]
    assert logged[-1]["evalstop_best_step"] == stop.best_step


def test_the_pin_holds_when_the_trainer_tracks_another_metric(tmp_path: Path) -> None:
    # The trainer's best is the lowest loss on the training set, which memorisation keeps
    # lowering: its best is always the newest checkpoint, the only one save_total_limit=1
    # keeps.  The checkpoint EvalStop delivers (best clean eval loss) survives by its pin.
    stop = EvalStopCallback(EvalStop(2), metric="eval_clean_loss")
    trainer = make_trainer(
        tmp_path,
        [stop],
        both_sets=True,
        metric_for_best_model="eval_train_loss",
        load_best_model_at_end=True,
    )
    trainer.train()
    assert stop.stopped and stop.best_step < stop.stop_step
    theirs = Path(trainer.state.best_model_checkpoint).name
    assert theirs == f"checkpoint-{stop.stop_step}"
    assert sorted(p.name for p in tmp_path.glob("checkpoint-*")) == [theirs]
    assert stop.delivered_checkpoint is not None
    saved = json.loads(Path(stop.delivered_checkpoint, "trainer_state.json").read_text())
    assert saved["global_step"] == stop.best_step


@pytest.mark.parametrize("restore_flag", [False, True])
def test_a_resumed_run_makes_the_same_decisions(tmp_path: Path, restore_flag: bool) -> None:
    whole = EvalStopCallback(EvalStop(2))
    make_trainer(tmp_path / "whole", [whole]).train()
    assert whole.stopped and whole.stop_step > 2 * EVERY

    # The same run, pre-empted one evaluation before the stop, then resumed in a new
    # Trainer with a new callback: without its restored state it would run on.
    cut = whole.stop_step - EVERY
    first = EvalStopCallback(EvalStop(2))
    make_trainer(tmp_path / "cut", [first, StopAt(cut)], save_total_limit=None).train()
    assert not first.stopped and first.history[-1]["step"] == cut

    again = EvalStopCallback(EvalStop(2))
    trainer = make_trainer(
        tmp_path / "cut",
        [again],
        save_total_limit=None,
        restore_callback_states_from_checkpoint=restore_flag,
    )
    trainer.train(resume_from_checkpoint=str(tmp_path / "cut" / f"checkpoint-{cut}"))
    live = next(c for c in trainer.callback_handler.callbacks if isinstance(c, EvalStopCallback))
    assert (live.stop_step, live.best_step) == (whole.stop_step, whole.best_step)
    assert live.decisions == whole.decisions
    assert [h["step"] for h in live.history] == [h["step"] for h in whole.history]
    np.testing.assert_allclose(
        [h["value"] for h in live.history], [h["value"] for h in whole.history], rtol=1e-5
    )
    assert live.delivered_checkpoint is not None

    # Resumed from the checkpoint of its stop, the run stays stopped (after one step).
    after = EvalStopCallback(EvalStop(2))
    trainer = make_trainer(tmp_path / "whole", [after], max_steps=MAX_STEPS)
    trainer.train(resume_from_checkpoint=str(tmp_path / "whole" / f"checkpoint-{whole.stop_step}"))
    assert trainer.state.global_step <= whole.stop_step + 1
    assert after.decisions == whole.decisions


def test_it_counts_the_runs_evaluations() -> None:
    from evalstop_integrations.transformers import _count_evals

    class State:
        max_steps, eval_steps, num_train_epochs = 100, 30, 3

    args = TrainingArguments("unused", eval_strategy="steps", eval_steps=30, report_to=[])
    assert _count_evals(args, State) == 4  # steps 30, 60, 90 and the final step 100
    State.eval_steps = 25
    assert _count_evals(args, State) == 4
    args = TrainingArguments("unused", eval_strategy="epoch", report_to=[])
    assert _count_evals(args, State) == 3
    args = TrainingArguments("unused", eval_strategy="no", report_to=[])
    with pytest.raises(ConfigError, match="eval_strategy"):
        _count_evals(args, State)


def test_bad_arguments_fail_at_construction() -> None:
    with pytest.raises(ConfigError, match="n_checkpoints=0"):
        EvalStopCallback(n_checkpoints=0)
    with pytest.raises(ConfigError, match="metric"):
        EvalStopCallback(metric="")
    with pytest.raises(ConfigError, match="policy"):
        EvalStopCallback(policy=object())
    with pytest.raises(ConfigError, match="greater_is_better"):
        EvalStopCallback(greater_is_better="yes")


def test_the_direction_follows_the_metric_name() -> None:
    assert EvalStopCallback(metric="eval_loss").greater_is_better is False
    assert EvalStopCallback(metric="eval_rewards/accuracies").greater_is_better is True
    assert EvalStopCallback(metric="eval_loss", greater_is_better=True).greater_is_better


def test_the_state_is_json_and_rebuilds_the_callback() -> None:
    stop = EvalStopCallback(EvalStop(3), metric="eval_loss", n_checkpoints=10)
    for step, value in enumerate([3.0, 2.0, 2.5], start=1):
        stop.stopper.observe(value, step=step)
    saved = json.loads(json.dumps(stop.state()))
    rebuilt = EvalStopCallback.from_state(saved)
    assert rebuilt.policy is stop.policy and rebuilt.n_checkpoints == 10
    assert rebuilt._restored["stopper"] == stop.stopper.state_dict()
    assert saved["attributes"]["_restored"]["history"] == []


def test_without_the_pin_save_total_limit_deletes_what_it_would_deliver(tmp_path: Path) -> None:
    stop = EvalStopCallback(EvalStop(2), pin=False)
    make_trainer(tmp_path, [stop]).train()
    assert stop.stopped and stop.best_step < stop.stop_step
    assert stop.delivered_checkpoint is None
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"checkpoint-{stop.stop_step}"]


def test_importing_the_package_imports_no_tool() -> None:
    import subprocess
    import sys

    code = (
        "import sys, evalstop_integrations; "
        "print(sorted(m for m in ('transformers', 'optuna', 'ray', 'torch') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_readme_callback_snippet_runs(tmp_path: Path, monkeypatch) -> None:
    from readme_snippets import snippet

    # The README's code, run as written, on this file's tiny model and data.
    monkeypatch.chdir(tmp_path)
    namespace = {
        "__name__": "readme_snippet_live_callback",
        "model": tiny_gpt2(),
        "train_ds": counting(8, 0.5, seed=1),
        "eval_ds": counting(64, 0.0, seed=2),
    }
    exec(compile(snippet("live-callback"), "README.md:live-callback", "exec"), namespace)
    stop, trainer = namespace["stop"], namespace["trainer"]
    assert stop.stopped and stop.stop_step == trainer.state.global_step
    assert Path(stop.delivered_checkpoint, "trainer_state.json").is_file()


@pytest.mark.parametrize(
    "make_policy",
    [lambda: LossPlateau(window=2, tolerance=0.05), lambda: Cusum()],
    ids=["LossPlateau", "Cusum"],
)
def test_any_package_stopper_decides_as_the_online_stopper(make_policy, tmp_path: Path) -> None:
    # The Trainer's events without a Trainer: a loss that plateaus, an eval that peaks.

    from transformers import TrainerControl

    evals = [0.30, 0.45, 0.60, 0.70, 0.72, 0.65, 0.55, 0.50, 0.40, 0.35]
    losses = [1.0, 0.8, 0.7, 0.69, 0.68, 0.68, 0.68, 0.67, 0.67, 0.67]
    args = TrainingArguments(str(tmp_path), eval_strategy="steps", eval_steps=10, report_to=[])
    state = bare_state(0)
    stop = EvalStopCallback(make_policy(), metric="eval_reward")
    control = TrainerControl()
    stop.on_train_begin(args, state, control)
    online = OnlineStopper(make_policy(), 10)
    for i, (value, loss) in enumerate(zip(evals, losses), start=1):
        state.global_step = 10 * i
        state.log_history.append({"loss": loss, "step": state.global_step})
        stop.on_evaluate(args, state, control, metrics={"eval_reward": value})
        expected = online.observe(value, loss=loss, step=state.global_step)
        assert control.should_training_stop == expected
        if expected:
            break
    assert stop.stopped and stop.decisions == online.decisions
    assert (stop.stop_step, stop.best_step) == (online.stop_step, online.best_step)


def test_a_metric_the_evaluations_lack_is_named_with_the_ones_they_have(tmp_path: Path) -> None:

    from transformers import TrainerControl

    args = TrainingArguments(str(tmp_path), eval_strategy="steps", eval_steps=10, report_to=[])
    state = bare_state(10)
    stop = EvalStopCallback(metric="eval_los")
    stop.on_train_begin(args, bare_state(0), TrainerControl())
    with pytest.warns(UserWarning, match=r"metrics \['epoch', 'eval_loss'\]; evaluations"):
        stop.on_evaluate(args, state, TrainerControl(), metrics={"eval_loss": 1.0, "epoch": 1.0})
    assert stop.decisions == []


def _begin(stop: EvalStopCallback, out: Path, state) -> None:
    from transformers import TrainerControl

    args = TrainingArguments(str(out), eval_strategy="steps", eval_steps=10, report_to=[])
    stop.on_train_begin(args, state, TrainerControl())


def test_a_fresh_run_never_deletes_an_earlier_runs_pins(tmp_path: Path) -> None:
    """A fresh run cleared ``evalstop-delivered/``: the only copy of the checkpoint an earlier
    run delivered (``save_total_limit`` had rotated the original away).  It now stops before
    its first step, naming the folder; a resumed run keeps adopting its own pins."""
    earlier = tmp_path / PIN_DIR / "checkpoint-20"
    earlier.mkdir(parents=True)
    (earlier / "model.safetensors").write_bytes(b"weights")
    with pytest.raises(ConfigError, match=r"output_dir=.* is not allowed: .*checkpoint-20"):
        _begin(EvalStopCallback(EvalStop(2)), tmp_path, bare_state(0))
    assert (earlier / "model.safetensors").read_bytes() == b"weights"
    _begin(EvalStopCallback(EvalStop(2)), tmp_path, bare_state(30))  # a resume: its pins
    _begin(EvalStopCallback(EvalStop(2), pin=False), tmp_path, bare_state(0))  # pins nothing
    (tmp_path / "empty" / PIN_DIR).mkdir(parents=True)
    _begin(EvalStopCallback(EvalStop(2)), tmp_path / "empty", bare_state(0))


@pytest.mark.parametrize("global_step", [0, 30])
def test_a_file_where_the_pins_go_is_refused_before_the_first_step(tmp_path, global_step) -> None:
    """It raised FileExistsError at the first save, in the middle of training."""
    (tmp_path / PIN_DIR).write_text("mine")
    with pytest.raises(ConfigError, match="a file that is not a folder"):
        _begin(EvalStopCallback(EvalStop(2)), tmp_path, bare_state(global_step))
    assert (tmp_path / PIN_DIR).read_text() == "mine"


def test_two_pinning_callbacks_of_one_run_are_refused(tmp_path: Path) -> None:
    """Two callbacks pinned into the same folders, and one deleted the checkpoint the
    other would deliver when its own best moved on."""
    state = bare_state(0)
    first = EvalStopCallback(EvalStop(2), metric="eval_clean_loss")
    _begin(first, tmp_path, state)
    with pytest.raises(ConfigError, match="one pinning callback per output_dir"):
        _begin(EvalStopCallback(EvalStop(2), metric="eval_train_loss"), tmp_path, state)
    _begin(EvalStopCallback(EvalStop(2), metric="eval_train_loss", pin=False), tmp_path, state)
    # Another run (its own state), e.g. after this one crashed without ending: no conflict.
    _begin(EvalStopCallback(EvalStop(2)), tmp_path, bare_state(0))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"policy": EvalStop}, "not its class"),
        ({"job_type": "bogus"}, "job_type='bogus'"),
        ({"scale": "bogus"}, "scale='bogus'"),
        ({"loss_key": []}, r"loss_key=\[\] is not allowed"),
        ({"n_checkpoints": 10**12}, r"an integer in \[1, 100000\]"),
    ],
)
def test_arguments_that_failed_only_once_training_began_fail_at_construction(kwargs, match) -> None:
    """A class, a bad job type or scale (with ``n_checkpoints=None``) failed when training
    began; ``loss_key=[]`` at the first evaluation, as a TypeError."""
    with pytest.raises(ConfigError, match=match):
        EvalStopCallback(**kwargs)


def _saved_callback_state(tmp_path: Path) -> dict:
    stop = EvalStopCallback(EvalStop(2))
    _begin(stop, tmp_path, bare_state(0))
    from transformers import TrainerControl

    for step, value in ((10, 1.0), (20, 0.8), (30, 0.9)):
        stop.on_evaluate(None, bare_state(step), TrainerControl(), metrics={"eval_loss": value})
    return json.loads(json.dumps(stop.state()))


@pytest.mark.parametrize(
    "damage",
    [
        lambda g: "garbage",
        lambda g: [5],
        lambda g: {**g, "attributes": []},
        lambda g: {**g, "attributes": {"_restored": "x"}},
        lambda g: {
            **g,
            "attributes": {"_restored": {**g["attributes"]["_restored"], "history": [1, 2]}},
        },
        lambda g: {**g, "attributes": {"_restored": {"history": []}}},
        lambda g: {
            **g,
            "attributes": {
                "_restored": {
                    **g["attributes"]["_restored"],
                    "stopper": {**g["attributes"]["_restored"]["stopper"], "decisions": [1, 2, 3]},
                }
            },
        },
    ],
)
def test_a_damaged_saved_state_is_refused_in_one_line_on_resume(damage, tmp_path) -> None:
    """It gave AttributeError, KeyError or TypeError tracebacks when training began."""
    state = bare_state(30)
    state.stateful_callbacks = {"EvalStopCallback": damage(_saved_callback_state(tmp_path))}
    with pytest.raises(
        ConfigError, match=r"stateful_callbacks\['EvalStopCallback'\]=.* is not allowed"
    ):
        _begin(EvalStopCallback(EvalStop(2)), tmp_path / "resumed", state)


def test_an_undamaged_saved_state_resumes(tmp_path) -> None:
    state = bare_state(30)
    state.stateful_callbacks = {"EvalStopCallback": _saved_callback_state(tmp_path)}
    stop = EvalStopCallback(EvalStop(2))
    _begin(stop, tmp_path / "resumed", state)
    assert [h["step"] for h in stop.history] == [10, 20, 30] and stop.best_step == 20


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(
            lambda: __import__("baselines").BayesStopper.for_task("hard-0.12"), id="Bayes"
        ),
        pytest.param(
            lambda: __import__("baselines.learned").learned.Learned.pretrained("hard"), id="Learned"
        ),
    ],
)
def test_a_stopper_of_fixed_k_decides_in_the_callback_as_the_online_stopper(make, tmp_path) -> None:
    """The construction check built a 2-checkpoint stopper, which Bayes (K = 20) refused and
    Learned could not be deep-copied into."""
    from transformers import TrainerControl

    values = [0.3 + 0.03 * i for i in range(12)] + [0.63 - 0.05 * i for i in range(1, 9)]
    stop = EvalStopCallback(make(), metric="eval_reward", n_checkpoints=20)
    _begin(stop, tmp_path, bare_state(0))
    online = OnlineStopper(make(), 20)
    for i, value in enumerate(values, start=1):
        control = TrainerControl()
        stop.on_evaluate(None, bare_state(10 * i), control, metrics={"eval_reward": value})
        assert control.should_training_stop == online.observe(value, step=10 * i)
        if control.should_training_stop:
            break
    assert stop.decisions == online.decisions


def test_a_checkpoint_saved_outside_output_dir_is_said_not_pinned(tmp_path) -> None:
    """Under ``Trainer.hyperparameter_search`` each trial saves into ``output_dir/run-N/``:
    the callback found no checkpoint to pin and said nothing."""
    import warnings

    from transformers import TrainerControl

    stop = EvalStopCallback(EvalStop(2))
    _begin(stop, tmp_path, bare_state(0))
    stop.on_evaluate(None, bare_state(10), TrainerControl(), metrics={"eval_loss": 1.0})
    (tmp_path / "run-0" / "checkpoint-10").mkdir(parents=True)  # where the search saves
    with pytest.warns(UserWarning, match="saved step 10's checkpoint outside .*nothing is pinned"):
        stop.on_save(None, bare_state(10), TrainerControl())
    assert not (tmp_path / PIN_DIR).exists()
    # Where the trainer saves into output_dir, it pins and says nothing.
    other = EvalStopCallback(EvalStop(2))
    _begin(other, tmp_path / "plain", bare_state(0))
    other.on_evaluate(None, bare_state(10), TrainerControl(), metrics={"eval_loss": 1.0})
    (tmp_path / "plain" / "checkpoint-10").mkdir(parents=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        other.on_save(None, bare_state(10), TrainerControl())
    assert (tmp_path / "plain" / PIN_DIR / "checkpoint-10").is_dir()
