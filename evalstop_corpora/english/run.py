"""One English RLHF run: the pre-trained policy optimised against a proxy by a TRL trainer.

Three trainers (:data:`TRAINERS`), each with its KL coefficient ``beta``:

- ``grpo``: ``trl.GRPOTrainer`` (group-relative advantages, per-token KL to the reference
  inside the loss),
- ``rloo``: ``trl.RLOOTrainer`` (leave-one-out baseline; KL folded into the reward),
- ``online_dpo``: ``trl.experimental.online_dpo.OnlineDPOTrainer`` (two samples per prompt,
  the proxy picks the preferred one, a DPO loss with ``beta`` against the reference).

The proxy (:mod:`.proxy`) is a plain reward function to all three, so the only difference is
the trainer. At step 0 and every ``eval_every`` steps :class:`GoldEvalCallback` samples
completions of held-out prompts (``gold_batch`` of them, a part of the prompt pool no training
or pair prompt uses) and logs through the trainer's own ``log`` (so the values land in
``log_history`` and ``trainer_state.json``):

- ``eval_gold``: mean gold (VADER compound, mean ratings) over the ``gold_batch`` completions,
  the run's noise-free curve up to ``eval_gold_se``, its standard error;
- ``eval_reward``: mean gold over the first ``eval_batch`` of them, the noisy benchmark a
  stopper would see, and ``eval_reward_sd``, the sd of that score (the per-completion sd
  measured on the ``gold_batch`` completions over ``sqrt(eval_batch)``: the eval noise);
- ``eval_proxy``: mean standardised proxy reward on the first :data:`EVAL_SIDE` completions;
- ``eval_kl``: Monte-Carlo KL(policy || reference) in nats per completion on those
  (clipped at 0);
- ``eval_distinct``: distinct tokens over all tokens of the completions (collapse shows here);
- ``eval_vader_plain``: VADER's plain compound (repeated words counted every time), beside
  the gold, which counts a word once.

Each trainer also logs its own per-step keys (reward and its std, KL, entropy, completion
length, clip ratio, ...), which stay in ``trainer_state.json``.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from evalstop_corpora.english.proxy import (
    COMPLETION_TOKENS,
    PROMPT_TOKENS,
    PROXY_VARIANTS,
    Proxy,
    prompt_pool,
    sample_completions,
)
from evalstop_corpora.eval_callback import PeriodicEvalCallback, sequence_logprob

#: The trainers a run can use and their TRL classes.
TRAINERS: dict[str, str] = {
    "grpo": "GRPOTrainer",
    "rloo": "RLOOTrainer",
    "online_dpo": "OnlineDPOTrainer",
}
#: Completions of each evaluation on which the proxy reward and the KL are measured.
EVAL_SIDE = 64
#: Completions of each evaluation kept in the run's :data:`SAMPLES_FILE`, to read.
SAMPLES_KEPT = 8
#: File of a run folder with a few evaluation completions per checkpoint (JSON lines).
SAMPLES_FILE = "samples.jsonl"
#: The file a finished run writes last, beside TRL's ``trainer_state.json``.
RUN_CONFIG_FILE = "run_config.json"


@dataclass(frozen=True)
class EnglishRunConfig:
    """Hyperparameters of one English run; equal configs give identical logs (one thread).

    Attributes:
        trainer: One of :data:`TRAINERS`.
        beta: The trainer's KL coefficient (DPO's ``beta`` for online DPO).
        proxy: One of :data:`~.proxy.PROXY_VARIANTS`.
        seed: Seed of the RL run (sampling, prompt order) and of the evaluations.
        steps: Optimisation steps.
        eval_every: Steps between gold evaluations (step 0 is always evaluated).
        lr: Policy learning rate (AdamW, constant).
        prompts_per_step: Prompts per step.
        num_generations: Completions per prompt (GRPO and RLOO; online DPO always draws 2).
        gold_batch: Held-out completions per gold evaluation.
        eval_batch: Completions of the noisy ``eval_reward`` score.
    """

    trainer: str = "grpo"
    beta: float = 0.0
    proxy: str = "mean400"
    seed: int = 0
    steps: int = 40
    eval_every: int = 2
    lr: float = 1e-3
    prompts_per_step: int = 4
    num_generations: int = 8
    gold_batch: int = 128
    eval_batch: int = 32

    def __post_init__(self) -> None:
        """Reject configurations that cannot run, naming the field and what is allowed."""
        if self.trainer not in TRAINERS:
            raise ValueError(
                f"EnglishRunConfig.trainer must be one of {sorted(TRAINERS)}, got {self.trainer!r}"
            )
        if self.proxy not in PROXY_VARIANTS:
            raise ValueError(
                f"EnglishRunConfig.proxy must be one of {sorted(PROXY_VARIANTS)}, got {self.proxy!r}"
            )
        for name in ("steps", "eval_every", "prompts_per_step", "eval_batch"):
            if getattr(self, name) < 1:
                raise ValueError(f"EnglishRunConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.num_generations < 2:
            raise ValueError(
                f"EnglishRunConfig.num_generations must be >= 2, got {self.num_generations}"
            )
        if self.gold_batch < self.eval_batch or self.gold_batch % self.eval_batch:
            raise ValueError(
                f"EnglishRunConfig.gold_batch ({self.gold_batch}) must be a multiple of eval_batch "
                f"({self.eval_batch})"
            )
        if self.beta < 0 or self.lr <= 0:
            raise ValueError(
                f"EnglishRunConfig: beta ({self.beta}) must be >= 0 and lr ({self.lr}) > 0"
            )

    def run_id(self) -> str:
        """A readable identifier naming the swept hyperparameters and the seed."""
        # Shorter (quick) runs are named apart: a quick and a full run never share an id.
        length = "" if self.steps == EnglishRunConfig.steps else f"-t{self.steps}"
        return f"en-{self.trainer}-{self.proxy}-b{self.beta:g}-lr{self.lr:g}{length}-s{self.seed}"


class GoldEvalCallback(PeriodicEvalCallback):
    """Scores the policy on held-out prompts at step 0 and every ``eval_every`` steps.

    The scores go through the trainer's own :meth:`log` with the model in eval mode (GRPO and
    RLOO then file them as an eval entry and leave their training metrics alone), hence into
    ``state.log_history`` and ``trainer_state.json``. Sampling uses its own seed per step
    inside a forked random state, so the evaluations never perturb the training's stream.
    """

    def __init__(
        self, config: EnglishRunConfig, reference: Any, proxy: Proxy, tokenizer: Any
    ) -> None:
        """Hold the run's settings, the frozen reference model, the proxy and the tokenizer."""
        self.config = config
        self.reference = reference
        self.proxy = proxy
        self.tokenizer = tokenizer
        self.trainer: Any = None
        self.samples: Path | None = None
        pool = prompt_pool(tokenizer, PROMPT_TOKENS, "eval")
        pick = np.random.default_rng(config.seed * 7919 + 1).choice(
            len(pool), size=config.gold_batch, replace=len(pool) < config.gold_batch
        )
        self.prompts = pool[pick]

    def bind(self, trainer: Any) -> None:
        """Attach the trainer whose ``log`` receives the scores."""
        self.trainer = trainer

    def scores(self, model: Any, step: int) -> dict[str, float]:
        """Gold, noisy eval, eval noise, proxy, KL and diversity of ``model`` on held-out prompts."""
        from evalstop_corpora.english.gold import gold_scores

        cfg = self.config
        completions = sample_completions(
            model, self.prompts, cfg.seed * 100_003 + step, self.tokenizer.pad_token_id
        )
        texts = self.tokenizer.batch_decode(completions)
        gold = gold_scores(texts)
        plain = gold_scores(texts, repeats=True)
        if self.samples is not None:
            with open(self.samples, "a", encoding="utf-8") as fh:
                fh.write(json.dumps({"step": step, "completions": texts[:SAMPLES_KEPT]}) + "\n")
        sd = float(gold.std(ddof=1))
        # KL and proxy on the first eval_side completions: they cost two and one forward
        # passes a completion, the gold almost nothing.
        side = slice(0, min(cfg.gold_batch, EVAL_SIDE))
        prompts, some = self.prompts[side], completions[side]
        kl = sequence_logprob(model, prompts, some) - sequence_logprob(
            self.reference, prompts, some
        )
        return {
            "eval_reward": float(gold[: cfg.eval_batch].mean()),
            "eval_reward_sd": sd / float(np.sqrt(cfg.eval_batch)),
            "eval_gold": float(gold.mean()),
            "eval_gold_se": sd / float(np.sqrt(gold.size)),
            "eval_proxy": float(self.proxy(prompts, some).mean()),
            # A Monte-Carlo KL estimate can dip below 0 by noise; KL itself cannot.
            "eval_kl": max(float(kl.mean()), 0.0),
            "eval_distinct": float(np.unique(completions).size / completions.size),
            "eval_vader_plain": float(plain.mean()),
        }


