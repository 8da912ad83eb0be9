"""Programs that make curve corpora by running real (small) RLHF training.

They need torch, so nothing in :mod:`evalstop_gym` imports them; they depend on
:mod:`evalstop_gym.corpus.format`, never the reverse.
"""
