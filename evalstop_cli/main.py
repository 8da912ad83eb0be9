"""The ``evalstop-gym`` command line.

evalstop-gym benchmark            the four scripted stoppers on one setting
evalstop-gym reproduce [--quick]  the paper's experiments, CSV + REPORT.md + plots
evalstop-gym train ...            a learned stopper with Stable-Baselines3
evalstop-gym curves ...           real micro-RLHF training curves
"""

from __future__ import annotations

import argparse
import importlib.util
import shlex
import sys
import time
from collections.abc import Callable, Iterable
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any, NoReturn

from evalstop_experiments.experiments import TITLES
from evalstop_gym.parallel import BACKENDS, BackendError

from .envargs import add_env_arguments, at_least, env_kwargs_from_args
from .train import add_train_parser

#: The pip extra (pyproject.toml's optional dependencies) that installs each optional module.
EXTRAS: dict[str, str] = {
    "rich": "cli",
    "tqdm": "cli",
    "scipy": "cli",
    "matplotlib": "plots",
    "stable_baselines3": "train",
    "sb3_contrib": "train",
    "torch": "train",
    "yaml": "train",
    "ray": "distributed",
    "trl": "trl",
    "transformers": "trl",
    "tokenizers": "trl",
    "vaderSentiment": "trl",
}

#: The optional modules each subcommand needs whatever its flags (rich prints the tables,
#: scipy's t quantiles make the intervals): checked before any work starts.
NEEDS: dict[str, tuple[str, ...]] = {
    "benchmark": ("rich", "scipy"),
    "reproduce": ("rich", "scipy", "matplotlib"),
    "train": ("stable_baselines3", "torch"),
}


def missing_module_message(module: str, what: str = "this command", hint: str = "") -> str:
    """One line: the module ``what`` needs, the pip extra that installs it, and ``hint``."""
    top = module.partition(".")[0]
    extra = EXTRAS.get(top)
    fix = (
        f'pip install -e ".[{extra}]" (in a clone; else pip install "evalstop-gym[{extra}]")'
        if extra
        else f"pip install {top}"
    )
    return f"{what} needs {top!r}, which is not installed: {fix}" + (f"; {hint}" if hint else "")


class MissingModuleError(ModuleNotFoundError):
    """An optional module a subcommand needs is absent; found before any work starts."""


def require(modules: Iterable[str], what: str, hint: str = "") -> None:
    """Raise :class:`MissingModuleError` naming the extra for the first of ``modules`` absent."""
    for module in modules:
        if importlib.util.find_spec(module) is None:
            raise MissingModuleError(missing_module_message(module, what, hint), name=module)


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line (the usage of a command is pages long)."""

    def error(self, message: str) -> NoReturn:
        """Print ``prog: error: message`` and where the help is; exit with status 2."""
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


#: Subcommands whose ``--out`` is a folder: a file there is refused before any work.
FOLDER_OUT = ("benchmark", "reproduce", "curves")


def check_out_folder(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse an ``--out`` that is an existing file where a folder is expected."""
    out = getattr(args, "out", None)
    if (
        args.command in FOLDER_OUT
        and out is not None
        and Path(out).exists()
        and not Path(out).is_dir()
    ):
        parser.error(f"argument --out: {out!r} is a file, not allowed: a folder (new or existing)")


