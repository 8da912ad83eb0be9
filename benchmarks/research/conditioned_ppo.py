"""PPO with task conditioning: train, then score on unseen test seeds against Bayes and the floors.

    python benchmarks/research/conditioned_ppo.py train --task hard-0.05 --out models/c05.zip \\
        [--timesteps 100000] [--condition task+summary] [--seed 10000] \\
        [--hyperparams '{"gae_lambda": 1.0}']
    python benchmarks/research/conditioned_ppo.py train --mix --out models/cmix.zip   # both noises, 3 prices
    python benchmarks/research/conditioned_ppo.py score --models models/c05.zip,models/cmix.zip \\
        --tasks hard-0.05,hard-0.12 [--prices 1] [--test-seeds 30]

``train`` prints the CPU seconds it took (process time: the model, the envs and the
periodic evaluations).  Training seeds start at 10 000 (evaluation episodes 10 000
further), so no training, validation (2000..2011) or test (0..n-1) episode is shared.
``score`` plays every model beside NoStop, the Bayes stopper and the best floor family
(tuned on :data:`evalstop_experiments.scoring.VALIDATION_SEEDS`) on the test seeds
0..n-1 and prints, per task and price, each model's normalised score with its 95 %
CI, its paired utility difference to the best floor with its CI, and where it stops
(the share of hacking runs stopped after their peak, the share stopped before it,
the share of healthy RLHF runs stopped).
"""

from __future__ import annotations

import argparse
import functools
import json
import time
from pathlib import Path
from typing import Any

from baselines.training import TrainConfig, train
from baselines.training.conditioning import CONDITIONS, ConditionedSource
from baselines.training.domain_random import DomainRandomised
from evalstop_cli.envargs import at_least
from evalstop_experiments import scoring
from evalstop_gym.suite import suite_task

#: The mixture ``--mix`` trains on: both hard noises at the three prices of the suite.
MIX_TASKS = ("hard-0.05", "hard-0.12")
MIX_PRICES = (0.5, 1.0, 2.0)


def mix_domains(n_jobs: int = 100) -> list[dict[str, Any]]:
    """Env arguments of every (task, price) of the mixture."""
    return [{**scoring.env_kwargs(t, f), "n_jobs": n_jobs} for t in MIX_TASKS for f in MIX_PRICES]


def cmd_train(args: argparse.Namespace) -> None:
    """Train one model and print its budget and CPU seconds."""
    env = {**suite_task(args.task), "n_jobs": 100}
    base = None
    if args.mix:
        base = functools.partial(DomainRandomised, mix_domains())
    t0 = time.process_time()
    res = train(
        TrainConfig(
            out=args.out,
            algo="ppo",
            timesteps=args.timesteps,
            seed=args.seed,
            env_kwargs=env,
            condition=args.condition,
            make_base_env=base,
            progress=False,
            eval_freq=args.eval_freq,
            label=args.label,
            hyperparams=args.hyperparams,
            eval_episodes=args.eval_episodes,
        )
    )
    cpu = time.process_time() - t0
    print(
        json.dumps(
            {
                "out": str(res.path),
                "timesteps": res.timesteps,
                "cpu_s": round(cpu, 1),
                "wall_s": round(res.seconds, 1),
                "curve": [(t, round(m, 2)) for t, m, _ in res.learning_curve],
            }
        )
    )


def _row(task, factor, name, seeds, u, u0, uref, floor, metrics, djct) -> dict[str, Any]:
    """One printed line: score and CI, the paired difference to the best floor, where it stops."""
    score, lo, hi = scoring.normalised_score(u, u0, uref)
    d, dlo, dhi = scoring.paired_diff_ci(u, floor)
    return {
        "task": task,
        "price": factor,
        "stopper": name,
        "seeds": seeds,
        "score": [round(score, 3), round(lo, 3), round(hi, 3)],
        "vs_best_floor": [round(d, 3), round(dlo, 3), round(dhi, 3)],
        "recall_after_peak": round(metrics["recall_after_peak"], 3),
        "stops_before_peak_frac": round(metrics["stops_before_peak_frac"], 3),
        "fpr_rlhf": round(metrics["fpr_rlhf"], 3),
        "delta_jct_pct": round(djct, 1),
    }


