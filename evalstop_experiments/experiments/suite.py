"""E8, the benchmark suite: normalised scores of stoppers on the named tasks.

For each task (``evalstop_gym.suite_task``) and each price (the suite's price
times 1/2, 1, 2), every stopper runs the same test seeds through ``EvalStop-v0``
and is scored by

    score = mean_s (U_s - U0_s) / mean_s (Uref_s - U0_s)

with U the episode's utility (the env's return), U0 NoStop's (a practitioner
who runs every job to the end and keeps its best eval checkpoint) and Uref the
reference: the Bayes stopper on synthetic tasks, the privileged Oracle on real
corpora (named in every table).  The 95 % interval is a paired percentile
bootstrap over seeds.  ΔJCT (mean JCT against NoStop's, %) is shown beside
each score: the utility counts a job's own GPU-hours, not the queueing its
stop spares the others.

The floors (best StopAt-p, first-eval gate) and the CUSUM detector are tuned
on validation seeds disjoint from the test seeds, per task and price, by the
utility they would reach.  Tuning is exact and cheap: each of these stoppers
decides a job from that job's own observations, and a job's utility term
depends only on where it ends, so a candidate is scored from every job's
observation sequence without running the cluster.

Learned stoppers join through :data:`EXTRA_STOPPERS` (a later issue).
"""

from __future__ import annotations

import argparse
import csv
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

import evalstop_gym  # noqa: F401  (registers EvalStop-v0)
from baselines.bayes import BayesStopper
from baselines.changepoint import Cusum
from baselines.floors import FirstEvalGate
from baselines.oracle import Oracle
from baselines.policies import EvalStop, LossPlateau, NoStop, Policy, StopAtProgress
from evalstop_gym.envs.evalstop import EvalStopEnv
from evalstop_gym.sim.metrics import METRIC_KEYS, honest_metrics, stop_values
from evalstop_gym.suite import PACKAGED_TASKS, PRICE_FACTORS, SUITE_TASKS, suite_task

#: Hook for the learned stoppers of the next issue: name -> factory(task, env kwargs) -> Policy.
EXTRA_STOPPERS: dict[str, Callable[[str, dict[str, Any]], Policy]] = {}

#: Seeds the floors are tuned on (disjoint from the test seeds 0..n-1).
VALIDATION_SEEDS: tuple[int, ...] = tuple(range(1000, 1006))
STOP_AT_GRID: tuple[float, ...] = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
GATE_QUANTILES: tuple[float, ...] = (0.2, 0.4, 0.6, 0.8)
CUSUM_THRESHOLDS: tuple[float, ...] = (0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5)
CUSUM_DRIFTS: tuple[float, ...] = (0.0, 0.01, 0.03)


@dataclass
class JobObs:
    """The observation sequence of one job (one obs per decision) and its stop values."""

    obs: list[dict[str, np.ndarray]]
    values: np.ndarray  # (K,) utility term if the job ends after checkpoint i


def env_kwargs(task: str, factor: float = 1.0, n_jobs: int | None = None, curves=None) -> dict:
    """The task's env kwargs at ``factor`` x the suite's price."""
    kw = suite_task(task, curves=curves)
    kw["gpu_hour_price"] = kw["gpu_hour_price"] * factor
    if n_jobs is not None:
        kw["n_jobs"] = n_jobs
    return kw


def job_observations(kw: dict[str, Any], seed: int) -> list[JobObs]:
    """Every job's observations, built as the env builds them, without running the cluster."""
    env = gym.make("EvalStop-v0", disable_env_checker=True, **kw)
    env.reset(seed=seed)
    base: EvalStopEnv = env.unwrapped  # type: ignore[assignment]
    sim = base.sim
    assert sim is not None
    c, b = sim.curves, sim.batch
    values = stop_values(
        c.true_eval,
        c.obs_eval,
        b.gpus * b.duration_h,
        kw["gpu_hour_price"],
        sim.deliver_best,
        sim.step_frac,
    )
    out = []
    for j in range(sim.n_jobs):
        seq = [base.observation_at(j, i) for i in range(1, sim.n_ckpt)]
        out.append(JobObs(seq, values[j]))
    env.close()
    return out


