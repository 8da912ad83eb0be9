"""Why a regime's stopper scores miss the real runs': one factor changed at a time.

A fixed panel (:func:`evalstop_experiments.sim_to_real.build_panel`, built on the twin) is
scored against the CurveOracle, with the same test seeds, on a ladder of environments
between the published ``grounded`` regime and the real held-out runs:

* the regime as published (``grounded-0.05``), the twin, the real runs;
* the real runs with one replay setting changed: warp and jitter off, the recorded eval
  instead of fresh noise, the corpus's own hack share instead of the workload's;
* corpora mixing the two sides: the real test runs' healthy runs with the twin's hacking
  ones, and the reverse; and the real test runs of each trainer alone.

Each variant's change of every stopper's score is a row of docs/SIM_TO_REAL.md's table.
Corpora played whole (``curve_split="all"``) are scored with CIs over seeds
(:func:`~evalstop_experiments.sim_to_real.plain_scores`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalstop_gym.corpus.format import CurveTrace, write_traces
from evalstop_gym.corpus.packaged import ENGLISH_CORPUS, load_corpus
from evalstop_gym.corpus.split import split_runs

from .scoring import env_kwargs
from .sim_to_real import N_JOBS, REAL_TASK, TEST_SEEDS, TWIN_TASK, Member, SideScore, plain_scores
from .twin_fit import TWIN_CORPUS

#: The corpus's own hack share (100 of its 216 runs hack by its rule).
CORPUS_HACK_SHARE = 100 / 216


@dataclass(frozen=True)
class Variant:
    """One environment of the ladder: its name, what changed, and its env kwargs."""

    name: str
    change: str
    kwargs: dict[str, Any]


def _test_runs(name: str) -> list[CurveTrace]:
    traces = load_corpus(name)
    test = set(split_runs(traces).test)
    return [t for t in traces if t.run_id in test]


def _corpus_kwargs(path: Path, factor: float, n_jobs: int) -> dict[str, Any]:
    """The held-out task's settings replaying every run of ``path`` (no split)."""
    kw = env_kwargs(REAL_TASK, factor, n_jobs, curves=str(path))
    kw["curve_split"] = "all"
    return kw


def variants(out: str | Path, factor: float = 1.0, n_jobs: int = N_JOBS) -> list[Variant]:
    """The ladder at ``factor`` x the price; mixed corpora are written into ``out``."""
    out = Path(out)
    real, twin = _test_runs(ENGLISH_CORPUS), _test_runs(TWIN_CORPUS)
    base = env_kwargs(REAL_TASK, factor, n_jobs)
    files = {
        "real test runs": real,
        "twin test runs": twin,
        "real healthy + twin hacking": [t for t in real if not t.label]
        + [t for t in twin if t.label],
        "twin healthy + real hacking": [t for t in twin if not t.label]
        + [t for t in real if t.label],
    }
    for trainer in ("grpo", "rloo", "online_dpo"):
        files[f"real test runs: {trainer} only"] = [
            t for t in real if t.meta.get("trainer") == trainer
        ]
    out_v = [
        Variant(
            "grounded-0.05",
            "the published regime (parametric curves)",
            env_kwargs("grounded-0.05", factor, n_jobs),
        ),
        Variant(
            TWIN_TASK,
            "the twin's test runs, as the real task plays them",
            env_kwargs(TWIN_TASK, factor, n_jobs),
        ),
        Variant(REAL_TASK, "the real test runs (the task as published)", base),
        Variant(
            "warp, jitter off",
            "real runs, curve_warp = curve_jitter = 0",
            {**base, "curve_warp": 0.0, "curve_jitter": 0.0},
        ),
        Variant(
            "recorded eval",
            "real runs, their recorded 32-sample eval instead of fresh noise",
            {**base, "curve_noise": "recorded"},
        ),
        Variant(
            "corpus hack share",
            f"real runs, hack share {CORPUS_HACK_SHARE:.2f} instead of 0.6",
            {**base, "hack_fraction": round(CORPUS_HACK_SHARE, 4)},
        ),
    ]
    for i, (name, traces) in enumerate(files.items()):
        path = out / f"diagnosis-{i}.jsonl"
        write_traces(traces, path)
        out_v.append(
            Variant(name, f"{len(traces)} runs played whole", _corpus_kwargs(path, factor, n_jobs))
        )
    return out_v


def diagnose(
    panel: Sequence[Member],
    ladder: Sequence[Variant],
    seeds: Sequence[int] = TEST_SEEDS,
    progress: Callable[[str], None] | None = None,
) -> dict[str, dict[str, SideScore]]:
    """Every member's score on every variant (CIs over seeds)."""
    out = {}
    for v in ladder:
        out[v.name] = plain_scores(v.kwargs, panel, seeds)
        if progress:
            progress(f"diagnosis: {v.name}")
    return out


def diagnosis_markdown(
    scores: dict[str, dict[str, SideScore]], ladder: Sequence[Variant], against: str = REAL_TASK
) -> str:
    """Each variant's score per stopper, and its change against ``against``'s."""
    names = list(next(iter(scores.values())))
    head = "| variant | change | " + " | ".join(names) + " |"
    lines = [head, "|" + "---|" * (len(names) + 2)]
    ref = scores[against]
    for v in ladder:
        cells = []
        for n in names:
            s = scores[v.name][n]
            cells.append(
                f"{s.score:.2f}"
                if v.name == against
                else f"{s.score:.2f} ({s.score - ref[n].score:+.2f})"
            )
        lines.append(f"| {v.name} | {v.change} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


__all__ = ["CORPUS_HACK_SHARE", "Variant", "diagnose", "diagnosis_markdown", "variants"]
