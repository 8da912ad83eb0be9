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
reference.  The held-out task ``trl-heldout`` (the TRL corpus's test runs under
one common map and fresh noise, floors tuned on its train runs) is scored
against the CurveOracle, with intervals over test runs; ``trl-gao``'s per-run
scaling and recorded replay leak (docs/CURVE_TRACES.md), so its row is kept
for the published figures only.  More stoppers (learned ones, your own) join as
``ReproduceOptions.extra_stoppers``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evalstop_gym.fileio import atomic_write
from evalstop_gym.parallel import Executor

from ..cells import EVALSTOP, Cell, base_env, env_sweep
from ..plan import Experiment, Plan, ReproduceOptions
from ..scoring import (
    HELDOUT_LEGEND,
    SCORE_LEGEND,
    StopperSpec,
    env_kwargs,
    markdown_table,
    score_task,
    suite_stoppers,
    write_scores,
)
from ..summary import find, num, pct, policies_of, prf, rows_of, sweep_values

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
        from evalstop_corpora.micro_rlhf.generate import generate_corpus

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
    """The corpora of E7's scores: suite task -> corpus JSONL (micro-RLHF only if given).

    The TRL corpus serves ``trl-gao`` and the held-out ``trl-heldout``.
    """
    from evalstop_gym.corpus.packaged import corpus_path

    corpora = {"micro-rlhf": str(micro)} if micro is not None else {}
    trl = str(corpus_path(TRL_CORPORA["quick" if quick else "default"]))
    corpora["trl-gao"] = trl
    corpora[HELDOUT_TASK] = trl
    return corpora


#: The held-out real-run task among E7's scores.
HELDOUT_TASK = "trl-heldout"


def _score_task(
    args: tuple[str, float, tuple[int, ...], tuple[int, ...], int | None, str, tuple[Any, ...]],
) -> list[dict[str, Any]]:
    """The suite's rows of one (corpus task, price): a module-level function for the workers."""
    task, factor, seeds, val_seeds, n_jobs, curves, extra = args
    kw = env_kwargs(task, factor, n_jobs, curves)
    stoppers = suite_stoppers(task, kw, val_seeds, extra)
    return [r.as_dict() for r in score_task(task, factor, kw, stoppers, seeds)]


def e7_scores(
    corpora: dict[str, str],
    *,
    quick: bool,
    seeds: int | None = None,
    n_jobs: int | None = None,
    executor: Executor | None = None,
    extra_stoppers: Sequence[StopperSpec] = (),
) -> list[dict[str, Any]]:
    """Normalised scores (NoStop = 0) of the suite's stoppers on each real corpus.

    The reference (1) is the Oracle on ``micro-rlhf`` and ``trl-gao``, the CurveOracle
    on the held-out ``trl-heldout``.

    One task per (corpus, price), fanned out through ``executor`` (``extra_stoppers``
    are picklable: they travel with the tasks).
    """
    mode = "quick" if quick else "default"
    n = seeds if seeds is not None else SCORE_SEEDS[mode]
    items = [
        (
            task,
            f,
            tuple(range(n)),
            SCORE_VALIDATION_SEEDS[mode],
            n_jobs,
            path,
            tuple(extra_stoppers),
        )
        for task, path in corpora.items()
        for f in SCORE_FACTORS[mode]
    ]
    rows = []
    for part in (executor or Executor(workers=1)).map(_score_task, items):
        for r in part:
            rows.append({"experiment": SCORES_ID, **r})
    return rows


#: The ``experiment`` of E7's score rows (their own REPORT.md section, after E7's).
SCORES_ID = "E7 scores"


def write_e7_scores(out: Path, rows: list[dict[str, Any]]) -> list[Path]:
    """Write ``OUT/E7_scores.csv`` and ``OUT/E7_scores.md``."""
    return write_scores(
        out, rows, "E7_scores", "E7: stoppers on real corpora (Oracle or CurveOracle = 1)"
    )


def scores_section(summary: list[dict[str, Any]]) -> list[str]:
    """REPORT.md's section of E7's scores (the rows whose experiment is :data:`SCORES_ID`)."""
    rows = [r for r in summary if r.get("experiment") == SCORES_ID]
    corpora = ", ".join(dict.fromkeys(r["task"] for r in rows))
    return [
        "## E7 — stoppers on real corpora, scored against the Oracle",
        "",
        f"Corpora: {corpora} (`micro-rlhf`: the micro-RLHF corpus above; `trl-gao`: the "
        "TRL GRPO corpus shipped with the package, each run scaled by its own peak and "
        "replayed with its recorded evals, which leak; `trl-heldout`: its test runs under "
        "one common map with fresh noise, floors tuned on its train runs, the CurveOracle "
        "= 1). " + SCORE_LEGEND + " " + HELDOUT_LEGEND,
        "",
        markdown_table(rows),
    ]


#: ``--quick``'s E7 corpus, shipped (``evalstop_gym/corpus/data``): the 24 micro-RLHF runs
#: ``--quick`` used to generate with torch (seed 0), byte for byte.
QUICK_CORPUS = "micro_rlhf_quick"