def cmd_score(args: argparse.Namespace) -> None:
    """Score every model on every task and price; print one JSON line per stopper.

    With ``--per-seed FILE`` the per-seed utilities of NoStop, the best floor and Bayes
    are written to FILE, so rows of separate runs on the same seeds can be paired.
    """
    if args.per_seed and Path(args.per_seed).exists():
        raise SystemExit(
            f"--per-seed: {args.per_seed} exists; name a new file (it is never overwritten)"
        )
    seeds = list(range(args.seed_base, args.seed_base + args.test_seeds))
    models = [m for m in args.models.split(",") if m]
    saved: dict[str, Any] = {}
    for task in args.tasks.split(","):
        for factor in (float(f) for f in args.prices.split(",")):
            kw = scoring.env_kwargs(task, factor)
            key = f"{task}@{factor:g}/{seeds[0]}+{len(seeds)}"
            t0 = time.process_time()
            extra = [scoring.StopperSpec(m, ConditionedSource(m)).build(task, kw) for m in models]
            best = scoring.best_floor(scoring.tune_floors(kw, scoring.VALIDATION_SEEDS))
            stoppers = [
                scoring.Stopper(scoring.NOSTOP, "NoStop", scoring.NoStop()),
                scoring.Stopper(
                    scoring.BEST_FLOOR, f"Best floor ({best.family.label})", best.policy
                ),
                *extra,
                scoring.reference_stopper(kw),
            ]
            rows = scoring.score_task(task, factor, kw, stoppers, seeds)
            floor = [u for u, _, _ in rows[1].per_seed]
            for r in rows:
                u = [x for x, _, _ in r.per_seed]
                u0 = [x for _, x, _ in r.per_seed]
                uref = [x for _, _, x in r.per_seed]
                line = _row(
                    task,
                    factor,
                    r.stopper,
                    r.seeds,
                    u,
                    u0,
                    uref,
                    floor,
                    r.metrics,
                    r.delta_jct_pct,
                )
                print(json.dumps(line))
            saved[key] = {
                "NoStop": [x for _, x, _ in rows[0].per_seed],
                "Bayes": [x for _, _, x in rows[0].per_seed],
                "floor": floor,
                "floor_name": rows[1].stopper,
                "jct0": rows[0].metrics["mean_jct_h"],
            }
            cpu = time.process_time() - t0
            print(json.dumps({"task": task, "price": factor, "scoring_cpu_s": round(cpu, 1)}))
    if args.per_seed:
        Path(args.per_seed).write_text(json.dumps(saved))


def main() -> None:
    """Parse the command line and run ``train`` or ``score``."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(required=True)
    t = sub.add_parser("train")
    t.add_argument("--task", default="hard-0.05")
    t.add_argument("--mix", action="store_true", help="both hard noises at 1/2x, 1x, 2x price")
    t.add_argument("--out", required=True)
    t.add_argument("--timesteps", type=int, default=100_000)
    t.add_argument("--condition", choices=CONDITIONS, default="task+summary")
    t.add_argument("--seed", type=int, default=10_000)
    t.add_argument("--eval-freq", type=int, default=20_000)
    t.add_argument("--label", default=None)
    t.add_argument(
        "--eval-episodes", type=at_least(1), default=8, help="episodes of each periodic evaluation"
    )
    t.add_argument(
        "--hyperparams",
        type=json.loads,
        default=None,
        help="JSON overrides of hyperparams/ppo.yml, e.g. '{\"gae_lambda\": 1.0}'",
    )
    t.set_defaults(func=cmd_train)
    s = sub.add_parser("score")
    s.add_argument("--models", required=True, help="comma-separated model files")
    s.add_argument("--tasks", default="hard-0.05,hard-0.12")
    s.add_argument("--prices", default="1")
    s.add_argument("--test-seeds", type=int, default=30)
    s.add_argument(
        "--per-seed", default=None, help="write the baselines' per-seed utilities to this JSON file"
    )
    s.add_argument(
        "--seed-base", type=int, default=0, help="first seed (development: 5000, not a test seed)"
    )
    s.set_defaults(func=cmd_score)
    args = p.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
