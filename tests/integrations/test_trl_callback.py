"""EvalStopCallback stops a real (tiny, local) TRL DPOTrainer run.

The planted decline: preference pairs over a counting rule (after ``w3 w4`` the chosen
word is ``w5``), with 40 % of the training pairs flipped.  The clean held-out DPO loss
first falls, then rises as the policy fits the flipped pairs.  The tokenizer and the
one-layer GPT-2 are built here; nothing is downloaded.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")
datasets = pytest.importorskip("datasets")

import transformers  # noqa: E402
from tokenizers import Tokenizer, models, pre_tokenizers  # noqa: E402
from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast  # noqa: E402
from trl import DPOConfig, DPOTrainer  # noqa: E402

from baselines import EvalStop  # noqa: E402
from baselines.online import OnlineStopper  # noqa: E402
from evalstop_integrations.transformers import EvalStopCallback  # noqa: E402

WORDS = [f"w{i}" for i in range(12)]
SPECIALS = ["[PAD]", "[UNK]", "[EOS]"]
MAX_STEPS = 60


def tokenizer() -> PreTrainedTokenizerFast:
    vocab = {w: i for i, w in enumerate(SPECIALS + WORDS)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]", eos_token="[EOS]"
    )


def pairs(n: int, flip: float, seed: int):
    rng = np.random.default_rng(seed)
    v, rows = len(WORDS), []
    for _ in range(n):
        a = int(rng.integers(v))
        good = (a + 1) % v
        bad = int((good + rng.integers(1, v)) % v)
        chosen, rejected = (bad, good) if rng.random() < flip else (good, bad)
        rows.append(
            {"prompt": f"w{(a - 1) % v} w{a}", "chosen": f" w{chosen}", "rejected": f" w{rejected}"}
        )
    return datasets.Dataset.from_list(rows)


def test_it_stops_a_dpo_run_that_fits_flipped_labels(tmp_path: Path) -> None:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    transformers.logging.set_verbosity_error()
    try:
        torch.manual_seed(0)
        config = GPT2Config(
            vocab_size=len(SPECIALS) + len(WORDS),
            n_positions=16,
            n_embd=32,
            n_layer=1,
            n_head=2,
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
            pad_token_id=0,
            eos_token_id=2,
            bos_token_id=2,
        )
        model = GPT2LMHeadModel(config)
        args = DPOConfig(
            str(tmp_path),
            max_steps=MAX_STEPS,
            eval_strategy="steps",
            eval_steps=5,
            save_strategy="steps",
            save_steps=5,
            save_total_limit=1,
            learning_rate=3e-3,
            lr_scheduler_type="constant",
            beta=0.5,
            per_device_train_batch_size=8,
            per_device_eval_batch_size=64,
            max_length=16,
            gradient_checkpointing=False,
            logging_steps=5,
            report_to=[],
            seed=0,
            use_cpu=True,
            disable_tqdm=True,
        )
        stop = EvalStopCallback(EvalStop(2), metric="eval_loss")
        trainer = DPOTrainer(
            model=model,
            ref_model=copy.deepcopy(model),
            args=args,
            train_dataset=pairs(16, 0.4, seed=1),
            eval_dataset=pairs(64, 0.0, seed=2),
            processing_class=tokenizer(),
            callbacks=[stop],
        )
        trainer.train()
    finally:
        torch.set_num_threads(threads)

    losses = [e["eval_loss"] for e in trainer.state.log_history if "eval_loss" in e]
    assert min(losses) < losses[0]  # it learned first ...
    assert stop.stopped and stop.stop_step == trainer.state.global_step < MAX_STEPS  # ... then not
    assert stop.n_checkpoints == MAX_STEPS // 5

    # The replay of the run's own log, read by the package's loader, decides the same.
    from evalstop_experiments.replay import read_runs

    trace = read_runs(
        tmp_path / f"checkpoint-{stop.stop_step}", metric="eval_loss", greater_is_better=False
    )[0]
    replayed = OnlineStopper(EvalStop(2), stop.n_checkpoints)  # the loader negated the loss
    for step, value, loss in zip(trace.step, trace.eval, trace.loss):
        if replayed.observe(float(value), loss=float(loss), step=int(step)):
            break
    assert (replayed.stop_step, replayed.best_step) == (stop.stop_step, stop.best_step)

    assert not (tmp_path / f"checkpoint-{stop.best_step}").exists()  # rotated away ...
    saved = json.loads(Path(stop.delivered_checkpoint, "trainer_state.json").read_text())
    assert saved["global_step"] == stop.best_step  # ... but pinned
