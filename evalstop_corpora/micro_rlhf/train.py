"""One micro-RLHF run: train a proxy on gold-labelled pairs, then optimise a policy against it.

The run follows Gao et al. (2022), "Scaling Laws for Reward Model Overoptimization", in
miniature: preference pairs sampled from the initial policy are labelled by the gold reward
(Bradley-Terry, with label noise), a proxy reward model is fitted to them, and the policy is
optimised against the proxy by REINFORCE with a batch-mean baseline and a KL penalty to the
initial policy folded into the reward (the usual RLHF objective ``r_proxy - beta * log(pi/pi0)``).
At every checkpoint the run records the gold and proxy scores and the KL on a large held-out
sample, plus a small-sample "eval" gold score playing the role of a real, noisy benchmark.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import torch

from evalstop_corpora.micro_rlhf.model import (
    LENGTH,
    VOCAB,
    Policy,
    ProxyRM,
    gold_reward,
    pretrained_state,
)
from evalstop_gym.corpus import CurveTrace, label_hacking

#: Largest number of preference pairs in one proxy-training step.
PROXY_BATCH = 1024


@dataclass(frozen=True)
class MicroRLHFConfig:
    """Hyperparameters of one micro-RLHF run; equal configs give identical traces.

    Attributes:
        seed: Seed of the preference data, proxy initialisation and policy sampling.
        n_pairs: Number of gold-labelled preference pairs the proxy is trained on.
        proxy_hidden: Hidden width of the proxy MLP (0 = linear proxy).
        kl_beta: KL penalty coefficient to the initial policy (0 = none).
        steps: Policy-gradient steps.
        checkpoints: Number of evaluation checkpoints after step 0 (evenly spaced; the run also
            records step 0, the initial policy).
        lr: Adam learning rate of the policy.
        batch: Sequences sampled per policy-gradient step.
        label_temperature: Bradley-Terry temperature of the gold labels, in gold standard
            deviations (0 = noiseless labels).
        proxy_epochs: Adam steps of proxy training (full batch up to :data:`PROXY_BATCH` pairs,
            random minibatches of that size beyond).
        proxy_lr: Adam learning rate of the proxy.
        proxy_weight_decay: L2 penalty of the proxy (AdamW decoupled weight decay).
        gold_batch: Held-out sample size for the gold, proxy and KL estimates (large: low noise).
        eval_batch: Sample size of the noisy "eval" score, as a real benchmark would have.
        policy_hidden: GRU state size of the policy.
    """

    seed: int = 0
    n_pairs: int = 256
    proxy_hidden: int = 32
    kl_beta: float = 0.0
    steps: int = 150
    checkpoints: int = 20
    lr: float = 1e-3
    batch: int = 256
    label_temperature: float = 0.3
    proxy_epochs: int = 200
    proxy_lr: float = 1e-2
    proxy_weight_decay: float = 1e-3
    gold_batch: int = 1024
    eval_batch: int = 32
    policy_hidden: int = 32

    def __post_init__(self) -> None:
        """Reject configurations that cannot run, naming the field."""
        for name in ("n_pairs", "steps", "checkpoints", "batch", "gold_batch", "eval_batch"):
            if getattr(self, name) < 1:
                raise ValueError(f"MicroRLHFConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.checkpoints > self.steps:
            raise ValueError(
                f"MicroRLHFConfig.checkpoints ({self.checkpoints}) must be <= steps ({self.steps})"
            )
        if self.proxy_hidden < 0 or self.kl_beta < 0 or self.lr <= 0:
            raise ValueError("MicroRLHFConfig: proxy_hidden and kl_beta must be >= 0, lr > 0")

    def run_id(self) -> str:
        """A readable identifier naming the swept hyperparameters and the seed."""
        return (
            f"micro-n{self.n_pairs}-h{self.proxy_hidden}-b{self.kl_beta:g}-lr{self.lr:g}"
            f"-s{self.seed}"
        )


def train_proxy(config: MicroRLHFConfig, policy0: Policy, gen: torch.Generator) -> ProxyRM:
    """Fit a proxy reward model by Bradley-Terry on gold-labelled pairs from the initial policy.

    Args:
        config: The run's configuration.
        policy0: The initial policy, from which both sides of every pair are sampled.
        gen: Random generator (pairs, labels).

    Returns:
        The trained proxy, with its output standardised (mean 0, sd 1) on initial-policy samples
        so that ``kl_beta`` means the same thing for every proxy.
    """
    gold = gold_reward()
    a = policy0.sample(config.n_pairs, gen)
    b = policy0.sample(config.n_pairs, gen)
    diff = gold(a) - gold(b)
    if config.label_temperature > 0:
        p_a = torch.sigmoid(diff / config.label_temperature)
        a_wins = torch.rand(config.n_pairs, generator=gen) < p_a
    else:
        a_wins = diff > 0
    winner = torch.where(a_wins.unsqueeze(1), a, b)
    loser = torch.where(a_wins.unsqueeze(1), b, a)

    proxy = ProxyRM(config.proxy_hidden)
    opt = torch.optim.AdamW(
        proxy.parameters(), lr=config.proxy_lr, weight_decay=config.proxy_weight_decay
    )
    win_x, lose_x = ProxyRM.features(winner), ProxyRM.features(loser)
    # Full batch up to PROXY_BATCH pairs, minibatches beyond: a fixed number of Adam steps keeps
    # the cost of a run nearly independent of n_pairs.
    size = min(config.n_pairs, PROXY_BATCH)
    for _ in range(config.proxy_epochs):
        idx = (
            torch.randint(config.n_pairs, (size,), generator=gen)
            if size < config.n_pairs
            else slice(None)
        )
        # One forward pass for both sides: at these sizes most of the cost is per-call overhead.
        scores = proxy.score_features(torch.cat([win_x[idx], lose_x[idx]]))
        loss = -torch.nn.functional.logsigmoid(scores[:size] - scores[size:]).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    proxy.requires_grad_(False)

    with torch.no_grad():
        scores = proxy(policy0.sample(4096, gen))
        mean, std = float(scores.mean()), float(scores.std()) + 1e-8
    net = proxy.net
    last = net[-1] if isinstance(net, torch.nn.Sequential) else net
    with torch.no_grad():
        last.weight /= std
        last.bias.sub_(mean).div_(std)
    return proxy


def run_micro_rlhf(config: MicroRLHFConfig) -> CurveTrace:
    """Run one micro-RLHF experiment and return its per-checkpoint curves.

    Args:
        config: Hyperparameters and seed.

    Returns:
        A :class:`CurveTrace` with ``step``, ``eval`` (gold on ``eval_batch`` fresh samples),
        ``loss`` (the policy-gradient loss of the batch at that step), ``proxy``, ``kl``
        (Monte-Carlo estimate of KL(pi || pi0) in nats per sequence), ``gold`` (on ``gold_batch``
        samples), the label from :func:`label_hacking` on the gold curve, and ``meta`` holding the
        configuration (no wall-clock time: traces must be reproducible byte for byte).
    """
    # Same thread count everywhere (local pool, Ray, tests): intra-op parallelism can change
    # float reduction order, and with it every sampled token downstream.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _run(config)
    finally:
        torch.set_num_threads(threads)


def _run(config: MicroRLHFConfig) -> CurveTrace:
    """Body of :func:`run_micro_rlhf`, run with one intra-op thread."""
    # Process-wide caches first, so cold and warm caches leave the same random state behind.
    gold = gold_reward()
    initial_state = pretrained_state(config.policy_hidden)
    torch.manual_seed(config.seed)
    gen = torch.Generator().manual_seed(config.seed)

    policy0 = Policy(config.policy_hidden)
    policy0.load_state_dict(initial_state)
    policy0.requires_grad_(False)
    proxy = train_proxy(config, policy0, gen)

    policy = Policy(config.policy_hidden)
    policy.load_state_dict(policy0.state_dict())
    opt = torch.optim.Adam(policy.parameters(), lr=config.lr)

    ckpt_steps = set(np.linspace(0, config.steps, config.checkpoints + 1).round().astype(int))
    rows: list[tuple[int, float, float, float, float, float]] = []
    for step in range(config.steps + 1):
        tokens = policy.sample(config.batch, gen)
        logp = policy.log_prob(tokens)
        with torch.no_grad():
            reward = proxy(tokens)
            if config.kl_beta > 0:  # the reference forward pass is a third of a step's cost
                reward = reward - config.kl_beta * (logp.detach() - policy0.log_prob(tokens))
            advantage = reward - reward.mean()
        loss = -(advantage * logp).mean()
        if step in ckpt_steps:
            with torch.no_grad():
                held_out = policy.sample(config.gold_batch, gen)
                kl = float((policy.log_prob(held_out) - policy0.log_prob(held_out)).mean())
                eval_sample = policy.sample(config.eval_batch, gen)
                rows.append(
                    (
                        step,
                        float(gold(eval_sample).mean()),
                        float(loss),
                        float(proxy(held_out).mean()),
                        # An MC estimate of a KL can dip below 0 by noise; KL itself cannot.
                        max(kl, 0.0),
                        float(gold(held_out).mean()),
                    )
                )
        if step < config.steps:
            opt.zero_grad()
            loss.backward()
            opt.step()

    cols = list(zip(*rows, strict=True))
    gold_curve = np.array(cols[5])
    return CurveTrace(
        run_id=config.run_id(),
        step=np.array(cols[0], dtype=np.int64),
        eval=np.array(cols[1]),
        loss=np.array(cols[2]),
        proxy=np.array(cols[3]),
        kl=np.array(cols[4]),
        gold=gold_curve,
        label=label_hacking(gold_curve),
        meta={
            "source": "micro_rlhf",
            "vocab": VOCAB,
            "length": LENGTH,
            **dataclasses.asdict(config),
        },
    )