def _common_args(config: EnglishRunConfig, out_dir: Path) -> dict[str, Any]:
    return {
        "output_dir": str(out_dir),
        "max_steps": config.steps,
        "learning_rate": config.lr,
        "lr_scheduler_type": "constant",
        "warmup_steps": 0,
        "temperature": 1.0,
        # Every completion has exactly COMPLETION_TOKENS tokens, as in the held-out evaluations.
        "generation_kwargs": {"min_new_tokens": COMPLETION_TOKENS, "top_k": 0, "top_p": 1.0},
        "logging_steps": 1,
        "save_strategy": "no",
        "report_to": "none",
        "seed": config.seed,
        "data_seed": config.seed,
        "use_cpu": True,
        "bf16": False,
        # TRL's online trainers default to True; off, a step costs one forward pass less.
        "gradient_checkpointing": False,
        "disable_tqdm": True,
        "dataloader_num_workers": 0,
    }


def _trainer(
    config: EnglishRunConfig,
    policy_dir: Path,
    out_dir: Path,
    reward: Any,
    dataset: Any,
    tokenizer: Any,
    callback: Any,
) -> Any:
    """The configured TRL trainer of ``config.trainer``."""
    common = _common_args(config, out_dir)
    if config.trainer == "online_dpo":
        from trl.experimental.online_dpo import OnlineDPOConfig, OnlineDPOTrainer

        trainer: Any = OnlineDPOTrainer
        args = OnlineDPOConfig(
            **common,
            beta=[config.beta],
            max_new_tokens=COMPLETION_TOKENS,
            max_length=PROMPT_TOKENS + COMPLETION_TOKENS,
            per_device_train_batch_size=config.prompts_per_step * config.num_generations // 2,
        )
    else:
        if config.trainer == "rloo":
            from trl import RLOOConfig as Config
            from trl import RLOOTrainer as trainer
        else:
            from trl import GRPOConfig as Config
            from trl import GRPOTrainer as trainer
        args = Config(
            **common,
            beta=config.beta,
            num_generations=config.num_generations,
            per_device_train_batch_size=config.prompts_per_step * config.num_generations,
            max_completion_length=COMPLETION_TOKENS,
        )
    return trainer(
        model=str(policy_dir),
        reward_funcs=reward,
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        callbacks=[callback],
    )


