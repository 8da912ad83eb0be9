"""The Bayes stopper's decisions per CPU second, beside EvalStop's on the same episode.

    python benchmarks/speed/bench_bayes.py [--reps 7] [--task hard-0.12]
    python benchmarks/speed/bench_bayes.py --lengths 20,100,400,2000 [--tasks hard-0.12,grounded-0.05]

One 200-job episode of a suite task (seed 0; ``hard-0.12`` by default, or e.g.
``grounded-0.05``, whose family simulates all 200 hypotheses and weighs probes),
played through ``Simulator.run`` by the Bayes stopper, by the same stopper with its
shortcut off (every decision through the full look-ahead), by the stopper with the
look-ahead's first form (a Python loop over the future checkpoints, the frozen
reference in ``tests/oracles/reference_bayes.py``, which never takes the shortcut)
and by ``KDeclineRule(2)``; process CPU time, interleaved rounds
(``timing.alternating``), min and median.  Prints decisions/s of each and the
ratios; the target is Bayes >= 0.06x EvalStop's decisions/s on ``hard-0.12``.

``--lengths``: the cost of a decision on runs of K checkpoints (the task's family and
settings, K evals a job), each K in a process of its own: the CPU milliseconds of a
decision (mean and 99th percentile over the prefixes of 8 jobs' runs, sampled evenly
along them), its ratio to the same task's K = 20 decision (tabled, measured in the same
process in interleaved rounds), and the peak memory the stopper adds (built after the
prefixes are drawn).  Runs of at most 20 checkpoints are tabled, longer ones served from
sufficient statistics; beyond 150 the look-ahead weighs the far future in blocks.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from timing import alternating

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # this checkout's package and its frozen references

from baselines.bayes import BayesStopper  # noqa: E402
from evalstop_gym import KDeclineRule, Simulator  # noqa: E402
from evalstop_gym.sim.calibration import get_calibration  # noqa: E402
from evalstop_gym.suite import suite_config  # noqa: E402
from tests.oracles.reference_bayes import ReferenceBayes  # noqa: E402

TARGET = 0.06
#: ``--lengths``: jobs whose runs are cut into prefixes, and prefixes per job at most.
LENGTH_JOBS = 8
LENGTH_PREFIXES = 60


def _at_length(task: str, k: int):
    """The task's config and Bayes stopper with every job running ``k`` checkpoints."""
    config = suite_config(task)
    sim = config.sim_config
    cal = dataclasses.replace(get_calibration(sim.calibration), evals_per_job=k)
    sim = dataclasses.replace(sim, calibration=cal, n_jobs=LENGTH_JOBS)
    config = dataclasses.replace(config, sim_config=sim)
    return config, lambda: BayesStopper.from_config(config)


def _prefixes(config) -> list:
    """(job type, evals) at up to LENGTH_PREFIXES checkpoints of each job, spread evenly."""
    k = get_calibration(config.sim_config.calibration).evals_per_job
    keep = set(np.unique(np.linspace(1, k - 1, min(LENGTH_PREFIXES, k - 1)).round().astype(int)))
    seen: list = []

    def record(view) -> bool:
        if len(view.evals) in keep:
            seen.append((view.job_type, np.fromiter(view.evals, float)))
        return False

    Simulator(config.sim_config, 0).run(record)
    return seen


def one_length(task: str, k: int, reps: int) -> dict:
    """Per-decision CPU ms at ``k`` checkpoints and at 20, and the stopper's extra peak RSS."""
    config, build = _at_length(task, k)
    ref_config, ref_build = _at_length(task, 20)
    prefixes, ref_prefixes = _prefixes(config), _prefixes(ref_config)
    ref = ref_build()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.process_time()
    stopper = build()
    built = time.process_time() - t0

    def decide_all(s, items):
        def run() -> list[float]:
            out = []
            for job_type, evals in items:
                t = time.process_time()
                s.decide(job_type, evals)
                out.append(time.process_time() - t)
            return out

        return run

    res = alternating(
        {"K": decide_all(stopper, prefixes), "20": decide_all(ref, ref_prefixes)}, reps
    )
    extra = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    means = {name: [1e3 * float(np.mean(r)) for r in runs] for name, runs in res.items()}
    per = np.concatenate(res["K"]) * 1e3
    return {
        "task": task,
        "k": k,
        "decisions": len(prefixes),
        "ms_min": min(means["K"]),
        "ms_median": statistics.median(means["K"]),
        "ms_p99": float(np.percentile(per, 99)),
        "ratio_min": min(means["K"]) / min(means["20"]),
        "ratio_median": statistics.median(a / b for a, b in zip(means["K"], means["20"])),
        "build_s": built,
        "extra_rss_mb": extra / 1024,
    }