def _table(title: str, summary: list[dict[str, Any]]) -> None:
    """Print summary rows as a rich table (policy, JCT, waste, detection, quality)."""
    from rich.console import Console
    from rich.table import Table

    from evalstop_experiments.stats import fmt_ci

    t = Table(title=title)
    cols = [
        ("policy", None, None),
        ("JCT h", "mean_jct_h", 1.0),
        ("ΔJCT %", "d_jct_pct", 1.0),
        ("waste GPU-h", "wasted_gpu_hours", 1.0),
        ("Δwaste %", "d_waste_pct", 1.0),
        ("precision %", "precision", 100.0),
        ("recall %", "recall", 100.0),
        ("FPR %", "fpr", 100.0),
        ("quality", "mean_delivered_quality", 1.0),
    ]
    for name, _, _ in cols:
        t.add_column(name, justify="right" if name != "policy" else "left")
    for s in summary:
        cells = [f"{s['policy']} ({s['group']})" if s.get("group") else s["policy"]]
        for _, m, scale in cols[1:]:
            digits = 3 if m == "mean_delivered_quality" else 1 if m != "wasted_gpu_hours" else 0
            cells.append(fmt_ci(s[m], s[f"{m}_ci95"], scale, digits))
        t.add_row(*cells)
    console = Console()
    if not console.is_terminal:  # a pipe or a CI log: do not wrap the table at 80 columns
        console = Console(width=170)
    console.print(t)


def cmd_benchmark(args: argparse.Namespace) -> int:
    """``evalstop-gym benchmark``: the scripted stoppers on one setting, as a table."""
    if args.policy:
        require(("stable_baselines3", "torch"), "--policy (a learned stopper)")
    if args.suite:
        from evalstop_experiments.experiments.suite import cmd_suite

        return cmd_suite(args)
    from evalstop_experiments.cells import SCRIPTED, Cell
    from evalstop_experiments.runner import run_task
    from evalstop_experiments.summary import add_deltas, summarise
    from evalstop_gym.envs.config import EvalStopConfig
    from evalstop_gym.parallel import Executor

    env = env_kwargs_from_args(args)
    EvalStopConfig.from_kwargs(**env)  # a bad value fails here, not in every worker
    t0 = time.perf_counter()
    policies = SCRIPTED + tuple(_learned_spec(spec, env) for spec in args.policy)
    tasks = [(Cell("bench", p, env), s) for p in policies for s in range(args.seeds)]
    rows = Executor(workers=args.workers).map(run_task, tasks)
    add_deltas(rows)
    summary = summarise(rows)
    shown = (
        ", ".join(f"{k}={v}" for k, v in env.items()) or "defaults (heavy-rlhf, srtf-est, 64 GPUs)"
    )
    _table(
        f"Scripted stoppers on EvalStop-v0 — {shown} — {args.seeds} seeds, mean ± 95 % CI", summary
    )
    print(f"{len(rows)} episodes in {time.perf_counter() - t0:.1f} s")
    return 0


def _learned_spec(spec: str, env: dict[str, Any]) -> Any:
    """The PolicySpec of a ``--policy`` learned stopper, once it loads and fits ``env``."""
    from baselines.learned import from_spec, pretrained_sha256
    from evalstop_experiments.cells import PolicySpec
    from evalstop_gym.envs import EvalStopEnv

    learned = from_spec(spec)  # checks the spec and the model's hash now, not in a worker
    learned.check_observation_space(EvalStopEnv(**env).observation_space)
    params: dict[str, Any] = {"path": learned.path}
    if spec.startswith("pretrained:"):
        params["sha256"] = pretrained_sha256(spec.partition(":")[2])
    return PolicySpec("Learned", params, label=spec)


