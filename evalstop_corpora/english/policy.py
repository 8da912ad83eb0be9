"""The pre-trained English policy: a small GPT-2 on CPython's English text, built once and cached.

:func:`build_policy` trains the BPE tokenizer (:mod:`.text`) and pre-trains a GPT-2 from a
``transformers`` config by maximum likelihood on blocks of the training paragraphs, then saves
both in ``save_pretrained`` layout into ``<cache>/policy-<hash>/``, ``hash`` the SHA-256 of the
recipe. A folder whose stamp records the same recipe and whose weights still have the recorded
SHA-256 is reused, never rebuilt. Every run of a corpus starts from this model (and uses it as
its KL reference).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

#: File in a policy folder that records its recipe and the SHA-256 of its weights.
STAMP_FILE = "policy_recipe.json"
#: The weights file ``save_pretrained`` writes.
WEIGHTS_FILE = "model.safetensors"


@dataclass(frozen=True)
class PolicyRecipe:
    """How the tokenizer and the pre-trained policy are built.

    Attributes:
        vocab_size: BPE vocabulary size.
        n_layer: GPT-2 layers.
        n_embd: GPT-2 width.
        n_head: Attention heads.
        block: Tokens per pre-training sequence.
        steps: AdamW steps of pre-training.
        batch: Sequences per step.
        lr: Peak learning rate (linear decay to 10 %).
        seed: Seed of the initialisation and the batches.
    """

    vocab_size: int = 2048
    n_layer: int = 4
    n_embd: int = 128
    n_head: int = 4
    block: int = 48
    steps: int = 900
    batch: int = 32
    lr: float = 2e-3
    seed: int = 0

    def digest(self) -> str:
        """First 12 hex digits of the SHA-256 of the recipe (the cache key)."""
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:12]


def _file_sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def policy_ready(folder: Path, recipe: PolicyRecipe) -> bool:
    """Whether ``folder`` holds a policy built from ``recipe`` with its weights intact."""
    stamp = folder / STAMP_FILE
    if not stamp.exists() or not (folder / WEIGHTS_FILE).exists():
        return False
    record = json.loads(stamp.read_text(encoding="utf-8"))
    return record.get("recipe") == asdict(recipe) and record.get("sha256") == _file_sha(
        folder / WEIGHTS_FILE
    )


def _blocks(tokenizer, texts: list[str], block: int):  # -> torch.Tensor
    """The training text as one token stream (paragraphs joined by EOS), cut into blocks."""
    import torch

    ids: list[int] = []
    for row in tokenizer(texts)["input_ids"]:
        ids.extend(row)
        ids.append(tokenizer.eos_token_id)
    n = len(ids) // block
    return torch.as_tensor(ids[: n * block]).view(n, block)


def _pretrain(model, data, recipe: PolicyRecipe) -> float:
    """Maximum likelihood on random blocks; returns the mean loss of the last 50 steps."""
    import torch

    gen = torch.Generator().manual_seed(recipe.seed)
    opt = torch.optim.AdamW(model.parameters(), lr=recipe.lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / 50) * (1 - 0.9 * s / recipe.steps)
    )
    model.train()
    tail: list[float] = []
    for step in range(recipe.steps):
        batch = data[torch.randint(len(data), (recipe.batch,), generator=gen)]
        loss = model(input_ids=batch, labels=batch).loss
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if step >= recipe.steps - 50:
            tail.append(float(loss.detach()))
    model.eval()
    return sum(tail) / len(tail)


def build_policy(cache: str | os.PathLike[str], recipe: PolicyRecipe | None = None) -> Path:
    """Build (or reuse) the tokenizer and pre-trained policy under ``cache``.

    Args:
        cache: Parent folder; the policy goes to ``cache/policy-<recipe digest>/``.
        recipe: Tokenizer, architecture and pre-training settings (default recipe if None).

    Returns:
        The policy folder, loadable offline by ``AutoModelForCausalLM.from_pretrained`` and
        ``AutoTokenizer.from_pretrained``.
    """
    import time

    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from evalstop_corpora.english.text import build_tokenizer, split_text

    recipe = recipe or PolicyRecipe()
    folder = Path(cache) / f"policy-{recipe.digest()}"
    if policy_ready(folder, recipe):
        return folder
    started = time.process_time()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        train, _ = split_text()
        tokenizer = build_tokenizer(train, recipe.vocab_size)
        data = _blocks(tokenizer, train, recipe.block)
        config = GPT2Config(
            vocab_size=len(tokenizer),
            n_positions=128,
            n_embd=recipe.n_embd,
            n_layer=recipe.n_layer,
            n_head=recipe.n_head,
            bos_token_id=tokenizer.eos_token_id,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.eos_token_id,
            # No dropout: log-probabilities at sampling and at training time must agree.
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
        )
        torch.manual_seed(recipe.seed)
        model = GPT2LMHeadModel(config)
        final_loss = _pretrain(model, data, recipe)
    finally:
        torch.set_num_threads(threads)
    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    record = {
        "recipe": asdict(recipe),
        "final_loss": final_loss,
        "parameters": sum(p.numel() for p in model.parameters()),
        "training_tokens": int(data.numel()),
        "cpu_seconds": time.process_time() - started,
        "sha256": _file_sha(tmp / WEIGHTS_FILE),
    }
    (tmp / STAMP_FILE).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    shutil.rmtree(folder, ignore_errors=True)
    tmp.rename(folder)
    return folder


__all__ = ["PolicyRecipe", "build_policy", "policy_ready"]
