"""TRL runs: Gao et al.'s over-optimisation set-up in miniature, trained by TRL's GRPOTrainer.

Submodules: :mod:`~evalstop_corpora.trl.world` (words, gold reward, tokenizer,
base LM), :mod:`~evalstop_corpora.trl.proxy` (Bradley-Terry proxy reward model),
:mod:`~evalstop_corpora.trl.run` (one GRPO run and its gold-eval callback:
:func:`run_trl`) and :mod:`~evalstop_corpora.trl.generate` (a corpus of runs, the
``curves generate --source trl`` command). Needs the ``trl`` extra (``pip install -e
".[trl]"``); importing this package imports none of torch, transformers or TRL.
"""

__all__ = ["TRLRunConfig", "generate_trl_corpus", "run_trl", "trl_specs"]


def __getattr__(name: str) -> object:
    # Lazy: transformers and TRL take seconds to import.
    if name in ("TRLRunConfig", "run_trl"):
        from evalstop_corpora.trl import run

        return getattr(run, name)
    if name in ("generate_trl_corpus", "trl_specs"):
        from evalstop_corpora.trl import generate

        return getattr(generate, name)
    raise AttributeError(f"module 'evalstop_corpora.trl' has no attribute {name!r}")
