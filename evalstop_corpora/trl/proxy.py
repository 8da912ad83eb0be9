"""The proxy reward model of a TRL run, fitted by Bradley-Terry to gold-labelled preference pairs.

As in Gao et al. (2022), both sides of every pair are completions the *initial* policy wrote for
the same prompt; the gold reward labels which one wins (with Bradley-Terry label noise). The
amount of preference data (``n_pairs``) and the proxy's size (``hidden``: 0 = linear) are the
knobs of over-optimisation: a small or linear proxy fitted to a few pairs extrapolates badly
once the policy leaves the base distribution.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from evalstop_corpora.trl.world import COMPLETION_WORDS, WORDS, gold_reward

#: Largest number of preference pairs in one proxy-training step.
PROXY_BATCH = 1024


class ProxyRM(nn.Module):
    """Scores a completion from the one-hot encoding of its words at each position."""

    def __init__(self, hidden: int) -> None:
        """Build a linear model (``hidden == 0``) or a one-hidden-layer MLP of width ``hidden``."""
        super().__init__()
        n_in = len(WORDS) * COMPLETION_WORDS
        self.net: nn.Module = (
            nn.Linear(n_in, 1)
            if hidden == 0
            else nn.Sequential(nn.Linear(n_in, hidden), nn.Tanh(), nn.Linear(hidden, 1))
        )

    @staticmethod
    def features(words: torch.Tensor) -> torch.Tensor:
        """One-hot features of ``(batch, COMPLETION_WORDS)`` word indices (-1 = no word: zeros)."""
        words = words[:, :COMPLETION_WORDS]
        onehot = torch.zeros(words.shape[0], COMPLETION_WORDS, len(WORDS))
        valid = words >= 0
        onehot[(*valid.nonzero(as_tuple=True), words[valid])] = 1.0
        return onehot.flatten(1)

    def forward(self, words: torch.Tensor) -> torch.Tensor:
        """Proxy score of each row of word indices."""
        return self.net(self.features(words)).squeeze(-1)


def train_proxy(
    winners: np.ndarray,
    losers: np.ndarray,
    *,
    hidden: int,
    epochs: int,
    lr: float,
    weight_decay: float,
    seed: int,
    reference: np.ndarray,
) -> ProxyRM:
    """Fit a proxy by the Bradley-Terry loss ``-log sigmoid(r(winner) - r(loser))``.

    Args:
        winners: ``(n_pairs, COMPLETION_WORDS)`` word indices of the preferred completions.
        losers: The other side of each pair.
        hidden: Hidden width (0 = linear).
        epochs: AdamW steps (full batch up to :data:`PROXY_BATCH` pairs, minibatches beyond).
        lr: Learning rate.
        weight_decay: Decoupled weight decay.
        seed: Seed of the initialisation and the minibatches.
        reference: Initial-policy completions on which the output is standardised (mean 0,
            sd 1), so that a KL coefficient means the same thing for every proxy.

    Returns:
        The trained, frozen proxy.
    """
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    proxy = ProxyRM(hidden)
    opt = torch.optim.AdamW(proxy.parameters(), lr=lr, weight_decay=weight_decay)
    win_x = ProxyRM.features(torch.as_tensor(winners))
    lose_x = ProxyRM.features(torch.as_tensor(losers))
    n = len(win_x)
    size = min(n, PROXY_BATCH)
    for _ in range(epochs):
        idx = torch.randint(n, (size,), generator=gen) if size < n else slice(None)
        scores = proxy.net(torch.cat([win_x[idx], lose_x[idx]])).squeeze(-1)
        loss = -nn.functional.logsigmoid(scores[:size] - scores[size:]).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    proxy.requires_grad_(False)
    with torch.no_grad():
        scores = proxy(torch.as_tensor(reference))
        mean, std = float(scores.mean()), float(scores.std()) + 1e-8
        last = proxy.net[-1] if isinstance(proxy.net, nn.Sequential) else proxy.net
        last.weight /= std
        last.bias.sub_(mean).div_(std)
    return proxy


def label_pairs(
    a: np.ndarray, b: np.ndarray, temperature: float, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Order each pair (winner, loser) by the gold reward with Bradley-Terry label noise.

    Args:
        a: One side of each pair, word indices.
        b: The other side.
        temperature: Bradley-Terry temperature in gold standard deviations (0 = noiseless).
        seed: Seed of the noisy labels.

    Returns:
        ``(winners, losers)``.
    """
    gold = gold_reward()
    diff = gold.score_ids(a) - gold.score_ids(b)
    if temperature > 0:
        p_a = 1.0 / (1.0 + np.exp(-diff / temperature))
        a_wins = np.random.default_rng(seed).random(len(diff)) < p_a
    else:
        a_wins = diff > 0
    return np.where(a_wins[:, None], a, b), np.where(a_wins[:, None], b, a)