def build(out: Path, opts: ReproduceOptions, plan: Plan) -> None:
    """Generate (or read) a micro-RLHF corpus and rerun E1 and the noise sweep on it."""
    target = corpus_file(out, quick=opts.quick)
    if opts.curves is None and target.exists():
        plan.reused.add("E7")
    elif opts.curves is None and opts.quick:
        _copy_quick_corpus(target)
    elif opts.curves is None and not available():
        plan.notes.append(
            "E7 skipped: generating real curves needs torch (pip install -e '.[train]')."
        )
        return
    out.mkdir(parents=True, exist_ok=True)
    corpus = (
        Path(opts.curves)
        if opts.curves
        else ensure_corpus(out, quick=opts.quick, executor=opts.executor)
    )
    plan.cells += e7_cells(opts.overrides, corpus)
    info = corpus_summary(corpus)
    plan.header["E7 corpus"] = (
        f"{info['runs']} micro-RLHF runs, {info['hacking']} hacking; hacking peaks at "
        f"progress quartiles {', '.join(f'{v:.2f}' for v in info['peak_quartiles'])}; "
        f"Gao-law fit R² quartiles {', '.join(f'{v:.2f}' for v in info['gao_r2_quartiles'])}"
        + (" (shipped with the package: --quick does not generate it)" if opts.quick else "")
    )


def _copy_quick_corpus(target: Path) -> None:
    """Put the shipped quick corpus at ``target`` after checking its SHA-256 against its sidecar."""
    from evalstop_gym.corpus.packaged import corpus_path, load_corpus

    load_corpus(QUICK_CORPUS)  # raises if its bytes differ from the sidecar's SHA-256
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(target, corpus_path(QUICK_CORPUS).read_bytes())


def build_scores(out: Path, opts: ReproduceOptions, plan: Plan) -> None:
    """Every stopper on both real corpora, NoStop = 0 and the Oracle = 1."""
    micro = Path(opts.curves) if opts.curves else corpus_file(out, quick=opts.quick)
    corpora = score_corpora(micro if micro.exists() else None, quick=opts.quick)
    rows = e7_scores(
        corpora,
        quick=opts.quick,
        seeds=opts.seeds,
        n_jobs=opts.jobs_per_episode,
        executor=opts.executor,
        extra_stoppers=opts.extra_stoppers,
    )
    files = write_e7_scores(out, rows)
    plan.report_rows += rows
    plan.header["E7 scores"] = (
        f"stoppers on {', '.join(corpora)} against the Oracle: {files[-1].name}"
    )


def section(summary: list[dict[str, Any]]) -> list[str]:
    """REPORT.md's E7 section: P / R / FPR on real and synthetic curves, and where they differ."""
    rows = rows_of(summary, "E7")
    pols = policies_of(rows)
    settings = list(dict.fromkeys((s["variant"], s["value"]) for s in rows))
    lines = [
        f"## E7 — {EXPERIMENT.title}",
        "",
        "Real: RLHF jobs run on micro-RLHF curves (observed eval = the run's measured eval + "
        "extra σ). Synthetic: the `paper` calibration at the same σ.",
        "",
        "| curves | extra σ | "
        + " | ".join(f"{p.label} P / R / FPR" for p in pols)
        + " | EvalStop ΔJCT % | EvalStop regret |",
        "|---" * (len(pols) + 4) + "|",
    ]
    for variant, sigma in settings:
        cells = [prf(find(summary, "E7", p, sigma, variant)) for p in pols]
        ev = find(summary, "E7", EVALSTOP, sigma, variant)
        lines.append(
            f"| {variant} | {sigma:g} | "
            + " | ".join(cells)
            + f" | {pct(ev, 'd_jct_pct')} | {num(ev, 'mean_regret', 3)} |"
        )
    lines.append("")
    for sigma in sweep_values([s for s in rows if s["variant"] == "synthetic"]):
        for p in pols:
            a = find(summary, "E7", p, sigma, "synthetic")
            b = find(summary, "E7", p, sigma, "real")
            if not a or not b:
                continue
            diffs = []
            for m in ("precision", "recall", "fpr"):
                d = 100 * (b[m] - a[m])
                if not math.isnan(d) and abs(d) >= 10:
                    diffs.append(f"{m} {100 * a[m]:.0f} → {100 * b[m]:.0f} %")
            if diffs:
                lines.append(
                    f"- σ = {sigma:g}, {p.label}: real curves differ from synthetic ones: "
                    + "; ".join(diffs)
                    + "."
                )
    lines.append("")
    return lines


def _wanted(opts: ReproduceOptions, exp: Experiment) -> bool:
    return opts.wants("E7", opts.real_curves)


EXPERIMENT = Experiment(
    "E7",
    "Real micro-RLHF curves vs synthetic curves",
    7,
    build,
    wanted=_wanted,
    section=section,
    long=True,
    starting="generate (or read) a micro-RLHF corpus and rerun E1 and the noise sweep on it.",
    long_when_quick=False,
    work="corpus",
)
#: E7's scores: their own rows (experiment :data:`SCORES_ID`) and section, after E7's.
SCORES = Experiment(
    SCORES_ID,
    "Stoppers on real corpora, scored against the Oracle",
    7,
    build_scores,
    wanted=_wanted,
    section=scores_section,
    background=True,
    work="real_scores",
    listed=False,
)