def run_english(
    config: EnglishRunConfig,
    policy_dir: str | os.PathLike[str],
    proxy_dir: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
) -> Path:
    """Run one experiment into ``out_dir``; return its ``trainer_state.json``.

    Torch runs with one intra-op thread (identical float reductions, hence identical samples,
    in every process); the previous thread count is restored afterwards.
    """
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _train(config, Path(policy_dir), Path(proxy_dir), Path(out_dir))
    finally:
        torch.set_num_threads(threads)


def _train(config: EnglishRunConfig, policy_dir: Path, proxy_dir: Path, out_dir: Path) -> Path:
    """Build proxy, trainer and callback; train; save and return ``trainer_state.json``."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, PrinterCallback
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    tokenizer = AutoTokenizer.from_pretrained(policy_dir)
    reference = AutoModelForCausalLM.from_pretrained(policy_dir).eval()
    proxy = Proxy(proxy_dir)
    pad = tokenizer.pad_token_id

    def proxy_reward(prompts: list[str], completion_ids: list[list[int]], **_: Any) -> list[float]:
        p = np.asarray(tokenizer(list(prompts))["input_ids"], dtype=np.int64)
        c = np.full((len(completion_ids), COMPLETION_TOKENS), pad, dtype=np.int64)
        for r, row in enumerate(completion_ids):
            row = list(row)[:COMPLETION_TOKENS]
            c[r, : len(row)] = row
        return proxy(p, c).tolist()

    proxy_reward.__name__ = "proxy"
    pool = prompt_pool(tokenizer, PROMPT_TOKENS, "train")
    order = np.random.default_rng(config.seed * 7919).permutation(len(pool))
    # Online DPO draws 2 completions a prompt: as many prompts as completions / 2 per step.
    per_step = (
        config.prompts_per_step * config.num_generations // 2
        if config.trainer == "online_dpo"
        else config.prompts_per_step
    )
    n_prompts = per_step * config.steps
    picks = order[np.arange(n_prompts) % len(pool)]
    dataset = Dataset.from_dict({"prompt": tokenizer.batch_decode(pool[picks])})
    callback = GoldEvalCallback(config, reference, proxy, tokenizer)
    out_dir.mkdir(parents=True, exist_ok=True)
    callback.samples = out_dir / SAMPLES_FILE
    callback.samples.unlink(missing_ok=True)
    torch.manual_seed(config.seed)
    trainer = _trainer(config, policy_dir, out_dir, proxy_reward, dataset, tokenizer, callback)
    callback.bind(trainer)
    # Quiet workers: the log dicts go to trainer_state.json, not to the terminal.
    trainer.remove_callback(PrinterCallback)
    trainer.train()
    trainer.save_state()
    (out_dir / RUN_CONFIG_FILE).write_text(
        json.dumps(dataclasses.asdict(config), indent=2) + "\n", encoding="utf-8"
    )
    return out_dir / "trainer_state.json"


__all__ = [
    "RUN_CONFIG_FILE",
    "TRAINERS",
    "EnglishRunConfig",
    "GoldEvalCallback",
    "run_english",
    "sequence_logprob",
]
