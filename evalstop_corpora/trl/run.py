"""One TRL run: fit a proxy on gold-labelled pairs, then optimise the base LM against it with GRPO.

Why GRPO: it is TRL's main online trainer, it takes a plain Python reward function (the proxy
is not a transformers model) and needs no value model; its KL coefficient ``beta`` penalises
the per-token KL to the frozen base model inside the loss, which is the knob varied across
runs. (RLOO would serve equally; PPO needs a value head and a reward *model* checkpoint.)

At step 0 and every ``eval_every`` steps :class:`GoldEvalCallback` samples completions of
held-out prompts from the current policy and logs, through the trainer's own ``log`` (so they
land in ``log_history`` and ``trainer_state.json``):

- ``eval_gold``: mean gold reward on ``gold_batch`` completions (little noise),
- ``eval_reward``: mean gold reward on the first ``eval_batch`` of them, the noisy benchmark a
  stopper would see, and ``eval_reward_sd``, the sd of that score over the
  ``gold_batch / eval_batch`` disjoint repeats (the eval noise),
- ``eval_proxy``: mean proxy reward on the same completions,
- ``eval_kl``: Monte-Carlo KL(policy || base) in nats per completion on the same completions.

TRL itself logs ``loss``, ``reward``, ``rewards/proxy/mean``, ``kl`` (when ``beta > 0``) and
more at every step.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from evalstop_corpora import eval_callback
from evalstop_corpora.eval_callback import PeriodicEvalCallback, sequence_logprob
from evalstop_corpora.trl.world import (
    COMPLETION_WORDS,
    PROMPT_WORDS,
    SPECIALS,
    gold_reward,
    sample_chain,
    word_ids,
)
from evalstop_gym.corpus.format import CurveTrace
from evalstop_gym.corpus.loaders import load_trl_trainer_state

#: Keys of :func:`load_trl_trainer_state` that read a run's ``trainer_state.json``.
LOADER_KEYS: dict[str, Any] = {
    "eval_key": "eval_reward",
    "loss_key": "loss",
    "proxy_key": "eval_proxy",
    "kl_key": "eval_kl",
    "gold_key": "eval_gold",
    # The packaged corpus was built without the per-step signals (entropy, clip
    # ratio, ...): reading none keeps its regeneration byte for byte.
    "signal_keys": {},
}


@dataclass(frozen=True)
class TRLRunConfig:
    """Hyperparameters of one TRL run; equal configs give identical logs (one thread).

    Attributes:
        seed: Seed of the preference data, the proxy and the GRPO run.
        n_pairs: Gold-labelled preference pairs the proxy is fitted on.
        proxy_hidden: Hidden width of the proxy (0 = linear).
        beta: GRPO's KL coefficient to the base model.
        steps: GRPO optimisation steps.
        eval_every: Steps between gold evaluations (step 0 is always evaluated).
        lr: Policy learning rate (AdamW, constant).
        prompts_per_step: Prompts per GRPO step.
        num_generations: Completions per prompt (GRPO's group size).
        label_temperature: Bradley-Terry temperature of the gold labels (gold sds).
        proxy_epochs: AdamW steps of proxy training.
        proxy_lr: Proxy learning rate.
        proxy_weight_decay: Proxy weight decay.
        gold_batch: Held-out completions per gold evaluation.
        eval_batch: Completions of the noisy ``eval_reward`` score.
    """

    seed: int = 0
    n_pairs: int = 256
    proxy_hidden: int = 0
    beta: float = 0.0
    steps: int = 60
    eval_every: int = 4
    lr: float = 3e-4
    prompts_per_step: int = 8
    num_generations: int = 8
    label_temperature: float = 0.3
    proxy_epochs: int = 200
    proxy_lr: float = 1e-2
    proxy_weight_decay: float = 1e-3
    gold_batch: int = 512
    eval_batch: int = 32

    def __post_init__(self) -> None:
        """Reject configurations that cannot run, naming the field and what is allowed."""
        for name in ("n_pairs", "steps", "eval_every", "prompts_per_step", "eval_batch"):
            if getattr(self, name) < 1:
                raise ValueError(f"TRLRunConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.num_generations < 2:
            raise ValueError(
                f"TRLRunConfig.num_generations must be >= 2, got {self.num_generations}"
            )
        if self.gold_batch < self.eval_batch or self.gold_batch % self.eval_batch:
            raise ValueError(
                f"TRLRunConfig.gold_batch ({self.gold_batch}) must be a multiple of eval_batch "
                f"({self.eval_batch})"
            )
        if self.proxy_hidden < 0 or self.beta < 0 or self.lr <= 0:
            raise ValueError(
                f"TRLRunConfig: proxy_hidden ({self.proxy_hidden}) and beta ({self.beta}) must be "
                f">= 0 and lr ({self.lr}) > 0"
            )

    def run_id(self) -> str:
        """A readable identifier naming the swept hyperparameters and the seed."""
        return f"trl-n{self.n_pairs}-h{self.proxy_hidden}-b{self.beta:g}-lr{self.lr:g}-s{self.seed}"


def _prompt_ids(n: int, seed: int) -> np.ndarray:
    """``n`` prompts (token ids) drawn from the base chain."""
    return sample_chain(n, PROMPT_WORDS, seed) + len(SPECIALS)


def sample_completions(model: Any, prompt_ids: np.ndarray, seed: int) -> np.ndarray:
    """Sample one completion per prompt (token ids), isolated from the global random stream.

    Args:
        model: A causal LM.
        prompt_ids: ``(n, PROMPT_WORDS)`` token ids (all prompts have the same length: no padding).
        seed: Seed of the sampling.

    Returns:
        ``(n, COMPLETION_WORDS)`` token ids.
    """
    return eval_callback.sample_completions(
        model, prompt_ids, seed, COMPLETION_WORDS, SPECIALS.index("[PAD]")
    )


class GoldEvalCallback(PeriodicEvalCallback):
    """Scores the policy on held-out prompts at step 0 and every ``eval_every`` steps.

    The scores go through the trainer's own :meth:`log` (with the model in eval mode, so GRPO
    files them as an eval entry and leaves its training metrics alone), hence into
    ``state.log_history`` and ``trainer_state.json``. Sampling uses its own seed per step, so
    the evaluations never perturb the training's random stream.
    """

    def __init__(self, config: TRLRunConfig, reference: Any, proxy: Any) -> None:
        """Hold the run's settings, the frozen base model (KL reference) and the proxy."""
        self.config = config
        self.reference = reference
        self.proxy = proxy
        self.trainer: Any = None
        # Held-out prompts: a seed no training prompt uses.
        self.prompts = _prompt_ids(config.gold_batch, seed=config.seed * 7919 + 1)

    def bind(self, trainer: Any) -> None:
        """Attach the trainer whose ``log`` receives the scores."""
        self.trainer = trainer

    def scores(self, model: Any, step: int) -> dict[str, float]:
        """Gold, noisy eval, eval noise, proxy and KL of ``model`` on the held-out prompts."""
        import torch

        cfg = self.config
        completions = sample_completions(model, self.prompts, seed=cfg.seed * 100_003 + step)
        gold = gold_reward().score_ids(word_ids(completions))
        repeats = gold.reshape(-1, cfg.eval_batch).mean(axis=1)
        with torch.no_grad():
            proxy = self.proxy(torch.as_tensor(word_ids(completions)))
        kl = sequence_logprob(model, self.prompts, completions) - sequence_logprob(
            self.reference, self.prompts, completions
        )
        return {
            "eval_reward": float(repeats[0]),
            "eval_reward_sd": float(repeats.std(ddof=1)) if repeats.size > 1 else 0.0,
            "eval_gold": float(gold.mean()),
            "eval_proxy": float(proxy.mean()),
            # A Monte-Carlo KL estimate can dip below 0 by noise; KL itself cannot.
            "eval_kl": max(float(kl.mean()), 0.0),
        }


