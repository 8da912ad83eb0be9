"""Micro-RLHF: real, CPU-sized reward-model over-optimisation runs (Gao et al. in miniature).

Submodules: :mod:`~evalstop_corpora.micro_rlhf.model` (gold reward, base distribution, GRU policy,
proxy reward model), :mod:`~evalstop_corpora.micro_rlhf.train` (one run: :func:`run_micro_rlhf`) and
:mod:`~evalstop_corpora.micro_rlhf.generate` (parallel corpus generation, Gao-law fits, the
``curves`` command line). Importing this package does not import torch.
"""

__all__ = ["MicroRLHFConfig", "generate_corpus", "run_micro_rlhf"]


def __getattr__(name: str) -> object:
    # Lazy: `evalstop-gym --help` imports the package, and torch takes a second to import.
    if name in ("MicroRLHFConfig", "run_micro_rlhf"):
        from evalstop_corpora.micro_rlhf import train

        return getattr(train, name)
    if name == "generate_corpus":
        from evalstop_corpora.micro_rlhf.generate import generate_corpus

        return generate_corpus
    raise AttributeError(f"module 'evalstop_corpora.micro_rlhf' has no attribute {name!r}")
