"""Acceptance of the learned stoppers (issue 11): one command, the figures printed.

    python benchmarks/suite/learned_acceptance.py [--tasks hard-0.05,hard-0.12,paper-0.12]
        [--train-seeds 3] [--timesteps N] [--algo ppo] [--test-seeds 10] [--workers 2]

For each task, ``--train-seeds`` models are trained with ``baselines.training.train``
and the shipped defaults of ``hyperparams/<algo>.yml`` (only the budget may be
changed, with ``--timesteps``) on the task's env arguments (``suite_task``).
Training seeds start at :data:`TRAIN_SEED_BASE`, so no training or validation
episode is a test episode (E8 tests on seeds ``0..n-1`` and tunes the floors
on 1000..1005).  Every model then plays E8's test seeds beside E8's stoppers
(as extra stoppers of :mod:`evalstop_experiments.scoring`) at 1x the suite's
price, and the command prints

* each model's normalised score (0 = NoStop, 1 = the Bayes stopper) with its
  95 % paired bootstrap CI over test seeds;
* the mean over training seeds: the score of the seed-averaged utility with its
  bootstrap CI over test seeds, and the spread over training seeds (min..max);
* the targets: on ``hard-0.05`` the learned mean beats EvalStop(k=2) and the
  tuned StopAt-p; mean score >= 0.75 on ``hard-0.05`` and >= 0.6 on
  ``hard-0.12`` while the tuned floors stay <= 0.5;
* the number of training seeds, the budget and the wall time;
* beside them, ``DropFromBest (tuned)``: the simplest rule reading the signal a
  learned stopper turns out to read (an RLHF run whose best eval exceeds the
  mean of its last m evals by delta is past its peak), tuned on E8's
  validation seeds like the floors, so a learned score can be told from it;

and writes ``OUT/E8_stops_<task>.png`` (where every stopper, learned ones
included, ends runs).  Targets live here, not in the tests.  Exit status 1 if one
is missed.
"""

from __future__ import annotations

import argparse
import time
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from baselines.learned import Learned
from baselines.policies import observed
from baselines.training import train
from evalstop_experiments import scoring
from evalstop_experiments.experiments.suite import run_task, stop_position_figures
from evalstop_gym.parallel import Executor
from evalstop_gym.sim.workloads import RLHF
from evalstop_gym.suite import suite_task

#: Training seeds are TRAIN_SEED_BASE + 100 k: far from the test and validation seeds.
TRAIN_SEED_BASE = 100
#: The issue's targets: minimum mean normalised score per task, maximum for the floors.
SCORE_TARGETS = {"hard-0.05": 0.75, "hard-0.12": 0.6}
FLOOR_MAX = 0.5


#: DropFromBest's grid: the drop from the best eval, and how many last evals are averaged.
DROP_DELTAS = (0.02, 0.05, 0.1, 0.15, 0.2, 0.3)
DROP_WINDOWS = (1, 2, 3, 4)


class DropFromBest:
    """Stop an RLHF run once its best eval exceeds the mean of its last ``m`` evals by ``delta``.

    The rule a post-peak detector reduces to when it reads a run's own evals
    only: the baseline a learned stopper has to beat to have learned more.
    """

    def __init__(self, delta: float, m: int) -> None:
        """Its threshold and window (evals averaged)."""
        self.delta, self.m = float(delta), int(m)
        self.name = f"DropFromBest-{delta:g}/{m}"

    def reset(self) -> None:
        """Stateless."""

    def act(self, obs: dict[str, np.ndarray]) -> int:
        """1 (stop) if the job is RLHF and its last evals fell ``delta`` below its best."""
        if int(np.argmax(obs["job_type"])) != RLHF:
            return 0
        evals = observed(obs["evals"])
        if len(evals) <= self.m:
            return 0
        return int(float(evals.max() - evals[-self.m :].mean()) > self.delta)

    def __repr__(self) -> str:
        """Its parameters."""
        return f"DropFromBest({self.delta:g}, m={self.m})"


#: The display name (and extra-stopper identity) of :func:`tuned_drop_from_best`.
DROP_NAME = "DropFromBest (tuned)"


def tuned_drop_from_best(task: str, kw: dict[str, Any]) -> DropFromBest:
    """DropFromBest tuned on E8's validation seeds for these env kwargs (as E8 tunes floors)."""
    episodes = [scoring.job_observations(kw, s) for s in scoring.VALIDATION_SEEDS]
    grid = (DropFromBest(d, m) for d in DROP_DELTAS for m in DROP_WINDOWS)
    return scoring.tune(grid, episodes)  # type: ignore[return-value]


def train_one(job: tuple[str, int, str, int | None, str]) -> tuple[str, int, str, float]:
    """Train one model; (task, k, model path, wall seconds)."""
    task, k, algo, timesteps, out = job
    t0 = time.perf_counter()
    path = Path(out) / f"{algo}-{task}-seed{k}.zip"
    if path.exists() and Path(f"{path}.sha256").exists():  # a rerun scores what it trained
        return task, k, str(path), 0.0
    res = train(
        path,
        algo=algo,
        timesteps=timesteps,
        seed=TRAIN_SEED_BASE + 100 * k,
        env_kwargs=suite_task(task),
        progress=False,
        label=f"{algo.upper()} seed {k}",
    )
    return task, k, str(res.path), time.perf_counter() - t0


