"""E7: E1 and the noise sweep rerun on real micro-RLHF curves, beside the synthetic ones.

RLHF jobs draw their curves from a corpus of real (CPU, policy-gradient)
overoptimisation runs (``SimConfig(curves=...)``); the observed eval is the
run's own measured eval plus ``sigma`` of extra noise.  The corpus is
generated into ``OUT/curves/traces.jsonl`` (or given with ``--curves``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evalstop_gym.parallel import Executor

from .experiments import Cell, base_env, env_sweep

#: Extra eval noise on top of the measured eval (0: the runs' own noise only).
REAL_SIGMAS = (0.0, 0.02, 0.05, 0.12)
SYNTHETIC_SIGMAS = (0.02, 0.05, 0.12)
CORPUS_RUNS = {"quick": 24, "default": 252}


def available() -> bool:
    """Whether torch is installed (generating a corpus needs it)."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def ensure_corpus(out: Path, *, quick: bool, executor: Executor | None = None) -> Path:
    """The corpus file, generated once per output folder (reused afterwards)."""
    path = out / "curves" / f"traces_{CORPUS_RUNS['quick' if quick else 'default']}.jsonl"
    if not path.exists():
        from evalstop_gym.corpus.generators.micro_rlhf.generate import generate_corpus

        path.parent.mkdir(parents=True, exist_ok=True)
        generate_corpus(
            CORPUS_RUNS["quick" if quick else "default"],
            path,
            seed=0,
            executor=executor,
            progress=False,
        )
    return path


def e7_cells(overrides: dict[str, Any], corpus: Path) -> list[Cell]:
    """E1 and the noise sweep on synthetic curves, then on the corpus's real curves."""
    env0 = base_env(overrides)
    real = {**env0, "curves": str(corpus)}
    return env_sweep("E7", env0, "eval_noise", SYNTHETIC_SIGMAS, variant="synthetic") + env_sweep(
        "E7", real, "eval_noise", REAL_SIGMAS, variant="real"
    )


def corpus_summary(corpus: Path) -> dict[str, Any]:
    """How many runs hack, where they peak, and how well the Gao law fits."""
    import numpy as np

    from evalstop_gym.corpus import fit_gao_trace, peak_progress, read_traces

    traces = read_traces(corpus)
    hack = [t for t in traces if t.label]
    peaks = [peak_progress(t.gold, t.step) for t in hack]
    r2 = [fit_gao_trace(t).r2 for t in traces if t.kl is not None]
    q = (lambda x: [float(v) for v in np.quantile(x, [0.25, 0.5, 0.75])]) if traces else None
    return {
        "runs": len(traces),
        "hacking": len(hack),
        "peak_quartiles": q(peaks) if peaks else [],
        "gao_r2_quartiles": q([v for v in r2 if np.isfinite(v)]) if r2 else [],
    }
