"""The CurveOracle between Bayes and the Oracle: gains over NoStop and CPU per job.

    python benchmarks/suite/curve_oracle_gains.py [--seeds 30] [--first-seed 20000] [--tasks ...]

For each suite task (default: the four synthetic ones and ``trl-gao``) plays
NoStop, Bayes (synthetic tasks only), the CurveOracle and the Oracle on the
same seeds, interleaved seed by seed, and prints the gain ratios
(U - U_NoStop averaged over seeds) CurveOracle / Bayes, Oracle / Bayes and
CurveOracle / Oracle with 95 % paired bootstrap CIs, whether the CurveOracle
stayed at or under the Oracle in every episode (exact: the Oracle maximises the
same per-job table), and each stopper's process CPU time per job (min and
median over the episodes; the CurveOracle's own cost is its figure minus
NoStop's, which is the simulator's).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from baselines import CurveOracle, NoStop
from baselines.bayes import BayesStopper
from baselines.evaluate import play_episode
from evalstop_gym import suite_task

TASKS = ("hard-0.05", "hard-0.12", "realistic-0.12", "paper-0.12", "trl-gao")


def ratio_ci(num: np.ndarray, den: np.ndarray, n_boot: int = 4000) -> str:
    """mean(num) / mean(den) and its paired bootstrap 95 % CI, as text."""
    idx = np.random.default_rng(0).integers(0, len(num), (n_boot, len(num)))
    boot = num[idx].mean(axis=1) / den[idx].mean(axis=1)
    lo, hi = np.percentile(boot, [2.5, 97.5])
    return f"{num.mean() / den.mean():.2f} [{lo:.2f}, {hi:.2f}]"


def run(task: str, seeds: list[int]) -> None:
    """Play every stopper on ``task`` and print the ratios and CPU per job."""
    kw = suite_task(task)
    stoppers: list[tuple[str, object]] = [("NoStop", NoStop())]
    if "curves" not in kw:
        stoppers.append(("Bayes", BayesStopper.from_env_kwargs(kw)))
    stoppers += [("CurveOracle", CurveOracle()), ("Oracle", None)]
    u: dict[str, list[float]] = {n: [] for n, _ in stoppers}
    cpu: dict[str, list[float]] = {n: [] for n, _ in stoppers}
    n_jobs = 0
    for s in seeds:
        for name, stopper in stoppers:
            t0 = time.process_time()
            row, record = play_episode(stopper, s, kw)  # type: ignore[arg-type]
            cpu[name].append(time.process_time() - t0)
            u[name].append(row["utility"])
            n_jobs = len(record.stopped)
    gain = {n: np.array(v) - np.array(u["NoStop"]) for n, v in u.items()}
    parts = []
    if "Bayes" in gain:
        parts.append(f"CurveOracle/Bayes {ratio_ci(gain['CurveOracle'], gain['Bayes'])}")
        parts.append(f"Oracle/Bayes {ratio_ci(gain['Oracle'], gain['Bayes'])}")
    parts.append(f"CurveOracle/Oracle {ratio_ci(gain['CurveOracle'], gain['Oracle'])}")
    below = bool(np.all(np.array(u["CurveOracle"]) <= np.array(u["Oracle"]) + 1e-9))
    print(f"{task} ({len(seeds)} seeds x {n_jobs} jobs): " + "; ".join(parts))
    print(f"  CurveOracle <= Oracle in every episode: {below}")
    per_job = {
        n: (1e3 * min(v) / n_jobs, 1e3 * statistics.median(v) / n_jobs) for n, v in cpu.items()
    }
    print(
        "  CPU ms per job (min / median episode): "
        + ", ".join(f"{n} {a:.2f} / {m:.2f}" for n, (a, m) in per_job.items())
    )


def main() -> None:
    """Parse the arguments and run every task."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=30, help="episodes per task (default 30)")
    ap.add_argument("--first-seed", type=int, default=20_000, help="first seed (default 20000)")
    ap.add_argument("--tasks", nargs="+", default=list(TASKS), help="suite task names")
    args = ap.parse_args()
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    for task in args.tasks:
        run(task, seeds)


if __name__ == "__main__":
    main()