def _proxy_for(config: TRLRunConfig, base: Any) -> Any:
    """Preference pairs from the base model, gold labels, Bradley-Terry proxy."""
    from evalstop_corpora.trl.proxy import label_pairs, train_proxy

    prompts = _prompt_ids(config.n_pairs, seed=config.seed * 7919 + 2)
    a = word_ids(sample_completions(base, prompts, seed=config.seed * 7919 + 3))
    b = word_ids(sample_completions(base, prompts, seed=config.seed * 7919 + 4))
    winners, losers = label_pairs(a, b, config.label_temperature, seed=config.seed)
    reference_prompts = _prompt_ids(2048, seed=config.seed * 7919 + 5)
    reference = word_ids(sample_completions(base, reference_prompts, seed=config.seed * 7919 + 6))
    return train_proxy(
        winners,
        losers,
        hidden=config.proxy_hidden,
        epochs=config.proxy_epochs,
        lr=config.proxy_lr,
        weight_decay=config.proxy_weight_decay,
        seed=config.seed,
        reference=reference,
    )


def _grpo_args(config: TRLRunConfig, out_dir: Path) -> Any:
    from trl import GRPOConfig

    return GRPOConfig(
        output_dir=str(out_dir),
        max_steps=config.steps,
        learning_rate=config.lr,
        lr_scheduler_type="constant",
        warmup_steps=0,
        beta=config.beta,
        num_generations=config.num_generations,
        per_device_train_batch_size=config.prompts_per_step * config.num_generations,
        max_completion_length=COMPLETION_WORDS,
        temperature=1.0,
        # Every completion has exactly COMPLETION_WORDS words, as in the held-out evaluations.
        generation_kwargs={"min_new_tokens": COMPLETION_WORDS},
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        seed=config.seed,
        data_seed=config.seed,
        use_cpu=True,
        bf16=False,
        gradient_checkpointing=False,
        disable_tqdm=True,
        dataloader_num_workers=0,
    )