def offline_utility(policy: Policy, jobs: Sequence[JobObs]) -> float:
    """The utility ``policy`` reaches on these jobs (exact for a per-job stopper)."""
    total = 0.0
    for job in jobs:
        end = len(job.values)
        for i, obs in enumerate(job.obs, start=1):
            if policy.act(obs):
                end = i
                break
        total += job.values[end - 1] - job.values[0]
    return total


def tune(candidates: Iterable[Policy], episodes: Sequence[Sequence[JobObs]]) -> Policy:
    """The candidate with the highest utility summed over the validation episodes."""
    best, best_u = None, -math.inf
    for pol in candidates:
        u = sum(offline_utility(pol, jobs) for jobs in episodes)
        if u > best_u:
            best, best_u = pol, u
    assert best is not None
    return best


def gate_candidates(episodes: Sequence[Sequence[JobObs]]) -> list[Policy]:
    """First-eval gates: every stop progress x thresholds at quantiles of the first evals."""
    firsts = [
        float(np.mean(FirstEvalGate(0.5, 0.0).first_evals(j.obs[-1])))
        for jobs in episodes
        for j in jobs
        if int(np.argmax(j.obs[0]["job_type"])) == 2
    ]
    thresholds = np.quantile(firsts, GATE_QUANTILES) if firsts else [0.0]
    return [FirstEvalGate(p, float(t)) for p in STOP_AT_GRID for t in thresholds]


def tuned_stoppers(kw: dict[str, Any], val_seeds: Sequence[int]) -> dict[str, Policy]:
    """The floors and CUSUM, tuned on ``val_seeds`` for these env kwargs."""
    episodes = [job_observations(kw, s) for s in val_seeds]
    return {
        "StopAt (tuned)": tune((StopAtProgress(p) for p in STOP_AT_GRID), episodes),
        "Gate (tuned)": tune(gate_candidates(episodes), episodes),
        "CUSUM (tuned)": tune(
            (Cusum(h, d) for h in CUSUM_THRESHOLDS for d in CUSUM_DRIFTS), episodes
        ),
    }


def stop_positions(record: Any) -> tuple[np.ndarray, np.ndarray]:
    """(end − true-peak progress of each hacking run, end progress of each healthy run)."""
    end = record.ckpt_done / record.n_ckpt
    hack = record.hacking.astype(bool)
    return end[hack] - record.peak_progress[hack], end[~hack]


def play(kw: dict[str, Any], seed: int, policy: Policy | None) -> dict[str, Any]:
    """One episode of ``policy`` (None: the privileged Oracle): utility, metrics, stop positions.

    ``stop_positions`` holds :func:`stop_positions` of the episode.
    """
    env = gym.make("EvalStop-v0", disable_env_checker=True, **kw)
    obs, _ = env.reset(seed=seed)
    sim = env.unwrapped.sim  # type: ignore[attr-defined]
    oracle = Oracle(sim, kw["gpu_hour_price"]) if policy is None else None
    if policy is not None:
        policy.reset()
    done = False
    while not done:
        action = oracle.act_pending() if oracle is not None else policy.act(obs)  # type: ignore[union-attr]
        obs, _, done, _, info = env.step(action)
    # The env leaves an undefined metric out of info: rows are numeric, so NaN.
    m: dict[str, Any] = dict.fromkeys(METRIC_KEYS, math.nan)
    m.update(info["episode_metrics"])
    record = sim.record()
    m["stop_positions"] = stop_positions(record)
    m.update(
        honest_metrics(
            record,
            sim.curves.obs_eval,
            kw["gpu_hour_price"],
            sim.deliver_best,
            sim.step_frac,
        )
    )
    env.close()
    return m


