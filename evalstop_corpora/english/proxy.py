"""The proxy reward models: GPT-2 classifiers trained by TRL's ``RewardTrainer`` on gold-labelled pairs.

As in Gao et al. (2022), both sides of every preference pair are completions the *pre-trained*
policy wrote for the same held-out prompt; the raters' lexicon says which one wins (VADER's
compound of each text as written, :mod:`.gold`: on the pre-trained policy's samples, which
seldom repeat a word, this is the gold) and pairs it cannot tell apart (equal scores) are
dropped. A reward model
(``GPT2ForSequenceClassification`` on the policy's tokenizer) is fitted to them by
``RewardTrainer``'s Bradley-Terry loss. The variants (:data:`PROXY_VARIANTS`) are the knobs of
the Goodhart gap:

- ``mean400``: 400 pairs labelled by the mean of the ten human ratings, the reward model
  initialised from the pre-trained policy (all its layers);
- ``mean100``: the same with 100 pairs;
- ``small400``: 400 pairs, a one-layer reward model (the policy's first layer);
- ``rater400``: 400 pairs labelled by one rater's own ratings (:data:`ONE_RATER`, the rater
  who agrees least with the mean), so the proxy learns one person's taste.

Each variant is trained once per corpus (``<cache>/proxy-<name>-<hash>/``) and shared by every
run that uses it. Its scores are standardised (mean 0, sd 1 on fresh pre-trained-policy
completions), so a KL coefficient means the same against every proxy.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

#: The rater whose own ratings label the ``rater400`` variant (lowest correlation with the mean).
ONE_RATER = 8
#: Tokens of every prompt and of every completion (no padding anywhere: see :mod:`.text`).
PROMPT_TOKENS = 8
COMPLETION_TOKENS = 12
#: File in a proxy folder that records its recipe, standardisation and pair statistics.
PROXY_STAMP = "proxy_recipe.json"


@dataclass(frozen=True)
class ProxyRecipe:
    """One proxy reward model: its pairs, labels, size and training.

    Attributes:
        n_pairs: Gold-labelled preference pairs.
        n_layer: Layers of the reward model (taken from the pre-trained policy; fewer = smaller).
        rater: ``None``: labels from the mean rating; ``j``: from rater ``j``'s ratings.
        epochs: Passes of ``RewardTrainer`` over the pairs.
        lr: Learning rate.
        batch: Pairs per step.
        seed: Seed of the pairs' sampling and of the training.
    """

    n_pairs: int = 400
    n_layer: int = 4
    rater: int | None = None
    epochs: int = 3
    lr: float = 5e-4
    batch: int = 16
    seed: int = 0

    def digest(self) -> str:
        """First 12 hex digits of the SHA-256 of the recipe."""
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:12]


#: The named proxy variants a run can use (see module docstring).
PROXY_VARIANTS: dict[str, ProxyRecipe] = {
    "mean400": ProxyRecipe(),
    "mean100": ProxyRecipe(n_pairs=100, epochs=6),
    "small400": ProxyRecipe(n_layer=1),
    "rater400": ProxyRecipe(rater=ONE_RATER),
}


def sample_completions(model: Any, prompt_ids: np.ndarray, seed: int, pad_id: int) -> np.ndarray:
    """One ``COMPLETION_TOKENS``-token completion per prompt, outside the global random stream."""
    from evalstop_corpora.eval_callback import sample_completions as sample

    return sample(model, prompt_ids, seed, COMPLETION_TOKENS, pad_id)


class Proxy:
    """A trained reward model as a scorer of (prompt, completion) token ids, standardised."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        """Load the reward model and its standardisation from a proxy folder."""
        from transformers import AutoModelForSequenceClassification

        self.folder = Path(folder)
        record = json.loads((self.folder / PROXY_STAMP).read_text(encoding="utf-8"))
        self.offset, self.scale = float(record["offset"]), float(record["scale"])
        self.model = AutoModelForSequenceClassification.from_pretrained(self.folder).eval()
        self.model.requires_grad_(False)

    def raw(self, prompt_ids: np.ndarray, completion_ids: np.ndarray) -> np.ndarray:
        """Unstandardised reward of each ``prompt + completion`` (equal lengths: no padding)."""
        import torch

        full = torch.as_tensor(np.concatenate([prompt_ids, completion_ids], axis=1))
        with torch.no_grad():
            return self.model(input_ids=full).logits[:, 0].double().numpy()

    def __call__(self, prompt_ids: np.ndarray, completion_ids: np.ndarray) -> np.ndarray:
        """Standardised reward of each ``prompt + completion``."""
        return (self.raw(prompt_ids, completion_ids) - self.offset) / self.scale


def preference_pairs(
    policy: Any, tokenizer: Any, recipe: ProxyRecipe
) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, float]]:
    """``(prompts, chosen, rejected, stats)``: ``recipe.n_pairs`` gold-ordered, untied pairs."""
    from evalstop_corpora.english.gold import gold_scores

    pool = prompt_pool(tokenizer, PROMPT_TOKENS, "pairs")
    rng = np.random.default_rng(recipe.seed)
    prompts_out, chosen, rejected = [], [], []
    drawn = 0
    for round_ in range(20):
        prompts = pool[
            rng.choice(len(pool), size=2 * recipe.n_pairs, replace=len(pool) < 2 * recipe.n_pairs)
        ]
        a = sample_completions(
            policy, prompts, recipe.seed * 1009 + 2 * round_, tokenizer.pad_token_id
        )
        b = sample_completions(
            policy, prompts, recipe.seed * 1009 + 2 * round_ + 1, tokenizer.pad_token_id
        )
        # Labelled as the raters' lexicon scores the texts as written (VADER's plain compound);
        # the pre-trained policy seldom repeats a word, and then it agrees with the gold.
        ga = gold_scores(tokenizer.batch_decode(a), recipe.rater, repeats=True)
        gb = gold_scores(tokenizer.batch_decode(b), recipe.rater, repeats=True)
        drawn += len(prompts)
        for i in np.flatnonzero(np.abs(ga - gb) > 1e-9):
            win_a = ga[i] > gb[i]
            prompts_out.append(prompts[i])
            chosen.append(a[i] if win_a else b[i])
            rejected.append(b[i] if win_a else a[i])
        if len(chosen) >= recipe.n_pairs:
            break
    n = recipe.n_pairs
    if len(chosen) < n:
        raise RuntimeError(f"only {len(chosen)} untied pairs in {drawn} draws; wanted {n}")
    stats = {"pairs_drawn": drawn, "untied_share": len(chosen) / drawn}
    return np.array(prompts_out[:n]), np.array(chosen[:n]), np.array(rejected[:n]), stats


def build_proxy(
    cache: str | os.PathLike[str], policy_dir: str | os.PathLike[str], name: str
) -> Path:
    """Train (or reuse) the proxy variant ``name`` of :data:`PROXY_VARIANTS` under ``cache``.

    Returns:
        The proxy folder (a ``save_pretrained`` sequence classifier plus :data:`PROXY_STAMP`).
    """
    import time

    import torch
    from datasets import Dataset
    from transformers import (
        AutoModelForCausalLM,
        AutoModelForSequenceClassification,
        AutoTokenizer,
        PrinterCallback,
    )
    from transformers.utils import logging as hf_logging
    from trl import RewardConfig, RewardTrainer

    if name not in PROXY_VARIANTS:
        raise ValueError(f"proxy must be one of {sorted(PROXY_VARIANTS)}, got {name!r}")
    recipe = PROXY_VARIANTS[name]
    policy_dir = Path(policy_dir)
    folder = Path(cache) / f"proxy-{name}-{recipe.digest()}-{policy_dir.name}"
    stamp = folder / PROXY_STAMP
    if stamp.exists() and json.loads(stamp.read_text())["recipe"] == asdict(recipe):
        return folder
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    started = time.process_time()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        tokenizer = AutoTokenizer.from_pretrained(policy_dir)
        policy = AutoModelForCausalLM.from_pretrained(policy_dir).eval()
        prompts, chosen, rejected, stats = preference_pairs(policy, tokenizer, recipe)
        dataset = Dataset.from_dict(
            {
                "chosen_ids": np.concatenate([prompts, chosen], axis=1).tolist(),
                "rejected_ids": np.concatenate([prompts, rejected], axis=1).tolist(),
            }
        )
        torch.manual_seed(recipe.seed)
        model = AutoModelForSequenceClassification.from_pretrained(
            policy_dir, num_labels=1, n_layer=recipe.n_layer
        )
        model.config.pad_token_id = tokenizer.pad_token_id
        args = RewardConfig(
            output_dir=str(tmp),
            num_train_epochs=recipe.epochs,
            per_device_train_batch_size=recipe.batch,
            learning_rate=recipe.lr,
            lr_scheduler_type="linear",
            logging_steps=5,
            save_strategy="no",
            report_to="none",
            seed=recipe.seed,
            data_seed=recipe.seed,
            use_cpu=True,
            bf16=False,
            disable_tqdm=True,
            dataloader_num_workers=0,
            max_length=None,
        )
        trainer = RewardTrainer(
            model=model, args=args, train_dataset=dataset, processing_class=tokenizer
        )
        trainer.remove_callback(PrinterCallback)
        trainer.train()
        model = trainer.model.eval()
        tmp.mkdir(parents=True, exist_ok=True)
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        trainer.save_state()
        # Standardise on fresh completions of the pre-trained policy (eval prompts: unseen).
        ref_prompts = prompt_pool(tokenizer, PROMPT_TOKENS, "eval")[:512]
        ref = sample_completions(
            policy, ref_prompts, recipe.seed * 1009 + 999, tokenizer.pad_token_id
        )
        with torch.no_grad():
            scores = model(input_ids=torch.as_tensor(np.concatenate([ref_prompts, ref], 1)))
        scores = scores.logits[:, 0].double().numpy()
        from evalstop_corpora.english.gold import gold_scores

        gold = gold_scores(tokenizer.batch_decode(ref))
        record = {
            "recipe": asdict(recipe),
            "name": name,
            "offset": float(scores.mean()),
            "scale": float(scores.std()) + 1e-8,
            "gold_correlation": float(np.corrcoef(scores, gold)[0, 1]),
            "parameters": sum(p.numel() for p in model.parameters()),
            "cpu_seconds": time.process_time() - started,
            **stats,
        }
    finally:
        torch.set_num_threads(threads)
    (tmp / PROXY_STAMP).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    shutil.rmtree(folder, ignore_errors=True)
    tmp.rename(folder)
    return folder


#: File in a policy folder caching its prompt pools (computing them takes a CPU-minute).
PROMPTS_FILE = "prompts.npz"


def prompt_pool(tokenizer: Any, length: int, part: str) -> np.ndarray:
    """:func:`evalstop_corpora.english.text.prompt_pool`, cached in memory and in the folder.

    The pools are a function of the tokenizer alone; the first call on a policy folder writes
    them to its :data:`PROMPTS_FILE` and every later process reads that file.
    """
    from evalstop_corpora.english.text import PROMPT_PARTS
    from evalstop_corpora.english.text import prompt_pool as pool

    folder = Path(tokenizer.name_or_path)
    key = (str(folder), length, part)
    if key not in _POOLS:
        cache = folder / PROMPTS_FILE
        name = f"{part}_{length}"
        if cache.exists():
            with np.load(cache) as data:
                stored = {k: data[k] for k in data.files}
        else:
            stored = {}
        if name not in stored:
            stored.update({f"{p}_{length}": pool(tokenizer, length, p) for p in PROMPT_PARTS})
            if folder.is_dir():
                tmp = folder / f".{PROMPTS_FILE}.{os.getpid()}.npz"
                np.savez(tmp, **stored)
                os.replace(tmp, cache)
        _POOLS[key] = stored[name]
    return _POOLS[key]


_POOLS: dict[tuple[str, int, str], np.ndarray] = {}

__all__ = [
    "COMPLETION_TOKENS",
    "ONE_RATER",
    "PROMPT_TOKENS",
    "PROXY_VARIANTS",
    "Proxy",
    "ProxyRecipe",
    "build_proxy",
    "preference_pairs",
    "sample_completions",
]
