"""English RLHF runs: a small GPT-2 on CPython's English text, VADER's human ratings as gold.

* :mod:`.text` — the English text that ships with CPython and the BPE tokenizer;
* :mod:`.policy` — the pre-trained policy, built once and cached;
* :mod:`.gold` — the gold reward, VADER's compound from its lexicon's human ratings;
* :mod:`.proxy` — proxy reward models trained by TRL's ``RewardTrainer``;
* :mod:`.run` — one run of GRPO, RLOO or online DPO against a proxy;
* :mod:`.generate` — the corpus: grid, resumable generation, ``build_corpus``.

Needs the ``trl`` extra (torch, transformers, TRL, vaderSentiment); see ``docs/REAL_RUNS.md``.
"""