def cmd_reproduce(args: argparse.Namespace) -> int:
    """``evalstop-gym reproduce``: the paper's experiments, CSV + REPORT.md + plots."""
    from evalstop_experiments.reproduce import ReproduceOptions, reproduce

    options = ReproduceOptions(
        quick=args.quick,
        seeds=args.seeds,
        n_jobs=args.n_jobs,
        experiments=tuple(args.experiments.split(",")) if args.experiments else None,
        backend=args.backend,
        workers=args.workers,
        address=args.address,
        resume=args.resume,
        fresh=args.fresh,
        env=env_kwargs_from_args(args),
        learned=False if args.no_learned else None,
        train_timesteps=args.train_timesteps,
        real_curves=False if args.no_real_curves else None,
        deprioritisation=False if args.no_deprioritisation else None,
        curves=args.corpus,
    )
    try:
        res = reproduce(args.out, options)
    except BrokenProcessPool:
        again = list(args.argv or ["reproduce"]) + ([] if args.resume else ["--resume"])
        if "--out" not in again:
            again += ["--out", str(args.out)]
        print(
            f"evalstop-gym: error: a worker process died (killed, or out of memory); "
            f"the results finished so far are kept in {args.out}/raw: "
            f"{shlex.join(['evalstop-gym', *again])} continues",
            file=sys.stderr,
        )
        return 1
    e1 = [s for s in res.summary if s["experiment"] == "E1"]
    if e1:
        _table("E1 — heavy-RLHF on SRTF-Est (mean ± 95 % CI over seeds)", e1)
    print(
        f"{res.ran} episodes run, {res.reused} reused, in {res.seconds:.1f} s; "
        f"report: {res.out / 'REPORT.md'}"
    )
    if res.redone:
        shown = ", ".join(str(p) for p in res.redone[:5]) + (" ..." if len(res.redone) > 5 else "")
        print(f"recomputed {len(res.redone)} invalid result file(s): {shown}")
    return 0


def add_benchmark_parser(sub: Any) -> None:
    """``benchmark``: the scripted stoppers on one setting (every env argument a flag)."""
    b = sub.add_parser("benchmark", help="the scripted stoppers on one setting, as a table")
    b.add_argument(
        "--seeds", type=at_least(1), default=10, help="episodes per policy, >= 1 (default 10)"
    )
    b.add_argument(
        "--workers", type=at_least(1), default=None, help="processes, >= 1 (default: all cores)"
    )
    b.add_argument(
        "--policy",
        action="append",
        default=[],
        metavar="SPEC",
        help="add a stopper (repeatable): pretrained:NAME (a shipped model: hard, the PPO "
        "one; general and routed, backward induction) or model:PATH (a model file with its "
        ".sha256 record, as `train` writes); with --suite "
        "also module:Class or path/to/file.py:Class (your own Policy class, built with no "
        "arguments)",
    )
    add_env_arguments(b)
    from evalstop_experiments.experiments.suite import add_suite_arguments

    add_suite_arguments(b)
    b.set_defaults(func=cmd_benchmark)


def add_reproduce_parser(sub: Any) -> None:
    """``reproduce``: every experiment (E1-E12; E13 when named)."""
    r = sub.add_parser(
        "reproduce", help="the experiments E1-E12 (E13 when named): CSV, REPORT.md, plots"
    )
    r.add_argument(
        "--quick", action="store_true", help="fewer seeds and jobs (under 2 minutes on 2 cores)"
    )
    r.add_argument(
        "--seeds",
        type=int,  # ReproduceOptions refuses fewer than 2 in one line, before any work
        default=None,
        help="seeds per cell, >= 2 (default 50; quick 10)",
    )
    r.add_argument(
        "--n-jobs",
        type=at_least(1),
        default=None,
        help="jobs per episode, >= 1 (default 200; quick 150)",
    )
    r.add_argument("--out", default="results", help="output folder (default results/)")
    r.add_argument(
        "--experiments",
        default=None,
        help=f"comma-separated subset of {','.join(TITLES)} (default: all)",
    )
    r.add_argument(
        "--backend",
        choices=BACKENDS,
        default="local",
        help=f"where the episodes run, one of {', '.join(BACKENDS)} (default local: a process "
        "pool on this machine)",
    )
    r.add_argument(
        "--workers",
        type=at_least(1),
        default=None,
        help="parallel workers, >= 1 (default: all cores)",
    )
    r.add_argument("--address", default=None, help="address of an existing Ray cluster")
    r.add_argument("--resume", action="store_true", help="reuse finished (cell, seed) results")
    r.add_argument("--fresh", action="store_true", help="discard earlier results in OUT/raw")
    r.add_argument("--no-learned", action="store_true", help="skip E6 (no SB3 training)")
    r.add_argument(
        "--train-timesteps",
        type=at_least(1),
        default=None,
        help="E6 budget per model (20k quick, 300k)",
    )
    r.add_argument("--no-real-curves", action="store_true", help="skip E7 (no micro-RLHF corpus)")
    r.add_argument(
        "--no-deprioritisation", action="store_true", help="skip E10 (stop vs deprioritise, costs)"
    )
    r.add_argument(
        "--corpus",
        default=None,
        help="E7's curve corpus (JSONL); generated into OUT/curves if absent",
    )
    r.set_defaults(func=cmd_reproduce)


