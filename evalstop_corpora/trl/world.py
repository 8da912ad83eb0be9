"""The miniature world of the TRL runs: words, base corpus, gold reward, tokenizer, base LM.

Everything is generated from fixed seeds, nothing is downloaded:

- **Words**: :data:`WORDS`, 12 plain English words. Texts are words separated by spaces.
- **Base distribution**: a fixed random Markov chain over the words (:func:`base_chain`); the
  base corpus is texts of ``PROMPT_WORDS + COMPLETION_WORDS`` words drawn from it.
- **Gold reward** (:class:`GoldReward`): a documented, deterministic function of a completion's
  words, as in the micro-RLHF set-up: ``sum_v a_v c_v - kappa sum_v c_v^2 + sum_t B[w_t,
  w_{t+1}]`` over the word counts ``c_v`` and adjacent word pairs, standardised to mean 0 and
  sd 1 under the base distribution. The quadratic term gives every word diminishing, then
  negative, returns; a proxy that extrapolates "more of this word is better" is rewarded at
  the gold reward's expense (extremal Goodhart, Gao et al. 2022).
- **Tokenizer**: a word-level ``tokenizers`` tokenizer trained on the generated base corpus
  (one token per word, plus ``[PAD]``, ``[UNK]``, ``[EOS]``).
- **Base LM**: a GPT-2 from a ``transformers`` config (2 layers, width 64), pre-trained by
  maximum likelihood on the base corpus. :func:`build_base` builds it once into a folder that
  every run of a corpus shares (the policy's initialisation and the KL reference).
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

#: The vocabulary of the world, in token-id order after the special tokens.
WORDS: tuple[str, ...] = (
    "red", "blue", "green", "cat", "dog", "bird", "runs", "sees", "eats", "big", "small", "now",
)  # fmt: skip
#: Special tokens of the tokenizer (ids 0, 1, 2).
SPECIALS: tuple[str, ...] = ("[PAD]", "[UNK]", "[EOS]")
#: Words of every prompt (sampled from the base chain).
PROMPT_WORDS = 2
#: Words of every completion (the policy always writes this many tokens).
COMPLETION_WORDS = 10
#: Seed of the gold reward's parameters; part of the benchmark's definition, never varied.
GOLD_SEED = 20261130
#: Seed of the base Markov chain.
BASE_CHAIN_SEED = 11
#: File in a base folder that records how it was built (a changed recipe rebuilds it).
BASE_RECIPE_FILE = "base_recipe.json"


def base_chain() -> tuple[np.ndarray, np.ndarray]:
    """Initial distribution and transition matrix of the base Markov chain over :data:`WORDS`.

    Rows are Dirichlet(0.5) draws from :data:`BASE_CHAIN_SEED`: peaked enough that the base LM
    has structure to learn, broad enough that every word follows every word sometimes.
    """
    rng = np.random.default_rng(BASE_CHAIN_SEED)
    n = len(WORDS)
    return rng.dirichlet(np.ones(n)), rng.dirichlet(np.full(n, 0.5), size=n)


def sample_chain(n: int, length: int, seed: int) -> np.ndarray:
    """``n`` sequences of ``length`` word indices (0-based into :data:`WORDS`) from the chain."""
    init, trans = base_chain()
    rng = np.random.default_rng(seed)
    cum = np.cumsum(trans, axis=1)
    out = np.empty((n, length), dtype=np.int64)
    out[:, 0] = rng.choice(len(WORDS), size=n, p=init)
    for t in range(1, length):
        u = rng.random(n)[:, None]
        out[:, t] = np.minimum((u > cum[out[:, t - 1]]).sum(axis=1), len(WORDS) - 1)
    return out


def to_text(words: np.ndarray) -> list[str]:
    """Texts of rows of word indices."""
    return [" ".join(WORDS[i] for i in row) for row in words]


class GoldReward:
    """The fixed "true" reward of a completion, standardised under the base distribution.

    ``raw(w) = sum_v a_v c_v - kappa sum_v c_v**2 + sum_t B[w_t, w_{t+1}]`` with ``c_v`` the count
    of word ``v`` in the completion, ``a ~ N(0, 1)`` and ``B ~ N(0, bigram_scale**2)`` drawn from
    :data:`GOLD_SEED`. Unknown words score as if absent. The score is ``(raw - offset) / scale``
    with offset and scale the mean and sd of ``raw`` on 50 000 base-chain completions.
    """

    def __init__(self, kappa: float = 0.35, bigram_scale: float = 0.5) -> None:
        """Draw the parameters from :data:`GOLD_SEED` and standardise on the base chain.

        Args:
            kappa: Strength of the diminishing-returns penalty.
            bigram_scale: Standard deviation of the adjacent-pair bonus table.
        """
        rng = np.random.default_rng(GOLD_SEED)
        n = len(WORDS)
        self.unigram = rng.normal(0.0, 1.0, n)
        self.bigram = rng.normal(0.0, bigram_scale, (n, n))
        self.kappa = kappa
        self._index = {w: i for i, w in enumerate(WORDS)}
        sample = sample_chain(50_000, PROMPT_WORDS + COMPLETION_WORDS, seed=GOLD_SEED)
        raw = self.raw_ids(sample[:, PROMPT_WORDS:])
        self.offset, self.scale = float(raw.mean()), float(raw.std())

    def raw_ids(self, words: np.ndarray) -> np.ndarray:
        """Unstandardised score of rows of word indices (-1 = not a word: ignored)."""
        words = np.asarray(words, dtype=np.int64)
        valid = words >= 0
        n = len(WORDS)
        counts = np.zeros((words.shape[0], n))
        rows = np.broadcast_to(np.arange(words.shape[0])[:, None], words.shape)
        np.add.at(counts, (rows[valid], words[valid]), 1.0)
        pair_ok = valid[:, :-1] & valid[:, 1:]
        left, right = np.where(pair_ok, words[:, :-1], 0), np.where(pair_ok, words[:, 1:], 0)
        pairs = np.where(pair_ok, self.bigram[left, right], 0.0).sum(axis=1)
        return counts @ self.unigram - self.kappa * (counts**2).sum(axis=1) + pairs

    def score_ids(self, words: np.ndarray) -> np.ndarray:
        """Standardised score of rows of word indices."""
        return (self.raw_ids(words) - self.offset) / self.scale

    def score_texts(self, texts: list[str]) -> np.ndarray:
        """Standardised score of completion texts (words split on whitespace)."""
        width = max((len(t.split()) for t in texts), default=0) or 1
        ids = np.full((len(texts), width), -1, dtype=np.int64)
        for r, text in enumerate(texts):
            for c, word in enumerate(text.split()):
                ids[r, c] = self._index.get(word, -1)
        return self.score_ids(ids)


@functools.cache
def gold_reward() -> GoldReward:
    """The process-wide gold reward (cached: building it scores 50 000 sequences)."""
    return GoldReward()


@dataclass(frozen=True)
class BaseRecipe:
    """How the shared tokenizer and base LM are built; a folder built otherwise is rebuilt.

    Attributes:
        n_layer: GPT-2 layers.
        n_embd: GPT-2 width.
        n_head: Attention heads.
        corpus_size: Texts in the generated base corpus.
        steps: Adam steps of pre-training.
        batch: Texts per pre-training step.
        lr: Pre-training learning rate.
        seed: Seed of the base corpus and the model's initialisation.
    """

    n_layer: int = 2
    n_embd: int = 64
    n_head: int = 2
    corpus_size: int = 20_000
    steps: int = 300
    batch: int = 128
    lr: float = 3e-3
    seed: int = 0


def build_tokenizer(texts: list[str]):  # -> transformers.PreTrainedTokenizerFast
    """Train a word-level tokenizer on generated texts and wrap it for transformers."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    # The specials come first so that word ids are 3 + index in WORDS (see word_ids).
    tok.train_from_iterator(texts, trainers.WordLevelTrainer(special_tokens=list(SPECIALS)))
    # WordLevel orders words by frequency; re-create it with the fixed WORDS order so token ids
    # never depend on the sampled corpus.
    vocab = {w: i for i, w in enumerate(SPECIALS + WORDS)}
    if set(tok.get_vocab()) != set(vocab):
        raise RuntimeError(f"tokenizer vocabulary {sorted(tok.get_vocab())} is not {sorted(vocab)}")
    tok.model = models.WordLevel(vocab, unk_token="[UNK]")
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]", eos_token="[EOS]"
    )
    fast.padding_side = "left"  # decoder-only generation pads prompts on the left
    return fast