def normalised_score(
    u: Sequence[float],
    u0: Sequence[float],
    uref: Sequence[float],
    n_boot: int = 2000,
    seed: int = 0,
) -> tuple[float, float, float]:
    """(score, low, high): mean(U - U0) / mean(Uref - U0) and its 95 % paired bootstrap CI.

    Seeds are resampled together (the three arrays are paired by seed).
    """
    u, u0, uref = (np.asarray(a, dtype=float) for a in (u, u0, uref))
    num, den = u - u0, uref - u0
    score = float(num.mean() / den.mean())
    idx = np.random.default_rng(seed).integers(0, len(u), size=(n_boot, len(u)))
    boot = num[idx].mean(axis=1) / den[idx].mean(axis=1)
    lo, hi = np.percentile(boot, [2.5, 97.5])
    return score, float(lo), float(hi)


def paired_diff_ci(
    u: Sequence[float], u0: Sequence[float], n_boot: int = 2000, seed: int = 0
) -> tuple[float, float, float]:
    """Mean of U - U0 over seeds and its 95 % bootstrap CI."""
    d = np.asarray(u, dtype=float) - np.asarray(u0, dtype=float)
    idx = np.random.default_rng(seed).integers(0, len(d), size=(n_boot, len(d)))
    lo, hi = np.percentile(d[idx].mean(axis=1), [2.5, 97.5])
    return float(d.mean()), float(lo), float(hi)


def stoppers_for(task: str, kw: dict[str, Any], factor: float, val_seeds) -> dict[str, Any]:
    """Every stopper of E8 for one task and price (None stands for the Oracle)."""
    stoppers: dict[str, Any] = {"NoStop": NoStop()}
    stoppers.update(tuned_stoppers(kw, val_seeds))
    stoppers["LossPlateau"] = LossPlateau()
    stoppers["EvalStop(k=2)"] = EvalStop(2)
    for name, factory in EXTRA_STOPPERS.items():
        stoppers[name] = factory(task, kw)
    stoppers["Bayes"] = BayesStopper.from_env_kwargs(kw)
    stoppers["Oracle"] = None
    return stoppers


def run_task(
    task: str,
    factor: float,
    seeds: Sequence[int],
    val_seeds: Sequence[int] = VALIDATION_SEEDS,
    n_jobs: int | None = None,
    curves: str | None = None,
    positions: dict[tuple[str, float, str], tuple[np.ndarray, np.ndarray]] | None = None,
) -> list[dict[str, Any]]:
    """Rows (one per stopper) of one task at one price: score, CI, ΔJCT and metrics.

    ``positions``, if given, receives each stopper's stop positions pooled over
    seeds under ``(task, factor, stopper)`` (see :func:`stop_positions`).
    """
    kw = env_kwargs(task, factor, n_jobs, curves)
    stoppers = stoppers_for(task, kw, factor, val_seeds)
    runs = {name: [play(kw, s, pol) for s in seeds] for name, pol in stoppers.items()}
    if positions is not None:
        for name, rs in runs.items():
            positions[(task, factor, name)] = tuple(  # type: ignore[assignment]
                np.concatenate([r["stop_positions"][i] for r in rs]) for i in (0, 1)
            )
    ref = "Oracle" if kw.get("curves") else "Bayes"
    u0 = [r["utility"] for r in runs["NoStop"]]
    uref = [r["utility"] for r in runs[ref]]
    jct0 = np.mean([r["mean_jct_h"] for r in runs["NoStop"]])
    rows = []
    for name, pol in stoppers.items():
        u = [r["utility"] for r in runs[name]]
        score, lo, hi = normalised_score(u, u0, uref)
        diff, dlo, dhi = paired_diff_ci(u, u0)
        mean = {k: _nanmean([r[k] for r in runs[name]]) for k in METRIC_COLUMNS}
        rows.append(
            {
                "task": task,
                "price_factor": factor,
                "gpu_hour_price": kw["gpu_hour_price"],
                "stopper": name,
                "params": "privileged" if pol is None else repr(pol),
                "reference": ref,
                "seeds": len(seeds),
                "score": score,
                "score_lo": lo,
                "score_hi": hi,
                "u_minus_u0": diff,
                "u_minus_u0_lo": dlo,
                "u_minus_u0_hi": dhi,
                "delta_jct_pct": 100.0 * (mean["mean_jct_h"] - jct0) / jct0,
                **mean,
            }
        )
    return rows