def score_task(
    task: str, models: list[str], test_seeds: int, n_jobs: int | None, out: Path
) -> dict[str, Any]:
    """Run E8 on ``task`` at 1x with the models as extra stoppers; the rows by stopper.

    ``rows`` is keyed by :attr:`~evalstop_experiments.scoring.ScoreRow.key`: the suite's
    stoppers by their kind, the extra ones by the names given here (``names``).
    """
    names = [f"learned #{k}" for k in range(len(models))]
    extra = [scoring.StopperSpec(DROP_NAME, tuned_drop_from_best)]
    extra += [scoring.StopperSpec(name, partial(_load, path)) for name, path in zip(names, models)]
    positions: dict = {}
    kw_rows = run_task(
        task, 1.0, range(test_seeds), n_jobs=n_jobs, positions=positions, extra=extra
    )
    stop_position_figures(out, positions)
    where = {name: pos for (_, _, name), pos in positions.items()}
    return {"rows": {r.key: r.as_dict() for r in kw_rows}, "names": names, "where": where}


def where_it_stops(hack_delta: np.ndarray, healthy_end: np.ndarray) -> str:
    """One line of :func:`evalstop_experiments.scoring.stop_positions` pooled over seeds, the figure's numbers.

    Hacking runs: median end progress minus true-peak progress, and the share
    ended before the peak; healthy runs: the share stopped and the earliest stop.
    """
    stopped = healthy_end[healthy_end < 1.0 - 1e-9]
    earliest = f"{stopped.min():.2f}" if len(stopped) else "–"
    return (
        f"hacking: median end - peak {np.median(hack_delta):+.2f}, "
        f"{np.mean(hack_delta < 0):.0%} before the peak; healthy: "
        f"{len(stopped) / max(len(healthy_end), 1):.0%} stopped (earliest {earliest})"
    )


def _load(path: str, task: str, kw: dict[str, Any]) -> Learned:
    return Learned(path)


def report(task: str, result: dict[str, Any]) -> tuple[float, bool]:
    """Print one task's table; (mean learned score, targets met)."""
    rows, names = result["rows"], result["names"]
    nostop = rows[(scoring.NOSTOP, "")]
    print(f"\n{task} (1x price, {nostop['seeds']} test seeds; score 1 = Bayes)")
    for r in rows.values():
        name = r["stopper"]
        print(
            f"  {name:20s} score {r['score']:6.3f} [{r['score_lo']:6.3f}, {r['score_hi']:6.3f}]"
            f"  utility {r['utility']:8.3f}  {r['params'][:60]}"
        )
    print("  where each stopper ends runs (pooled over test seeds):")
    for name, pos in result["where"].items():
        print(f"  {name:20s} {where_it_stops(*pos)}")
    scores = np.array([rows[(scoring.EXTRA, n)]["score"] for n in names])
    mean = float(scores.mean())
    half = _t_half_width(scores)
    print(
        f"  learned mean over {len(names)} training seeds: {mean:.3f} ± {half:.3f} "
        f"(95 % t-interval over seeds; min {scores.min():.3f}, max {scores.max():.3f})"
    )
    floors = max(
        rows[(scoring.STOP_AT_TUNED, "")]["score"], rows[(scoring.GATE_TUNED, "")]["score"]
    )
    ok = True
    if task == "hard-0.05":
        ev, stop_at = rows[(scoring.EVALSTOP, "")], rows[(scoring.STOP_AT_TUNED, "")]
        beats = mean > ev["score"] and mean > stop_at["score"]
        print(f"  beats EvalStop(k=2) and tuned StopAt-p: {'yes' if beats else 'NO'}")
        ok &= beats
    if task in SCORE_TARGETS:
        hit = mean >= SCORE_TARGETS[task]
        print(
            f"  target mean >= {SCORE_TARGETS[task]}: {'met' if hit else 'MISSED'} "
            f"(gap to Bayes {1 - mean:.3f}); floors {floors:.3f} "
            f"({'<=' if floors <= FLOOR_MAX else '>'} {FLOOR_MAX})"
        )
        ok &= hit
    return mean, ok


def _t_half_width(x: np.ndarray) -> float:
    """Half-width of the 95 % t-interval of the mean of ``x`` (NaN for one value)."""
    from scipy import stats

    if len(x) < 2:
        return float("nan")
    return float(stats.t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / np.sqrt(len(x)))


def main(argv: list[str] | None = None) -> int:
    """Train, score and print; exit status 1 if a target is missed."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", default="hard-0.05,hard-0.12,paper-0.12")
    ap.add_argument("--train-seeds", type=int, default=3)
    ap.add_argument("--timesteps", type=int, default=None, help="default: the zoo file's")
    ap.add_argument("--algo", default="ppo")
    ap.add_argument("--test-seeds", type=int, default=10)
    ap.add_argument("--n-jobs", type=int, default=100, help="jobs per test episode")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument(
        "--out", default="results-learned", help="models and figures; existing models are reused"
    )
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tasks = args.tasks.split(",")
    t0 = time.perf_counter()
    jobs = [
        (t, k, args.algo, args.timesteps, str(out)) for t in tasks for k in range(args.train_seeds)
    ]
    trained = Executor(workers=args.workers).map(train_one, jobs)
    train_wall = time.perf_counter() - t0
    for _, k, path, seconds in sorted(trained):
        print(f"trained {path} (seed {TRAIN_SEED_BASE + 100 * k}): {seconds:.0f} s")
    ok = True
    for task in tasks:
        models = [p for t, _, p, _ in sorted(trained) if t == task]
        _, task_ok = report(task, score_task(task, models, args.test_seeds, args.n_jobs, out))
        ok &= task_ok
    print(
        f"\n{args.algo}: {args.train_seeds} training seeds per task, budget "
        f"{args.timesteps or 'zoo default'} steps; training wall {train_wall:.0f} s "
        f"({args.workers} workers), total wall {time.perf_counter() - t0:.0f} s"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
