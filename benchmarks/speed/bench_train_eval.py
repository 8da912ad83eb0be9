"""Training's CPU with the batched periodic evaluation against SB3's one-by-one EvalCallback.

    python benchmarks/speed/bench_train_eval.py [--timesteps 30000] [--reps 3]

The run ``evalstop-gym train --task hard-0.05`` makes (PPO at the zoo file's settings,
``--timesteps`` steps), once with ``batch_eval=True`` (the default: the evaluation's
episodes side by side, :mod:`baselines.training.batch_eval`) and once with
``batch_eval=False`` (SB3's ``EvalCallback``, the code path before it), interleaved, by
the process CPU time of each whole ``train`` call. Both runs must record the same
learning curve (checked). Then one periodic evaluation of the model trained, by itself:
``BatchEvaluator.evaluate`` against SB3's ``evaluate_policy`` on the same episodes.
Targets: the training run <= 0.7x, one evaluation <= 0.25x.

``--e6`` instead times one of E6's quick models (DQN, 20,000 steps, 5 evaluations of
4 episodes: ``evalstop_experiments.experiments.learned.train_one``'s settings), the
same two ways.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from timing import seconds_ratio_line

from baselines.learned import read_meta
from evalstop_gym import suite_task

TRAIN = importlib.import_module("baselines.training.train")
TRAIN_TARGET = 0.7
EVAL_TARGET = 0.25


def timed(run) -> tuple[float, object]:
    """(process CPU seconds, result) of ``run()``."""
    t0 = time.process_time()
    out = run()
    return time.process_time() - t0, out


def e6(reps: int) -> None:
    """CPU of one quick E6 model's training, batched evaluation against SB3's."""
    from evalstop_experiments.experiments import learned as e6

    steps = e6.BUDGET["quick"]
    evaluations, episodes = e6.EVALUATIONS["quick"]
    tmp = Path(tempfile.mkdtemp(prefix="bench_e6-"))
    cpu: dict[bool, list[float]] = {True: [], False: []}
    order = [True, False]
    for rep in range(reps):
        for batch in order:
            config = TRAIN.TrainConfig(
                out=tmp / f"{batch}-{rep}.zip",
                algo=e6.ALGO,
                timesteps=steps,
                env_kwargs={"eval_noise": e6.SIGMAS[0]},
                progress=False,
                eval_freq=e6.eval_every(steps, evaluations),
                eval_episodes=episodes,
                batch_eval=batch,
            )
            cpu[batch].append(timed(functools.partial(TRAIN.train, config))[0])
        order.reverse()
    curves = {b: read_meta(tmp / f"{b}-0.zip")["learning_curve"] for b in cpu}
    assert curves[True] == curves[False], "the two evaluations recorded different curves"
    print(
        seconds_ratio_line(f"E6 quick model ({e6.ALGO}, {steps} steps)", cpu[True], cpu[False], 1.0)
    )


def main() -> None:
    """Print the two CPU ratios."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--timesteps", type=int, default=30_000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--eval-reps", type=int, default=7)
    ap.add_argument("--e6", action="store_true", help="time one of E6's quick models instead")
    args = ap.parse_args()
    if args.e6:
        e6(args.reps)
        return
    kwargs = suite_task("hard-0.05")
    tmp = Path(tempfile.mkdtemp(prefix="bench_train_eval-"))
    cpu: dict[bool, list[float]] = {True: [], False: []}
    order = [True, False]
    for rep in range(args.reps):
        for batch in order:
            out = tmp / f"{batch}-{rep}.zip"
            config = TRAIN.TrainConfig(
                out=out,
                timesteps=args.timesteps,
                env_kwargs=kwargs,
                progress=False,
                batch_eval=batch,
            )
            seconds, _ = timed(functools.partial(TRAIN.train, config))
            cpu[batch].append(seconds)
        order.reverse()
    curves = {b: read_meta(tmp / f"{b}-0.zip")["learning_curve"] for b in cpu}
    assert curves[True] == curves[False], "the two evaluations recorded different curves"
    print(f"learning curve (both): {curves[True]}")
    print(
        seconds_ratio_line(
            f"train --task hard-0.05, {args.timesteps} steps", cpu[True], cpu[False], TRAIN_TARGET
        )
    )

    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy

    from baselines.training.batch_eval import BatchEvaluator, policy_actions

    torch.set_num_threads(1)
    config = TRAIN.TrainConfig(out=tmp / "x.zip")
    model = PPO.load(tmp / "True-0.zip", device="cpu")
    kw = {**TRAIN.load_zoo_config("ppo").get("env_kwargs", {}), **kwargs}
    make_env = functools.partial(TRAIN._make_env, kw, None, None)
    seed = config.seed + TRAIN.EVAL_SEED_OFFSET
    sb3_env = make_vec_env(make_env, n_envs=1, seed=seed)
    batch = BatchEvaluator(functools.partial(TRAIN._monitored, make_env, False), 8, seed)

    def sb3() -> list[float]:
        sb3_env.seed(seed)
        return evaluate_policy(model, sb3_env, 8, deterministic=True, return_episode_rewards=True)[
            0
        ]

    def batched() -> list[float]:
        return batch.evaluate(policy_actions(model.policy))[0]

    ev: dict[str, list[float]] = {"batch": [], "sb3": []}
    runs = {"batch": batched, "sb3": sb3}
    names = list(runs)
    results = {}
    for _ in range(args.eval_reps):
        for name in names:
            seconds, results[name] = timed(runs[name])
            ev[name].append(seconds)
        names.reverse()
    assert results["batch"] == results["sb3"], "the evaluations' returns differ"
    print(f"evaluation returns (both): {np.round(results['batch'], 4).tolist()}")
    print(
        seconds_ratio_line(
            "one periodic evaluation (8 episodes)", ev["batch"], ev["sb3"], EVAL_TARGET
        )
    )


if __name__ == "__main__":
    main()