def _nanmean(values: Sequence[float]) -> float:
    """Mean over the defined values (NaN, without a warning, when there are none)."""
    x = np.asarray(values, dtype=float)
    x = x[~np.isnan(x)]
    return float(x.mean()) if len(x) else float("nan")


#: Per-episode metrics averaged over seeds in every row.
METRIC_COLUMNS: tuple[str, ...] = (
    "utility",
    "mean_jct_h",
    "precision",
    "recall",
    "fpr",
    "fpr_rlhf",
    "recall_after_peak",
    "stops_before_peak_frac",
    "killed_healthy_gpu_hours",
    "total_gpu_hours",
    "wasted_gpu_hours",
    "regret_vs_oracle",
)


def run_e8(
    tasks: Sequence[str] = SUITE_TASKS,
    seeds: Sequence[int] = range(10),
    factors: Sequence[float] = PRICE_FACTORS,
    n_jobs: int | None = None,
    curves: str | None = None,
    val_seeds: Sequence[int] = VALIDATION_SEEDS,
    progress: Callable[[str], None] | None = None,
    positions: dict[tuple[str, float, str], tuple[np.ndarray, np.ndarray]] | None = None,
) -> list[dict[str, Any]]:
    """Every (task, price) of the suite; a corpus task (``micro-rlhf``) joins if ``curves``.

    ``positions``: see :func:`run_task`.
    """
    tasks = list(tasks) + (["micro-rlhf"] if curves and "micro-rlhf" not in tasks else [])
    rows: list[dict[str, Any]] = []
    for task in tasks:
        for f in factors:
            if progress is not None:
                progress(f"E8 {task} at {f:g}x price")
            # a shipped corpus task keeps its own corpus; ``curves`` is micro-rlhf's
            own = None if task in PACKAGED_TASKS else curves
            extra = {} if positions is None else {"positions": positions}
            rows += run_task(task, f, seeds, val_seeds, n_jobs, own, **extra)
    return rows


def _fmt(x: float, digits: int = 2) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def markdown_table(rows: Sequence[dict[str, Any]]) -> str:
    """The suite table: one line per task and stopper, one score column per price."""
    factors = sorted({r["price_factor"] for r in rows})
    head = ["task", "ref", "stopper"] + [f"score @ {f:g}× [95 % CI]" for f in factors]
    head += [f"ΔJCT % @ {f:g}×" for f in factors]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    keyed = {(r["task"], r["stopper"], r["price_factor"]): r for r in rows}
    seen: list[tuple[str, str]] = []
    for r in rows:
        if (r["task"], r["stopper"]) not in seen:
            seen.append((r["task"], r["stopper"]))
    for task, stopper in seen:
        cells = [task, keyed[(task, stopper, factors[0])]["reference"], stopper]
        for f in factors:
            r = keyed.get((task, stopper, f))
            cells.append(
                "–"
                if r is None
                else f"{_fmt(r['score'])} [{_fmt(r['score_lo'])}, {_fmt(r['score_hi'])}]"
            )
        for f in factors:
            r = keyed.get((task, stopper, f))
            cells.append("–" if r is None else _fmt(r["delta_jct_pct"], 1))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


#: What a table of normalised scores means (E8.md, E7_scores.md, REPORT.md).
SCORE_LEGEND = (
    "Normalised score (U − U0) / (Uref − U0): 0 = NoStop keeping each run's best "
    "checkpoint, 1 = the reference (`ref`: Bayes on synthetic tasks, the privileged "
    "Oracle on real corpora); 95 % paired bootstrap CI over seeds. ΔJCT: mean JCT "
    "against NoStop's."
)


