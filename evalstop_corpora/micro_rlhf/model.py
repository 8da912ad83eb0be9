"""Models of the micro-RLHF setup: gold reward, base distribution, policy and proxy reward model.

Everything here is tiny on purpose (vocabulary 8, sequences of 10 tokens) so that a complete
RLHF run - proxy training plus 150 policy-gradient steps - takes two to four seconds on
one CPU core while still being real gradient descent on real neural networks.
"""

from __future__ import annotations

import functools

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

#: Number of distinct tokens.
VOCAB = 8
#: Length of every sequence the policy emits.
LENGTH = 10
#: Seed of the gold reward's fixed parameters; part of the benchmark's definition, never varied.
GOLD_SEED = 20240607
#: Seed of the base (pre-training) distribution's Markov chain.
BASE_CHAIN_SEED = 7


class GoldReward:
    """The fixed "true" reward, defined in code, standardised to the base distribution.

    ``gold(x) = sum_v a_v c_v - kappa * sum_v c_v**2 + sum_t B[x_t, x_{t+1}]`` where ``c_v`` counts
    token ``v`` in the sequence. The quadratic term gives each token diminishing (and eventually
    negative) returns, so a proxy that extrapolates "more of a good token is better" beyond the
    counts it saw in its training data is rewarded by the policy at the gold reward's expense: the
    textbook extremal-Goodhart mechanism of Gao et al. The bigram table adds structure a small
    proxy can only partly learn.

    The raw score is affinely standardised so that the base distribution has mean 0 and standard
    deviation 1 (the normalisation Gao et al. use for their gold reward model), which makes KL
    penalties and fitted alpha/beta comparable across runs.
    """

    def __init__(self, kappa: float = 0.35, bigram_scale: float = 0.5) -> None:
        """Build the gold reward from :data:`GOLD_SEED`.

        Args:
            kappa: Strength of the diminishing-returns (concentration) penalty.
            bigram_scale: Standard deviation of the bigram bonus table.
        """
        rng = np.random.default_rng(GOLD_SEED)
        self.unigram = torch.tensor(rng.normal(0.0, 1.0, VOCAB), dtype=torch.float32)
        self.bigram = torch.tensor(
            rng.normal(0.0, bigram_scale, (VOCAB, VOCAB)), dtype=torch.float32
        )
        self.kappa = kappa
        # Standardise against a large fixed sample of the base chain (not of a trained policy),
        # so the scale is a property of the benchmark, independent of any run.
        sample = base_chain_sample(50_000, seed=GOLD_SEED)
        raw = self.raw(sample)
        self.offset = float(raw.mean())
        self.scale = float(raw.std())

    def raw(self, tokens: torch.Tensor) -> torch.Tensor:
        """Unstandardised gold score of a ``(batch, LENGTH)`` int tensor."""
        counts = F.one_hot(tokens, VOCAB).sum(dim=1).float()
        bigrams = self.bigram[tokens[:, :-1], tokens[:, 1:]].sum(dim=1)
        return counts @ self.unigram - self.kappa * (counts**2).sum(dim=1) + bigrams

    def __call__(self, tokens: torch.Tensor) -> torch.Tensor:
        """Standardised gold score (mean 0, sd 1 under the base chain) of each sequence."""
        return (self.raw(tokens) - self.offset) / self.scale


@functools.cache
def gold_reward() -> GoldReward:
    """The process-wide gold reward (cached: building it samples 50k sequences)."""
    return GoldReward()


def base_chain_matrices() -> tuple[np.ndarray, np.ndarray]:
    """Initial distribution and transition matrix of the base Markov chain.

    A Dirichlet(1) chain: peaked enough that the base distribution has structure for the policy
    to learn, broad enough that every sequence has non-negligible probability.
    """
    rng = np.random.default_rng(BASE_CHAIN_SEED)
    init = rng.dirichlet(np.ones(VOCAB))
    trans = rng.dirichlet(np.ones(VOCAB), size=VOCAB)
    return init, trans


def base_chain_sample(n: int, seed: int) -> torch.Tensor:
    """Draw ``n`` sequences from the base Markov chain (the "pre-training corpus")."""
    init, trans = base_chain_matrices()
    gen = torch.Generator().manual_seed(seed)
    init_t = torch.tensor(init, dtype=torch.float32)
    trans_t = torch.tensor(trans, dtype=torch.float32)
    out = torch.empty(n, LENGTH, dtype=torch.long)
    out[:, 0] = torch.multinomial(init_t.expand(n, VOCAB), 1, generator=gen).squeeze(1)
    for t in range(1, LENGTH):
        out[:, t] = torch.multinomial(trans_t[out[:, t - 1]], 1, generator=gen).squeeze(1)
    return out