def lengths(tasks: list[str], ks: list[int], reps: int) -> None:
    """Each (task, K) in a fresh process; one line each."""
    print(f"{LENGTH_JOBS} jobs a run, seed 0, {reps} interleaved rounds; CPU ms per decision")
    print(
        f"{'task':14s} {'K':>6s} {'decisions':>9s} {'ms min':>8s} {'median':>8s} {'p99':>8s} "
        f"{'x K=20 (min/med)':>17s} {'build s':>8s} {'extra RSS':>10s}"
    )
    for task in tasks:
        for k in ks:
            cmd = [sys.executable, __file__, "--one-length", str(k), "--task", task]
            out = subprocess.run(
                [*cmd, "--reps", str(reps)], capture_output=True, text=True, check=True
            )
            r = json.loads(out.stdout.strip().splitlines()[-1])
            print(
                f"{task:14s} {k:6d} {r['decisions']:9d} {r['ms_min']:8.2f} {r['ms_median']:8.2f} "
                f"{r['ms_p99']:8.2f} {r['ratio_min']:8.1f}/{r['ratio_median']:<8.1f} "
                f"{r['build_s']:8.2f} {r['extra_rss_mb']:7.0f} MB",
                flush=True,
            )


def main() -> None:
    """Time the stoppers and print decisions/s and the ratios."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--task", default="hard-0.12")
    ap.add_argument("--lengths", help="comma-separated run lengths K, e.g. 20,100,400,2000")
    ap.add_argument("--tasks", default="hard-0.12,grounded-0.05", help="with --lengths")
    ap.add_argument("--one-length", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one_length is not None:
        print(json.dumps(one_length(args.task, args.one_length, args.reps)))
        return
    if args.lengths:
        ks = [int(k) for k in args.lengths.split(",")]
        if any(k < 2 for k in ks):
            ap.error(f"--lengths {args.lengths}: every K must be an integer >= 2")
        lengths(args.tasks.split(","), ks, args.reps)
        return
    cfg = suite_config(args.task).sim_config
    full = copy.copy(BayesStopper.for_task(args.task))
    full._shortcut = False
    stoppers = {
        "Bayes": BayesStopper.for_task(args.task),
        "Bayes (no shortcut)": full,
        "Bayes (loop look-ahead)": ReferenceBayes.for_task(args.task),
        "EvalStop(2)": KDeclineRule(2),
    }

    def play(stopper):
        def run() -> tuple[float, float]:
            sim = Simulator(cfg, 0)
            t0 = time.process_time()
            m = sim.run(stopper)
            return m["n_decisions"], time.process_time() - t0

        return run

    res = alternating({name: play(s) for name, s in stoppers.items()}, args.reps)
    rates = {name: [d / t for d, t in runs] for name, runs in res.items()}
    print(f"{args.task}, seed 0, {args.reps} interleaved rounds")
    for name, r in rates.items():
        cpu = [t for _, t in res[name]]
        print(
            f"{name:24s} {max(r):10,.0f} decisions/s (best), {res[name][0][0]:,.0f} decisions, "
            f"episode CPU min {min(cpu):.3f} s, median {statistics.median(cpu):.3f} s"
        )

    def ratio(num: str, den: str) -> tuple[float, float]:
        best = max(rates[num]) / max(rates[den])
        med = statistics.median(a / b for a, b in zip(rates[num], rates[den]))
        return best, med

    b, m = ratio("Bayes", "EvalStop(2)")
    ok = "met" if min(b, m) >= TARGET else "NOT met"
    print(
        f"Bayes / EvalStop(2) decisions/s: best {b:.5f}, median {m:.5f} (target >= {TARGET}: {ok})"
    )
    for other in ("Bayes (no shortcut)", "Bayes (loop look-ahead)"):
        b, m = ratio("Bayes", other)
        print(f"Bayes / {other}: best {b:.2f}, median {m:.2f}")


if __name__ == "__main__":
    main()