def write_scores(
    out: str | Path,
    rows: Sequence[dict[str, Any]],
    stem: str,
    title: str,
    figures: Sequence[Path] = (),
) -> list[Path]:
    """Write ``<stem>.csv`` (every column) and ``<stem>.md`` (the table, ``figures`` below it)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    csv_path, md_path = out / f"{stem}.csv", out / f"{stem}.md"
    with csv_path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    md_path.write_text(
        f"# {title}\n\n{SCORE_LEGEND}\n\n"
        + markdown_table(rows)
        + "".join(f"\n![{p.stem}]({p.name})\n" for p in figures)
    )
    return [csv_path, md_path]


def write_e8(
    out: str | Path, rows: Sequence[dict[str, Any]], figures: Sequence[Path] = ()
) -> list[Path]:
    """Write ``E8.csv`` (every column) and ``E8.md`` (the suite table, ``figures`` below it)."""
    return write_scores(out, rows, "E8", "E8: the benchmark suite", figures)


def add_suite_arguments(parser: argparse.ArgumentParser) -> None:
    """``--suite``, ``--tasks`` and ``--out`` of ``evalstop-gym benchmark``."""
    g = parser.add_argument_group("benchmark suite (E8)")
    g.add_argument("--suite", action="store_true", help="run the suite: normalised scores")
    g.add_argument(
        "--tasks", default=None, help=f"comma-separated tasks (default {','.join(SUITE_TASKS)})"
    )
    g.add_argument("--out", default="results-suite", help="folder of E8.csv and E8.md")


def cmd_suite(args: argparse.Namespace) -> int:
    """``evalstop-gym benchmark --suite``: run E8, print the table, write CSV + Markdown.

    ``--curves PATH`` adds the micro-RLHF corpus task; ``--n-jobs`` shrinks episodes.
    """
    tasks = args.tasks.split(",") if args.tasks else SUITE_TASKS
    rows = run_e8(
        tasks,
        range(args.seeds),
        n_jobs=getattr(args, "env_n_jobs", None),
        curves=getattr(args, "env_curves", None),
        progress=lambda s: print(s, flush=True),
    )
    print(markdown_table(rows))
    for path in write_e8(args.out, rows):
        print(f"wrote {path}")
    return 0


#: Seeds of E8 in ``reproduce`` (quick / default): paired CIs need far fewer than E1.
E8_SEEDS = {"quick": 3, "default": 10}


def reproduce_e8(
    out: str | Path,
    *,
    quick: bool = False,
    seeds: int | None = None,
    n_jobs: int | None = None,
    curves: str | None = None,
) -> list[Path]:
    """E8 inside ``evalstop-gym reproduce``: the suite table as ``OUT/E8.csv`` and ``OUT/E8.md``.

    Quick runs one task (``hard-0.12``) on 100-job episodes (or ``n_jobs``).
    """
    n = seeds if seeds is not None else E8_SEEDS["quick" if quick else "default"]
    tasks = ("hard-0.12",) if quick else SUITE_TASKS
    jobs = n_jobs if n_jobs is not None else (100 if quick else None)
    positions: dict[tuple[str, float, str], tuple[np.ndarray, np.ndarray]] = {}
    rows = run_e8(tasks, range(n), n_jobs=jobs, curves=curves, positions=positions)
    figures = stop_position_figures(out, positions)
    return write_e8(out, rows, figures) + figures


def stop_position_figures(
    out: str | Path, positions: dict[tuple[str, float, str], tuple[np.ndarray, np.ndarray]]
) -> list[Path]:
    """``OUT/E8_stops_<task>.png``: where every stopper ends runs, per task at 1x price."""
    from .plots import plot_stop_positions

    paths = []
    for task in dict.fromkeys(t for t, _, _ in positions):
        per = {name: pos for (t, f, name), pos in positions.items() if t == task and f == 1.0}
        if per:
            path = Path(out) / f"E8_stops_{task}.png"
            title = f"E8 {task} (1x price): where each stopper ends runs, pooled over seeds"
            paths.append(plot_stop_positions(per, path, title))
    return paths