class Policy(nn.Module):
    """Autoregressive GRU language model over :data:`VOCAB` tokens with a BOS token."""

    def __init__(self, hidden: int = 32) -> None:
        """Create an untrained policy.

        Args:
            hidden: GRU state size.
        """
        super().__init__()
        self.embed = nn.Embedding(VOCAB + 1, hidden)  # index VOCAB is BOS
        self.gru = nn.GRU(hidden, hidden, batch_first=True)
        self.head = nn.Linear(hidden, VOCAB)

    def log_prob(self, tokens: torch.Tensor) -> torch.Tensor:
        """Log-probability of each ``(batch, LENGTH)`` sequence, shape ``(batch,)``."""
        bos = torch.full((tokens.shape[0], 1), VOCAB, dtype=torch.long)
        inputs = self.embed(torch.cat([bos, tokens[:, :-1]], dim=1))
        states, _ = self.gru(inputs)
        logp = F.log_softmax(self.head(states), dim=-1)
        return logp.gather(2, tokens.unsqueeze(2)).squeeze(2).sum(dim=1)

    @torch.no_grad()
    def sample(self, n: int, gen: torch.Generator) -> torch.Tensor:
        """Sample ``n`` sequences, shape ``(n, LENGTH)``."""
        state = torch.zeros(1, n, self.gru.hidden_size)
        token = torch.full((n,), VOCAB, dtype=torch.long)
        out = torch.empty(n, LENGTH, dtype=torch.long)
        for t in range(LENGTH):
            step_out, state = self.gru(self.embed(token).unsqueeze(1), state)
            probs = F.softmax(self.head(step_out.squeeze(1)), dim=-1)
            token = torch.multinomial(probs, 1, generator=gen).squeeze(1)
            out[:, t] = token
        return out


@functools.cache
def pretrained_state(hidden: int = 32, steps: int = 100, seed: int = 0) -> dict[str, torch.Tensor]:
    """Weights of a policy pre-trained by maximum likelihood on the base Markov chain.

    Cached per process: every run starts from the same initial policy (as in Gao et al.), and a
    worker pays the pre-training cost once.

    Args:
        hidden: GRU state size.
        steps: Adam steps of maximum-likelihood training.
        seed: Seed of the initial weights and the pre-training sample.

    Returns:
        A ``state_dict`` to load into :class:`Policy`.
    """
    # fork_rng: whether this cache is cold or warm must not change the caller's random stream.
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        policy = Policy(hidden)
        data = base_chain_sample(steps * 256, seed=seed + 1)
        opt = torch.optim.Adam(policy.parameters(), lr=1e-2)
        for batch in data.split(256):
            loss = -policy.log_prob(batch).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    return {k: v.detach().clone() for k, v in policy.state_dict().items()}


class ProxyRM(nn.Module):
    """Proxy reward model: an MLP over the one-hot encoded sequence.

    ``hidden=0`` gives a linear model (per-position token weights), larger ``hidden`` a model that
    can represent interactions such as the gold reward's diminishing returns - if it has the data.
    """

    def __init__(self, hidden: int) -> None:
        """Create an untrained proxy.

        Args:
            hidden: Width of the hidden layer; 0 for a linear model.
        """
        super().__init__()
        n_in = VOCAB * LENGTH
        if hidden > 0:
            self.net: nn.Module = nn.Sequential(
                nn.Linear(n_in, hidden), nn.Tanh(), nn.Linear(hidden, 1)
            )
        else:
            self.net = nn.Linear(n_in, 1)

    @staticmethod
    def features(tokens: torch.Tensor) -> torch.Tensor:
        """One-hot input features of ``(batch, LENGTH)`` tokens, shape ``(batch, LENGTH*VOCAB)``."""
        return F.one_hot(tokens, VOCAB).flatten(1).float()

    def score_features(self, features: torch.Tensor) -> torch.Tensor:
        """Score precomputed :meth:`features` (training reuses them every epoch)."""
        return self.net(features).squeeze(1)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Score each ``(batch, LENGTH)`` sequence, shape ``(batch,)``."""
        return self.score_features(self.features(tokens))