def run_trl(
    config: TRLRunConfig, base_dir: str | os.PathLike[str], out_dir: str | os.PathLike[str]
) -> CurveTrace:
    """Run one TRL experiment into ``out_dir`` and read its ``trainer_state.json`` back.

    Args:
        config: Hyperparameters and seed.
        base_dir: Folder of the shared tokenizer and base LM (:func:`~.world.build_base`).
        out_dir: The run's output folder (TRL writes ``trainer_state.json`` there).

    Returns:
        The trace read by :func:`load_trl_trainer_state` with :data:`LOADER_KEYS`, labelled on
        its gold curve, with the configuration in ``meta``.
    """
    import torch

    threads = torch.get_num_threads()
    # One intra-op thread: identical float reductions (hence samples) in every process.
    torch.set_num_threads(1)
    try:
        state_file = _train(config, Path(base_dir), Path(out_dir))
    finally:
        torch.set_num_threads(threads)
    return trace_of(state_file, config)


def trace_of(state_file: Path, config: TRLRunConfig) -> CurveTrace:
    """The trace of a finished run's ``trainer_state.json``, with the configuration in ``meta``.

    ``meta["eval_noise_sd"]`` is the median over checkpoints of ``eval_reward_sd``: the sd of
    the ``eval_batch``-sample eval score over repeated, disjoint gold evaluations.
    """
    trace = load_trl_trainer_state(state_file, run_id=config.run_id(), **LOADER_KEYS)
    history = json.loads(state_file.read_text(encoding="utf-8"))["log_history"]
    noise = [e["eval_reward_sd"] for e in history if "eval_reward_sd" in e]
    meta = {
        "source": "trl",
        "trainer": "GRPOTrainer",
        **dataclasses.asdict(config),
        "eval_noise_sd": float(np.median(noise)) if noise else None,
    }
    return dataclasses.replace(trace, meta=meta)


def _train(config: TRLRunConfig, base_dir: Path, out_dir: Path) -> Path:
    """Build proxy, trainer and callback; train; save and return ``trainer_state.json``."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, PrinterCallback
    from transformers.utils import logging as hf_logging
    from trl import GRPOTrainer

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    tokenizer = AutoTokenizer.from_pretrained(base_dir)
    reference = AutoModelForCausalLM.from_pretrained(base_dir).eval()
    proxy = _proxy_for(config, reference)

    def proxy_reward(completion_ids: list[list[int]], **_: Any) -> list[float]:
        ids = np.full((len(completion_ids), COMPLETION_WORDS), -1, dtype=np.int64)
        for r, row in enumerate(completion_ids):
            ids[r, : min(len(row), COMPLETION_WORDS)] = word_ids(row[:COMPLETION_WORDS])
        with torch.no_grad():
            return proxy(torch.as_tensor(ids)).tolist()

    proxy_reward.__name__ = "proxy"
    prompts = _prompt_ids(max(512, config.prompts_per_step * config.steps), seed=config.seed * 7919)
    dataset = Dataset.from_dict({"prompt": tokenizer.batch_decode(prompts)})
    callback = GoldEvalCallback(config, reference, proxy)
    trainer = GRPOTrainer(
        model=str(base_dir),
        reward_funcs=proxy_reward,
        args=_grpo_args(config, out_dir),
        train_dataset=dataset,
        processing_class=tokenizer,
        callbacks=[callback],
    )
    callback.bind(trainer)
    # Quiet workers: the log dicts go to trainer_state.json, not to the terminal.
    trainer.remove_callback(PrinterCallback)
    trainer.train()
    trainer.save_state()
    (out_dir / "run_config.json").write_text(
        json.dumps(dataclasses.asdict(config), indent=2) + "\n"
    )
    return out_dir / "trainer_state.json"