def add_curves_parser(sub: Any) -> None:
    """``curves``: generate and fit real micro-RLHF training curves."""
    from evalstop_corpora.micro_rlhf.generate import add_arguments
    from evalstop_experiments import regime_fit
    from evalstop_experiments.replay import add_replay_parser

    c = sub.add_parser("curves", help="real training curves: generate, fit, fit-regime, replay")
    curves_sub = add_arguments(c)
    regime_fit.add_parser(curves_sub)
    add_replay_parser(curves_sub)
    c.set_defaults(func=cmd_curves)


def cmd_curves(args: argparse.Namespace) -> int:
    """``evalstop-gym curves``: generate (torch) and fit a micro-RLHF corpus."""
    from evalstop_corpora.micro_rlhf.generate import run

    if args.curves_command == "fit-regime":
        return int(args.fit_regime(args))
    if args.curves_command == "generate" and getattr(args, "source", "micro") == "english":
        require(("torch", "trl", "transformers", "vaderSentiment"), "curves generate")
        from evalstop_corpora.english.generate import run_cli

        return int(run_cli(args) or 0)
    if args.curves_command == "generate":
        trl = getattr(args, "source", "micro") == "trl"
        require(("torch", "trl", "transformers") if trl else ("torch",), "curves generate")
    elif args.curves_command == "fit":
        require(("matplotlib",), "curves fit")
    return int(run(args) or 0)


#: Each subcommand's parser builder, in help order; a new subcommand appends its own.
SUBCOMMANDS: list[Callable[[Any], None]] = [
    add_benchmark_parser,
    add_reproduce_parser,
    add_train_parser,
    add_curves_parser,
]


def build_parser() -> argparse.ArgumentParser:
    """The ``evalstop-gym`` parser with every subcommand of :data:`SUBCOMMANDS`."""
    from evalstop_gym import __version__

    ap = Parser(prog="evalstop-gym", description=__doc__.splitlines()[0])
    ap.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = ap.add_subparsers(dest="command", required=True)
    for add in SUBCOMMANDS:
        add(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    """Run the command line; return the exit status (2 on bad input, 130 on Ctrl-C)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    check_out_folder(parser, args)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    try:
        # Without SB3 or torch, reproduce's E6, E7 and E9 skip themselves with a note.
        require(NEEDS.get(args.command, ()), args.command)
        return int(args.func(args) or 0)
    except ModuleNotFoundError as e:
        if not isinstance(e, MissingModuleError) and (e.name or "").partition(".")[0] not in EXTRAS:
            raise  # a module of the project itself: a bug, keep its traceback
        message = str(e) if isinstance(e, MissingModuleError) else missing_module_message(e.name)
        print(f"evalstop-gym: error: {message}", file=sys.stderr)
        return 2
    except BackendError as e:
        print(f"evalstop-gym: error: {e}", file=sys.stderr)
        return 1
    except BrokenProcessPool:
        print(
            "evalstop-gym: error: a worker process died (killed, or out of memory); "
            "rerun, or with --workers 1 to see what stops it",
            file=sys.stderr,
        )
        return 1
    except (ValueError, FileExistsError) as e:
        print(f"evalstop-gym: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # an unwritable --out, a full disk: a message, not a traceback
        where = f"{e.filename}: " if e.filename else ""
        print(f"evalstop-gym: error: {where}{e.strerror or e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted: finished results are on disk; rerun with --resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