def word_ids(token_ids: np.ndarray) -> np.ndarray:
    """Word indices of token ids (``-1`` for the special tokens)."""
    token_ids = np.asarray(token_ids, dtype=np.int64)
    return np.where(token_ids >= len(SPECIALS), token_ids - len(SPECIALS), -1)


def _pretrain(model, recipe: BaseRecipe) -> float:
    """Maximum-likelihood pre-training on base-chain texts; returns the final loss (nats/token)."""
    import torch

    data = torch.as_tensor(
        sample_chain(recipe.corpus_size, PROMPT_WORDS + COMPLETION_WORDS, seed=recipe.seed)
        + len(SPECIALS)
    )
    gen = torch.Generator().manual_seed(recipe.seed)
    opt = torch.optim.AdamW(model.parameters(), lr=recipe.lr, weight_decay=0.0)
    model.train()
    loss = torch.tensor(float("nan"))
    for _ in range(recipe.steps):
        batch = data[torch.randint(len(data), (recipe.batch,), generator=gen)]
        loss = model(input_ids=batch, labels=batch).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    return float(loss.detach())


def build_base(folder: str | os.PathLike[str], recipe: BaseRecipe | None = None) -> Path:
    """Build (or reuse) the shared tokenizer and pre-trained base LM in ``folder``.

    The folder is reused when its :data:`BASE_RECIPE_FILE` records the same recipe; it is
    written atomically enough for one builder (the corpus driver builds it before any run).

    Args:
        folder: Where to save the model and tokenizer (``save_pretrained`` layout).
        recipe: Architecture and pre-training settings.

    Returns:
        The folder, loadable by ``AutoModelForCausalLM.from_pretrained`` and
        ``AutoTokenizer.from_pretrained`` without network access.
    """
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    recipe = recipe or BaseRecipe()
    folder = Path(folder)
    stamp = folder / BASE_RECIPE_FILE
    if stamp.exists() and json.loads(stamp.read_text())["recipe"] == asdict(recipe):
        return folder
    tokenizer = build_tokenizer(
        to_text(sample_chain(2_000, PROMPT_WORDS + COMPLETION_WORDS, seed=recipe.seed))
    )
    config = GPT2Config(
        vocab_size=len(SPECIALS) + len(WORDS),
        n_positions=32,
        n_embd=recipe.n_embd,
        n_layer=recipe.n_layer,
        n_head=recipe.n_head,
        bos_token_id=SPECIALS.index("[EOS]"),
        eos_token_id=SPECIALS.index("[EOS]"),
        pad_token_id=SPECIALS.index("[PAD]"),
        # No dropout: the policy's log-probabilities at sampling and at training time must agree.
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
    )
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(recipe.seed)
        model = GPT2LMHeadModel(config)
        final_loss = _pretrain(model, recipe)
    finally:
        torch.set_num_threads(threads)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    stamp.write_text(
        json.dumps({"recipe": asdict(recipe), "final_loss": final_loss}, indent=2) + "\n"
    )
    return folder
