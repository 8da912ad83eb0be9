"""English text that ships with CPython, and the BPE tokenizer trained on it.

The text is the interpreter's own documentation: the pydoc topics (``pydoc_data.topics``, the
language reference's prose) and the docstrings of the standard library's pure-Python modules,
read with :mod:`ast` (nothing is imported, nothing downloaded). Paragraphs are split into a
training part (pre-training and tokenizer) and a held-out part (every
:data:`HELD_OUT_EVERY`-th paragraph) from which the RL prompts are drawn, so no prompt was
seen in pre-training.
"""

from __future__ import annotations

import ast
import functools
import re
import sysconfig
from pathlib import Path

#: Every this-many-th paragraph (in the fixed order of :func:`paragraphs`) is held out.
HELD_OUT_EVERY = 10
#: Paragraphs shorter than this many characters are dropped (headings, signatures).
MIN_CHARS = 80
#: Upper bound on the characters collected (keeps building the tokenizer and corpus quick).
MAX_CHARS = 4_000_000
#: The tokenizer's one special token: end of text, also used as padding.
EOS = "<|endoftext|>"


def _docstrings(path: Path) -> list[str]:
    """Module, class and function docstrings of one source file (none if it does not parse)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (SyntaxError, UnicodeDecodeError, ValueError):
        return []
    nodes = [tree] + [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    ]
    return [d for n in nodes if (d := ast.get_docstring(n))]


@functools.cache
def paragraphs() -> tuple[str, ...]:
    """All paragraphs of the CPython English text, whitespace-normalised, in a fixed order."""
    import pydoc_data.topics as topics

    texts = [topics.topics[k] for k in sorted(topics.topics)]
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    for path in sorted(stdlib.glob("*.py")) + sorted(stdlib.glob("*/*.py")):
        if "test" in path.parts[-2] or path.parts[-2] in ("idlelib", "lib2to3", "site-packages"):
            continue
        texts.extend(_docstrings(path))
    out: list[str] = []
    total = 0
    for text in texts:
        for para in re.split(r"\n\s*\n", text):
            para = " ".join(para.split())
            # Mostly prose: code listings and tables are dropped.
            letters = sum(c.isalpha() or c == " " for c in para)
            if len(para) >= MIN_CHARS and letters >= 0.85 * len(para):
                out.append(para)
                total += len(para)
        if total >= MAX_CHARS:
            break
    return tuple(out)


def split_text() -> tuple[list[str], list[str]]:
    """``(training paragraphs, held-out paragraphs)``."""
    paras = paragraphs()
    train = [p for i, p in enumerate(paras) if i % HELD_OUT_EVERY]
    # The pydoc topics repeat some passages: a held-out paragraph that also occurs among the
    # training ones is not held out, so it is dropped from the prompts' side.
    seen = set(train)
    held = [p for i, p in enumerate(paras) if i % HELD_OUT_EVERY == 0 and p not in seen]
    return train, held


def build_tokenizer(texts: list[str], vocab_size: int):  # -> PreTrainedTokenizerFast
    """Train a byte-level BPE tokenizer on ``texts`` and wrap it for transformers.

    Args:
        texts: Training paragraphs.
        vocab_size: Vocabulary size, the end-of-text token included.

    Returns:
        A ``PreTrainedTokenizerFast`` padding on the left (decoder-only generation).
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token=EOS, pad_token=EOS, bos_token=EOS, unk_token=EOS
    )
    fast.padding_side = "left"
    return fast


#: The three disjoint uses of the held-out prompts (index ``i`` of the pool goes to ``i % 3``).
PROMPT_PARTS = ("train", "pairs", "eval")


def prompt_pool(tokenizer, length: int, part: str):  # -> np.ndarray
    """Prompts of exactly ``length`` tokens from the held-out paragraphs, for one use.

    Windows start at word boundaries of each held-out paragraph (every ``length`` tokens); a
    window is kept only if decoding and re-encoding it gives the same tokens, so the prompt a
    trainer re-tokenises from text is the prompt the evaluations and the proxy see. The pool is
    dealt round-robin into :data:`PROMPT_PARTS` (RL training, the proxy's preference pairs, the
    gold evaluations): no prompt serves two of them.

    Returns:
        ``(n, length)`` int64 token ids.
    """
    import numpy as np

    if part not in PROMPT_PARTS:
        raise ValueError(f"part must be one of {PROMPT_PARTS}, got {part!r}")
    _, held = split_text()
    windows: list[list[int]] = []
    for ids in tokenizer(held)["input_ids"]:
        start = 0
        while start + length <= len(ids):
            window = ids[start : start + length]
            if tokenizer(tokenizer.decode(window))["input_ids"] == window:
                windows.append(window)
                start += length
            else:
                start += 1
    pool = np.asarray(windows, dtype=np.int64)
    return pool[PROMPT_PARTS.index(part) :: len(PROMPT_PARTS)]


__all__ = [
    "EOS",
    "HELD_OUT_EVERY",
    "PROMPT_PARTS",
    "build_tokenizer",
    "paragraphs",
    "prompt_pool",
    "split_text",
]
