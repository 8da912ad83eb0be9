"""The gold reward: VADER's sentiment of a completion, from the human ratings in its lexicon.

``vaderSentiment`` ships ``vader_lexicon.txt``: 7,500 entries, each with the mean of ten human
valence ratings (-4 .. +4), their sd and the ten individual ratings. The gold score of a text
is VADER's ``compound`` (in [-1, 1]): the normalised sum of the mean ratings of the words it
contains, with VADER's rules for negation, intensifiers, "but" and capitals. A *rater* variant
(:func:`analyzer` with ``rater=j``) replaces every entry's mean by rater ``j``'s own rating, so
a proxy trained on it learns one person's taste: the real disagreement between the ten raters
is the gap between that proxy and the gold.
"""

from __future__ import annotations

import ast
import functools
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


def gold_scores(texts: list[str], rater: int | None = None) -> np.ndarray:
    """VADER compound of each text (mean ratings, or one rater's), in [-1, 1]."""
    sia = analyzer(rater)
    return np.array([sia.polarity_scores(t)["compound"] for t in texts], dtype=np.float64)


__all__ = ["N_RATERS", "ONE_RATER_CHECK", "analyzer", "gold_scores", "lexicon_ratings"]
