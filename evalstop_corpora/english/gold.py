"""The gold reward: VADER's sentiment of a completion, from the human ratings in its lexicon.

``vaderSentiment`` ships ``vader_lexicon.txt``: 7,500 entries, each with the mean of ten human
valence ratings (-4 .. +4), their sd and the ten individual ratings. The gold score of a text
is VADER's ``compound`` (in [-1, 1]) of its first mentions (:func:`first_mentions`: a word
repeated counts once, as a reader would hear it): the normalised sum of the mean ratings of the
words it contains, with VADER's rules for negation, intensifiers, "but" and capitals. A *rater* variant
(:func:`analyzer` with ``rater=j``) replaces every entry's mean by rater ``j``'s own rating, so
a proxy trained on it learns one person's taste: the real disagreement between the ten raters
is the gap between that proxy and the gold.
"""

from __future__ import annotations

import ast
import functools
import string
from pathlib import Path

import numpy as np

#: Number of individual ratings per lexicon entry.
N_RATERS = 10
#: A rater whose lexicon visibly differs from the mean on everyday words (used by the tests).
ONE_RATER_CHECK = 8


@functools.cache
def lexicon_ratings() -> dict[str, tuple[float, tuple[int, ...]]]:
    """``token -> (mean rating, the ten individual ratings)`` from VADER's own lexicon file."""
    import vaderSentiment

    path = Path(vaderSentiment.__file__).with_name("vader_lexicon.txt")
    out: dict[str, tuple[float, tuple[int, ...]]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        parts = line.strip().split("\t")
        if len(parts) < 4:
            continue
        ratings = tuple(int(r) for r in ast.literal_eval(parts[3]))
        if len(ratings) == N_RATERS:
            out[parts[0]] = (float(parts[1]), ratings)
    return out


@functools.cache
def analyzer(rater: int | None = None):  # -> SentimentIntensityAnalyzer
    """VADER's analyzer on the mean ratings (``rater=None``) or on rater ``rater``'s (0-9)."""
    from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

    sia = SentimentIntensityAnalyzer()
    if rater is not None:
        if not 0 <= rater < N_RATERS:
            raise ValueError(f"rater must be in 0..{N_RATERS - 1}, got {rater}")
        ratings = lexicon_ratings()
        sia.lexicon = {
            w: float(ratings[w][1][rater]) if w in ratings else v for w, v in sia.lexicon.items()
        }
    return sia


def first_mentions(text: str) -> str:
    """``text`` with every word after its first occurrence removed (case and punctuation aside).

    A reader hears "great great great" as one "great"; VADER's sum would count it three times.
    """
    seen: set[str] = set()
    kept = []
    for word in text.split():
        key = word.strip(string.punctuation).lower()
        if key not in seen:
            seen.add(key)
            kept.append(word)
    return " ".join(kept)


def gold_scores(texts: list[str], rater: int | None = None, *, repeats: bool = False) -> np.ndarray:
    """The gold of each text, in [-1, 1]: VADER's compound of its first mentions.

    Args:
        texts: Completions.
        rater: ``None`` for the mean ratings, ``j`` for rater ``j``'s own.
        repeats: Score the text as it is (VADER's plain compound, repeated words counted
            every time) instead of its :func:`first_mentions`.
    """
    sia = analyzer(rater)
    shown = texts if repeats else [first_mentions(t) for t in texts]
    return np.array([sia.polarity_scores(t)["compound"] for t in shown], dtype=np.float64)


__all__ = [
    "N_RATERS",
    "ONE_RATER_CHECK",
    "analyzer",
    "first_mentions",
    "gold_scores",
    "lexicon_ratings",
]
