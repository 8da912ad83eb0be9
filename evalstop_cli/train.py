"""``evalstop-gym train``: the command line of :func:`baselines.training.train`.

    evalstop-gym train --algo dqn --timesteps 300000 --out models/dqn.zip \\
        --eval-noise 0.12 --obs-fields job_type,evals,consecutive_declines
    evalstop-gym train --algo ppo --task hard-0.05 --out models/ppo-hard-0.05.zip
    evalstop-gym train --algo lsm --task hard-0.12 --out models/lsm-hard-0.12.npz
    evalstop-gym train --algo lsm --task general --out models/general.npz
    evalstop-gym train --algo lsm --task routed --out models/routed.npz
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from baselines.training.conditioning import CONDITIONS
from baselines.training.train import POLICIES, VECS
from baselines.training.zoo import ALGOS

from .envargs import add_env_arguments, at_least, env_kwargs_from_args

#: The backward-induction algorithm (``baselines.backward``; no SB3): ``--algo lsm``.
LSM = "lsm"


def add_train_parser(sub: Any) -> None:
    """Add the ``train`` subcommand (every env argument a flag) to ``sub``."""
    t = sub.add_parser("train", help="train a learned stopper with Stable-Baselines3")
    t.add_argument(
        "--algo",
        choices=(*ALGOS, LSM),
        default="ppo",
        help=f"the SB3 algorithm, one of {', '.join(ALGOS)} (default ppo; hyperparameters "
        "from baselines/hyperparams/ALGO.yml), or lsm: backward induction "
        "(Longstaff-Schwartz, scikit-learn; needs --task, 'general' for the one model over "
        "regimes, noise and prices, 'routed' for per-regime models routed by the regime "
        "evidence of an episode's jobs; writes an .npz)",
    )
    t.add_argument(
        "--episodes",
        type=at_least(1),
        default=None,
        help="lsm: training episodes (default 200 for a task, 1920 of 50 jobs for general "
        "and routed)",
    )
    t.add_argument(
        "--price-factor",
        type=float,
        default=1.0,
        help="lsm: train at this multiple of the task's price (default 1)",
    )
    t.add_argument(
        "--timesteps",
        type=at_least(1),
        default=None,
        help="training budget (default: n_timesteps of hyperparams/ALGO.yml)",
    )
    t.add_argument("--out", required=True, help="model file (.zip)")
    t.add_argument(
        "--n-envs",
        type=at_least(1),
        default=None,
        help="parallel envs (default: n_envs of the yml)",
    )
    t.add_argument(
        "--seed", type=int, default=0, help="seed of the model and of the training envs (default 0)"
    )
    t.add_argument(
        "--policy",
        choices=POLICIES,
        default="multi",
        help="MultiInputPolicy on the Dict, or MlpPolicy on FlattenObservation",
    )
    t.add_argument(
        "--eval-freq", type=at_least(1), default=20_000, help="timesteps between evaluations"
    )
    t.add_argument("--subproc", action="store_true", help="SubprocVecEnv instead of DummyVecEnv")
    t.add_argument(
        "--vec",
        choices=VECS,
        default="dummy",
        help="native: N simulators batched in one process (EvalStop's own vector env)",
    )
    t.add_argument(
        "--tensorboard", default=None, help="TensorBoard log dir (default: OUT/tb if installed)"
    )
    t.add_argument("--no-progress", action="store_true", help="no progress bar")
    t.add_argument(
        "--last", action="store_true", help="save the last model, not the best-evaluated one"
    )
    t.add_argument(
        "--hyperparams",
        type=json.loads,
        default=None,
        help="JSON overrides, e.g. '{\"gamma\": 0.99}'",
    )
    t.add_argument(
        "--task",
        default=None,
        help="train on a benchmark task (e.g. hard-0.05: evalstop_gym.suite_task's env "
        "arguments); environment flags given too override it",
    )
    t.add_argument(
        "--condition",
        choices=CONDITIONS,
        default="none",
        help="what the model sees beside the boundary fields: task = the eval noise, GPU-hour "
        "price and evals per run; task+summary = also statistics of the eval history",
    )
    add_env_arguments(t)
    t.set_defaults(
        func=cmd_train,
        # what refuse_other_options compares with: each algo-only option's default
        option_defaults={name: t.get_default(name) for name in (*SB3_ONLY, *LSM_ONLY)},
    )


def train_env_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The env arguments of ``train``: the ``--task``'s, overridden by the env flags given."""
    from evalstop_gym import suite_task
    from evalstop_gym.envs.config import EvalStopConfig

    task = suite_task(args.task) if args.task else {}
    kwargs = {**task, **env_kwargs_from_args(args)}
    EvalStopConfig.from_kwargs(**kwargs)  # a bad value fails before SB3 starts its envs
    return kwargs


