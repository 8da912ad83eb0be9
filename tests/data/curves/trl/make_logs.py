"""Writer of the genuine TRL logs beside it: tiny DPO (noisy, clean), RLOO and GRPO runs on CPU.

Each run trains a one-layer GPT-2 built from a config (no download) on the TRL corpus's word
world and saves its ``trainer_state.json`` as TRL 1.16 / transformers 5 write it.  The files
here were made with::

    STEPS=120 NTRAIN=96 LR=1e-2 python tests/data/curves/trl/make_logs.py OUT dpo_noisy
    python tests/data/curves/trl/make_logs.py OUT dpo_clean   # and rloo, grpo

(about 10 CPU-seconds each).  ``dpo_noisy`` flips 40 % of its training preferences and
over-fits them: its ``eval_loss`` bottoms out at step 48 and rises; RLOO's signed KL
estimate is negative at one early step.
"""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")


def main(out: Path, which: str) -> Path:
    """Train run ``which`` into ``out/which``; return its ``trainer_state.json``."""
    import torch
    from datasets import Dataset
    from transformers import GPT2Config, GPT2LMHeadModel

    from evalstop_corpora.trl.world import build_tokenizer, sample_chain, to_text

    torch.set_num_threads(1)
    texts = to_text(sample_chain(200, 8, seed=0))
    tok = build_tokenizer(texts)
    words = sorted({w for t in texts for w in t.split()})
    torch.manual_seed(0)
    cfg = GPT2Config(
        vocab_size=len(tok),
        n_positions=64,
        n_embd=32,
        n_layer=1,
        n_head=2,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
        bos_token_id=tok.eos_token_id,
    )
    base = out / "base"
    base.mkdir(parents=True, exist_ok=True)
    GPT2LMHeadModel(cfg).save_pretrained(base)
    tok.save_pretrained(base)
    rng = random.Random(0)

    def good(text: str) -> int:
        return sum(len(x) for x in text.split())  # the "gold" preference: longer words

    def phrase() -> str:
        return " ".join(rng.choice(words) for _ in range(3))

    common = dict(
        use_cpu=True,
        report_to="none",
        save_strategy="no",
        disable_tqdm=True,
        seed=0,
        logging_steps=2,
        eval_strategy="steps",
        eval_steps=6,
        lr_scheduler_type="constant",
        dataloader_num_workers=0,
        bf16=False,
    )
    if which.startswith("dpo"):
        from trl import DPOConfig, DPOTrainer

        def rows(n: int, flip: float) -> Dataset:
            out_rows = []
            for _ in range(n):
                p, a, b = phrase(), phrase(), phrase()
                chosen, rejected = (a, b) if good(a) >= good(b) else (b, a)
                if rng.random() < flip:
                    chosen, rejected = rejected, chosen
                out_rows.append({"prompt": p, "chosen": " " + chosen, "rejected": " " + rejected})
            return Dataset.from_list(out_rows)

        args = DPOConfig(
            output_dir=str(out / which),
            max_steps=int(os.environ.get("STEPS", 36)),
            learning_rate=float(os.environ.get("LR", 5e-3)),
            per_device_train_batch_size=8,
            per_device_eval_batch_size=16,
            max_length=16,
            **common,
        )
        flip = 0.4 if which == "dpo_noisy" else 0.0
        trainer = DPOTrainer(
            model=str(base),
            args=args,
            train_dataset=rows(int(os.environ.get("NTRAIN", 400)), flip),
            eval_dataset=rows(64, 0.0),
            processing_class=tok,
        )
    else:
        from trl import GRPOConfig, GRPOTrainer, RLOOConfig, RLOOTrainer

        def reward(completions: list[str], **_: object) -> list[float]:
            return [float(good(c)) / 10 for c in completions]

        config, trainer_class = (
            (RLOOConfig, RLOOTrainer) if which == "rloo" else (GRPOConfig, GRPOTrainer)
        )
        args = config(
            output_dir=str(out / which),
            max_steps=24,
            learning_rate=5e-3,
            beta=0.05,
            num_generations=2,
            per_device_train_batch_size=4,
            per_device_eval_batch_size=4,
            max_completion_length=6,
            **common,
        )
        trainer = trainer_class(
            model=str(base),
            reward_funcs=reward,
            args=args,
            train_dataset=Dataset.from_list([{"prompt": phrase()} for _ in range(200)]),
            eval_dataset=Dataset.from_list([{"prompt": phrase()} for _ in range(8)]),
            processing_class=tok,
        )
    trainer.train()
    trainer.save_state()
    return out / which / "trainer_state.json"


if __name__ == "__main__":
    print(main(Path(sys.argv[1]), sys.argv[2]))
