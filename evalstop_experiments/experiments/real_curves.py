"""E7: E1 and the noise sweep rerun on real micro-RLHF curves, beside the synthetic ones.

RLHF jobs draw their curves from a corpus of real (CPU, policy-gradient)
overoptimisation runs (``SimConfig(curves=...)``); the observed eval is the
run's own measured eval plus ``sigma`` of extra noise.  The corpus is
generated into ``OUT/curves/traces.jsonl`` (or given with ``--curves``).

E7's scores (:func:`e7_scores`): on both real corpora (the micro-RLHF one and
the TRL corpus shipped with the package, suite tasks ``micro-rlhf`` and
``trl-gao``) every stopper of E8 is scored as in E8, between NoStop with
``deliver="best"`` (0) and the privileged Oracle (1): the Bayes stopper's curve
family does not describe these runs, so it is one stopper among others, not the
reference.  Learned stoppers join through :data:`evalstop_experiments.e8.EXTRA_STOPPERS`.
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
#: E7's scores (quick / default): seeds per (corpus, price), validation seeds, prices.
SCORE_SEEDS = {"quick": 3, "default": 10}
SCORE_VALIDATION_SEEDS = {"quick": (1000, 1001), "default": tuple(range(1000, 1006))}
SCORE_FACTORS: dict[str, tuple[float, ...]] = {"quick": (1.0,), "default": (0.5, 1.0, 2.0)}
#: Shipped TRL corpus of E7's scores (quick / default).
TRL_CORPORA = {"quick": "trl_gao_quick", "default": "trl_gao"}


def available() -> bool:
    """Whether torch is installed (generating a corpus needs it)."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def corpus_file(out: Path, *, quick: bool) -> Path:
    """Where :func:`ensure_corpus` puts the micro-RLHF corpus of ``OUT``."""
    return out / "curves" / f"traces_{CORPUS_RUNS['quick' if quick else 'default']}.jsonl"


def ensure_corpus(out: Path, *, quick: bool, executor: Executor | None = None) -> Path:
    """The corpus file, generated once per output folder (reused afterwards)."""
    path = corpus_file(out, quick=quick)
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


def score_corpora(micro: Path | None, *, quick: bool) -> dict[str, str]:
    """The corpora of E7's scores: suite task -> corpus JSONL (micro-RLHF only if given)."""
    from evalstop_gym.corpus.packaged import corpus_path

    corpora = {"micro-rlhf": str(micro)} if micro is not None else {}
    corpora["trl-gao"] = str(corpus_path(TRL_CORPORA["quick" if quick else "default"]))
    return corpora


def _score_task(args: tuple[str, float, tuple[int, ...], tuple[int, ...], int | None, str]):
    """E8's rows of one (corpus task, price): a module-level function for the workers."""
    from . import e8

    task, factor, seeds, val_seeds, n_jobs, curves = args
    return e8.run_task(task, factor, seeds, val_seeds, n_jobs, curves)


def e7_scores(
    corpora: dict[str, str],
    *,
    quick: bool,
    seeds: int | None = None,
    n_jobs: int | None = None,
    executor: Executor | None = None,
) -> list[dict[str, Any]]:
    """Normalised scores (Oracle = 1, NoStop = 0) of E8's stoppers on each real corpus.

    One task per (corpus, price), fanned out through ``executor``.  A learned
    stopper registered in :data:`~evalstop_experiments.e8.EXTRA_STOPPERS` at run
    time is not seen by pool workers, so the tasks then run in this process.
    """
    from . import e8

    mode = "quick" if quick else "default"
    n = seeds if seeds is not None else SCORE_SEEDS[mode]
    items = [
        (task, f, tuple(range(n)), SCORE_VALIDATION_SEEDS[mode], n_jobs, path)
        for task, path in corpora.items()
        for f in SCORE_FACTORS[mode]
    ]
    if e8.EXTRA_STOPPERS or executor is None:
        executor = Executor(workers=1)
    rows = []
    for part in executor.map(_score_task, items):
        for r in part:
            rows.append({"experiment": SCORES_ID, **r})
    return rows


#: The ``experiment`` of E7's score rows (their own REPORT.md section, after E7's).
SCORES_ID = "E7 scores"


def write_e7_scores(out: Path, rows: list[dict[str, Any]]) -> list[Path]:
    """Write ``OUT/E7_scores.csv`` and ``OUT/E7_scores.md``."""
    from . import e8

    return e8.write_scores(out, rows, "E7_scores", "E7: stoppers on real corpora, Oracle = 1")


def scores_section(summary: list[dict[str, Any]]) -> list[str]:
    """REPORT.md's section of E7's scores (the rows whose experiment is :data:`SCORES_ID`)."""
    from . import e8

    rows = [r for r in summary if r.get("experiment") == SCORES_ID]
    corpora = ", ".join(dict.fromkeys(r["task"] for r in rows))
    return [
        "## E7 — stoppers on real corpora, scored against the Oracle",
        "",
        f"Corpora: {corpora} (`micro-rlhf`: the micro-RLHF corpus above; `trl-gao`: the "
        "TRL GRPO corpus shipped with the package). " + e8.SCORE_LEGEND,
        "",
        e8.markdown_table(rows),
    ]
