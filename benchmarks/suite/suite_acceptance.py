"""Acceptance of the `hard` regime and the Bayes stopper's speed (issue 10).

    python benchmarks/suite/suite_acceptance.py [--seeds 10] [--corpus traces.jsonl]

Prints, and checks against the issue's targets:

1. the early-eval AUC (RLHF jobs, 5-fold CV logistic regression on the evals at
   progress <= 0.1 and <= 0.2), noise-free and at sigma 0.12, for every
   calibration (and the corpus, if given); target: `hard` noise-free <= 0.65;
2. on `hard-0.12` at 1/2x, 1x and 2x the suite's price: the normalised scores of
   the tuned floors (target <= 0.5) and EvalStop(k=2) (target <= 0.6), and
   U_Bayes - U0 with its bootstrap CI (target: > 0, CI excluding 0);
3. the honest metrics of every stopper on `hard-0.12` at 1x (docs/SUITE_RESULTS.md's table:
   FPR over healthy RLHF runs, recall after the peak beside the share of stops
   before it, GPU-hours of killed healthy runs, regret against the Oracle);
4. the Bayes stopper's decisions per second on a 200-job `hard-0.12` episode,
   by process CPU time, beside EvalStop(k=2) run the same way (interleaved
   repetitions, min and median);
5. the floors' tuning CPU on `hard-0.12` at 1x: the per-call reference
   (``act`` on every observation; StopAt-p, the gate and CUSUM on 6 seeds, the
   suite's tuning before the array scorers) against the array tuning of every
   family (:data:`evalstop_experiments.scoring.VALIDATION_SEEDS`), and the
   like-for-like ratio (the same candidates and seeds both ways), interleaved.
   ``--tuning-only`` runs this part alone.

Targets live here, not in the tests.  Exit status 1 if one is missed.
"""

from __future__ import annotations

import argparse
import statistics
import time

from baselines.bayes import BayesStopper
from evalstop_experiments import scoring
from evalstop_experiments.early_auc import corpus_early_auc, sim_early_auc
from evalstop_experiments.experiments.suite import run_task
from evalstop_gym import KDeclineRule, SimConfig, Simulator
from evalstop_gym.corpus import read_traces
from evalstop_gym.suite import PRICE_FACTORS


def auc_table(seeds: int, corpus: str | None) -> bool:
    """Print every regime's early-eval AUC; True if `hard` meets its target."""
    print("early-eval AUC (RLHF jobs; noise-free / at sigma 0.12)")
    ok = True
    for cal in ("paper", "realistic", "hard"):
        for mp in (0.1, 0.2):
            a = sim_early_auc(cal, 0.12, range(seeds), mp)
            print(f"  {cal:9s} progress <= {mp}: {a['noise_free']:.3f} / {a['observed']:.3f}")
            if cal == "hard" and a["noise_free"] > 0.65:
                ok = False
    if corpus:
        traces = read_traces(corpus)
        for mp in (0.1, 0.2):
            a = corpus_early_auc(traces, mp)
            print(
                f"  corpus    progress <= {mp}: gold {a['noise_free']:.3f} / eval {a['observed']:.3f}"
            )
    return ok


def floors_and_bayes(seeds: int) -> tuple[bool, list[dict]]:
    """Print the hard-0.12 scores at the three prices; (every target met, the 1x rows)."""
    ok, at_1x = True, []
    for f in PRICE_FACTORS:
        rows = {r.stopper_kind: r.as_dict() for r in run_task("hard-0.12", f, range(seeds))}
        if f == 1.0:
            at_1x = list(rows.values())
        floors = rows[scoring.BEST_FLOOR]["score"]
        ev = rows[scoring.EVALSTOP]["score"]
        b = rows[scoring.BAYES]
        line_ok = floors <= 0.5 and ev <= 0.6 and b["u_minus_u0_lo"] > 0
        ok &= line_ok
        print(
            f"  hard-0.12 @ {f:g}x: best floor ({scoring.best_family(rows[scoring.BEST_FLOOR])}) "
            f"{floors:.2f} (<= 0.5), EvalStop {ev:.2f} (<= 0.6), "
            f"U_Bayes - U0 = {b['u_minus_u0']:.2f} [{b['u_minus_u0_lo']:.2f}, "
            f"{b['u_minus_u0_hi']:.2f}] (> 0)  {'ok' if line_ok else 'MISSED'}"
        )
    return ok, at_1x


#: The honest metrics' columns (``honest_metrics``) and how many decimals each shows.
HONEST_COLUMNS = (
    ("precision", 2),
    ("recall", 2),
    ("fpr", 2),
    ("fpr_rlhf", 2),
    ("recall_after_peak", 2),
    ("stops_before_peak_frac", 2),
    ("killed_healthy_gpu_hours", 0),
    ("total_gpu_hours", 0),
    ("wasted_gpu_hours", 0),
    ("regret_vs_oracle", 1),
)