def check_new_model_path(model: Path) -> None:
    """Refuse a model path (or its ``.sha256`` record) that exists: a model is never overwritten."""
    from evalstop_gym.fileio import refuse_overwrite

    refuse_overwrite("out", str(model), (model, model.with_name(model.name + ".sha256")))


#: The options of one kind of training only: the SB3 algorithms' (--algo ppo, dqn, ...)
#: and the backward induction's (--algo lsm).  Their defaults are the parser's.
SB3_ONLY = (
    "timesteps",
    "n_envs",
    "policy",
    "eval_freq",
    "subproc",
    "vec",
    "tensorboard",
    "last",
    "hyperparams",
    "condition",
)
LSM_ONLY = ("episodes", "price_factor")


def refuse_other_options(args: argparse.Namespace) -> None:
    """Refuse an option the chosen ``--algo`` does not read (it would be silently ignored)."""
    from evalstop_gym.errors import ConfigError

    for name in SB3_ONLY if args.algo == LSM else LSM_ONLY:
        value, default = getattr(args, name), args.option_defaults[name]
        if value != default or type(value) is not type(default):
            kind = "an SB3 algorithm's (ppo, dqn, ...)" if args.algo == LSM else "--algo lsm's"
            raise ConfigError(
                name, value, f"left out with --algo {args.algo}: it is {kind} option only"
            )


def cmd_train(args: argparse.Namespace) -> int:
    """``evalstop-gym train``: train, save, print the budget and learning curve."""
    refuse_other_options(args)
    if args.algo == LSM:
        return cmd_train_lsm(args)
    from baselines.training import TrainConfig, train

    out = Path(args.out)
    check_new_model_path(out if out.suffix == ".zip" else out.with_suffix(".zip"))
    config = TrainConfig(
        out=args.out,
        algo=args.algo,
        timesteps=args.timesteps,
        n_envs=args.n_envs,
        seed=args.seed,
        policy=args.policy,
        env_kwargs=train_env_kwargs(args),
        eval_freq=args.eval_freq,
        progress=not args.no_progress,
        tensorboard=args.tensorboard,
        subproc=args.subproc,
        hyperparams=args.hyperparams,
        keep_best=not args.last,
        vec=args.vec,
        condition=args.condition,
    )
    res = train(config)
    print(
        f"saved {res.path}: {res.timesteps} steps in {res.seconds:.1f} s "
        f"({res.steps_per_second:.0f} steps/s)"
    )
    if res.learning_curve:
        print("learning curve (timesteps, mean eval return):")
        print(json.dumps([(t, round(m, 3)) for t, m, _ in res.learning_curve]))
    return 0


def cmd_train_lsm(args: argparse.Namespace) -> int:
    """``train --algo lsm``: a backward-induction model on a task (or ``general`` / ``routed``:
    the general distribution); save it."""
    from evalstop_experiments.experiments.generalisation import GENERAL, ROUTED, train_lsm
    from evalstop_gym.errors import ConfigError

    if not args.task:
        raise ConfigError(
            "task",
            None,
            f"a suite task (e.g. hard-0.12), {GENERAL!r} or {ROUTED!r} for --algo lsm",
        )
    if args.task not in (GENERAL, ROUTED):
        train_env_kwargs(args)  # a bad task fails before any episode
    elif env_kwargs_from_args(args):
        # The general distribution sets every env argument itself.
        given = ", ".join(f"--{k.replace('_', '-')}" for k in env_kwargs_from_args(args))
        raise ConfigError("task", args.task, f"a suite task when env flags are given ({given})")
    if not args.price_factor > 0:
        raise ConfigError("price_factor", args.price_factor, "a number > 0")
    if Path(args.out).suffix != ".npz":
        raise ConfigError("out", args.out, "a path ending in .npz for --algo lsm")
    check_new_model_path(Path(args.out))
    seed = None if args.seed == 0 else args.seed
    res = train_lsm(
        args.task, args.out, episodes=args.episodes, seed=seed, factor=args.price_factor
    )
    print(
        f"saved {res['path']} (sha256 {res['sha256']}): {res['episodes']} episodes, "
        f"{res['cpu_s']:.1f} CPU-s"
    )
    return 0