def honest_table(rows: list[dict]) -> str:
    """The rows' honest metrics (means over seeds) as a Markdown table."""
    head = ["stopper", *(name for name, _ in HONEST_COLUMNS)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["stopper"]] + [scoring.fmt(r[name], d) for name, d in HONEST_COLUMNS]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def decisions_per_second(reps: int = 5) -> None:
    """Bayes and EvalStop on the same 200-job episode, CPU time, interleaved."""
    cfg = SimConfig(calibration="hard", eval_noise=0.12, deliver="best")
    bayes = BayesStopper.for_task("hard-0.12")
    times: dict[str, list[float]] = {"Bayes": [], "EvalStop": []}
    decisions = {}
    for _ in range(reps):
        for name, stopper in (("Bayes", bayes), ("EvalStop", KDeclineRule(2))):
            sim = Simulator(cfg, 0)
            t0 = time.process_time()
            m = sim.run(stopper)
            times[name].append(time.process_time() - t0)
            decisions[name] = m["n_decisions"]
    for name, ts in times.items():
        print(
            f"  {name:8s}: episode min {min(ts):.3f} s, median {statistics.median(ts):.3f} s; "
            f"{decisions[name] / min(ts):,.0f} decisions/s (best)"
        )
    ratio = min(times["Bayes"]) / min(times["EvalStop"])
    print(f"  Bayes / EvalStop episode CPU time: {ratio:.1f}x")


def tuning_speed(reps: int = 3) -> None:
    """Per-call against array tuning of the floors, by process CPU time, interleaved."""
    from baselines.floors import FLOOR_FAMILIES

    kw = scoring.env_kwargs("hard-0.12", 1.0)
    old_seeds = tuple(range(1000, 1006))
    families = {f.key: f for f in FLOOR_FAMILIES}

    def per_call_old() -> None:  # the suite's tuning before the array scorers
        scoring.tuned_stoppers_per_call(kw, old_seeds)

    def arrays_all() -> None:  # every family on the validation seeds, nothing cached
        scoring._built_episode.cache_clear()
        scoring.tune_floors(kw, scoring.VALIDATION_SEEDS)

    def same(per_call: bool) -> None:  # the same candidates and seeds both ways
        scoring._built_episode.cache_clear()
        if per_call:
            jobs = [scoring.job_observations(kw, s) for s in old_seeds]
        eps = [scoring.episode_arrays(kw, s) for s in old_seeds]
        for key in (scoring.STOP_AT_TUNED, scoring.GATE_TUNED, scoring.CUSUM_TUNED):
            fam = families[key]
            cands = fam.grid([e.arrays for e in eps])
            if per_call:
                scoring.tune(cands, jobs)
            else:
                scoring.tune_family(fam, eps)

    runs = {
        "per-call, 3 families, 6 seeds (before)": per_call_old,
        "arrays, every family, validation seeds (after)": arrays_all,
        "per-call, the arrays' 3-family grids, 6 seeds": lambda: same(True),
        "arrays, the same grids and seeds": lambda: same(False),
    }
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(reps):
        for name, run in runs.items():
            t0 = time.process_time()
            run()
            times[name].append(time.process_time() - t0)
    for name, ts in times.items():
        print(f"  {name}: min {min(ts):.3f} s, median {statistics.median(ts):.3f} s")
    names = list(runs)
    print(
        f"  E8 tuning per task and price, before / after: {min(times[names[0]]) / min(times[names[1]]):.1f}x; "
        f"like for like, per-call / arrays: {min(times[names[2]]) / min(times[names[3]]):.1f}x"
    )


def main() -> None:
    """Run the checks and print the tables; exit 1 if a target is missed."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--corpus", default=None, help="a micro-RLHF corpus (JSONL) for its AUC")
    ap.add_argument("--tuning-only", action="store_true", help="only the tuning CPU (part 5)")
    args = ap.parse_args()
    if args.tuning_only:
        tuning_speed()
        return
    ok = auc_table(args.seeds, args.corpus)
    print("hard-0.12 at the three prices (scores normalised to Bayes)")
    targets_met, at_1x = floors_and_bayes(args.seeds)
    ok &= targets_met
    print("honest metrics, hard-0.12 at 1x (means over seeds)")
    print(honest_table(at_1x))
    print("Bayes stopper speed (200-job hard-0.12 episode)")
    decisions_per_second()
    print("floor tuning CPU (hard-0.12 at 1x)")
    tuning_speed()
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
