"""Training and ``reproduce --quick`` against a reference source tree, in alternating subprocesses.

    python benchmarks/speed/bench_vs_reference.py --ref TREE [--rounds 7] train [--timesteps 30000]
    python benchmarks/speed/bench_vs_reference.py --ref TREE [--rounds 7] eval
    python benchmarks/speed/bench_vs_reference.py --ref TREE --rounds 3 reproduce --experiments E6
    python benchmarks/speed/bench_vs_reference.py --ref TREE --rounds 3 quick

(``--rounds`` goes before or after the subcommand, ``--keep`` before it.)

``TREE`` is a checkout of the reference commit, e.g. one made read-only beside this one with
``git worktree add --detach ../ref TREE_COMMIT``.  Each round runs the same command once
from each tree (``PYTHONPATH=<tree>``, a fresh process, from an empty folder), in the
order A B, then B A, and takes its CPU time from ``resource.getrusage(RUSAGE_CHILDREN)``
(the process and every process it started and waited for).  It prints both trees' CPU,
the ratio of the best runs and the median of the per-round ratios, and the target.

- ``train``: ``evalstop-gym train --task hard-0.05 --timesteps N``; both trees must print
  the same learning curve (checked at every round).
- ``eval``: one periodic evaluation of one model (8 episodes of ``hard-0.05``), timed
  inside each process around the evaluation alone: the reference tree's SB3
  ``evaluate_policy`` on the env its ``EvalCallback`` uses, this tree's
  ``BatchEvaluator``.  The same returns are checked.
- ``reproduce``: ``reproduce --quick --experiments LIST --workers 2``, each tree's own;
  each experiment's CPU is read from ``OUT/timings.json`` beside the whole process tree's.
  The numeric columns of the rows both trees write (E6's cells, E8's common stoppers) are
  compared.  E6's quick workload is the same in both trees (its models, cells and seeds);
  E8's is not (this tree scores more floor families, over more validation seeds): ``e8``
  runs the reference's.
- ``e8``: the reference's quick E8 workload (one task at three prices, its stoppers, its
  validation and test seeds) run by each tree's scoring code, E8.csv compared.
- ``quick``: the whole ``reproduce --quick``, each tree's own.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from timing import children_cpu, seconds_ratio_line

HERE = Path(__file__).resolve().parents[2]
#: Targets (CPU of this tree / CPU of the reference).
TARGETS = {"train-30000": 0.7, "train": 0.55, "eval": 0.25, "E6": 0.5, "E8": 0.5, "quick": 1.0}

#: One periodic evaluation, the reference tree's way (SB3's ``EvalCallback`` internals).
EVAL_SB3 = r"""
import functools, json, sys, time
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy
from evalstop_gym import suite_task
import importlib
try:
    T = importlib.import_module("baselines.training.train")
except ImportError:  # the reference tree's layout
    T = importlib.import_module("baselines.train")
torch.set_num_threads(1)
model = PPO.load(sys.argv[1], device="cpu")
kw = {**T.load_zoo_config("ppo").get("env_kwargs", {}), **suite_task("hard-0.05")}
seed = T.EVAL_SEED_OFFSET
env = make_vec_env(functools.partial(T._make_env, kw, None, None), n_envs=1, seed=seed)
def run():
    env.seed(seed)
    return evaluate_policy(model, env, 8, deterministic=True, return_episode_rewards=True)[0]
run()
t0 = time.process_time()
returns = run()
print(json.dumps({"cpu": time.process_time() - t0, "returns": [float(r) for r in returns]}))
"""

#: One periodic evaluation, this tree's way (``BatchEvaluator``, what ``train`` calls).
EVAL_BATCH = r"""
import functools, json, sys, time
import torch
from stable_baselines3 import PPO
from evalstop_gym import suite_task
import importlib
T = importlib.import_module("baselines.training.train")
from baselines.training.batch_eval import BatchEvaluator, policy_actions
torch.set_num_threads(1)
model = PPO.load(sys.argv[1], device="cpu")
kw = {**T.load_zoo_config("ppo").get("env_kwargs", {}), **suite_task("hard-0.05")}
seed = T.EVAL_SEED_OFFSET
make_env = functools.partial(T._make_env, kw, None, None)
batch = BatchEvaluator(functools.partial(T._monitored, make_env, False), 8, seed)
def run():
    return batch.evaluate(policy_actions(model.policy))[0]
run()
t0 = time.process_time()
returns = run()
print(json.dumps({"cpu": time.process_time() - t0, "returns": [float(r) for r in returns]}))
"""


#: E8 of the reference's ``reproduce --quick``, the reference tree's own code.
E8_REF = r"""
import json, sys, time
t0 = time.process_time()
from evalstop_experiments.e8 import reproduce_e8
t1 = time.process_time()
reproduce_e8(sys.argv[1], quick=True)
print(json.dumps({"cpu": time.process_time() - t1, "imports": t1 - t0}))
"""

#: The same workload on this tree's scoring path: one task (hard-0.12) at the three prices,
#: 100-job episodes, test seeds 0..2, the reference's stoppers (NoStop, StopAt, Gate and
#: CUSUM tuned on the reference's validation seeds 1000..1005, LossPlateau, EvalStop(k=2),
#: Bayes, the Oracle) and its outputs (E8.csv, E8.md, the stop-position figure).  The floors
#: tune over this tree's grids, which are wider than the reference's (StopAt to 0.95, CUSUM
#: thresholds to 0.8, Gate's early fraction to 0.3): their rows may differ, the others not.
E8_NEW = r"""
import json, sys, time
t0 = time.process_time()
from baselines.floors import FLOOR_FAMILIES
from baselines.bayes import BayesStopper
from baselines.policies import EvalStop, LossPlateau, NoStop
from evalstop_experiments import scoring as S
from evalstop_experiments.experiments import suite as E8
from evalstop_gym.suite import PRICE_FACTORS, tuning_kwargs
t1 = time.process_time()
families = {f.key: f for f in FLOOR_FAMILIES}
positions, rows = {}, []
for factor in PRICE_FACTORS:
    kw = S.env_kwargs("hard-0.12", factor, 100, None)
    episodes = [S.episode_arrays(tuning_kwargs(kw), s) for s in range(1000, 1006)]
    tuned = {k: S.tune_family(families[k], episodes).policy
             for k in (S.STOP_AT_TUNED, S.GATE_TUNED, S.CUSUM_TUNED)}
    stoppers = [
        S.Stopper(S.NOSTOP, "NoStop", NoStop()),
        S.Stopper(S.STOP_AT_TUNED, "StopAt (tuned)", tuned[S.STOP_AT_TUNED]),
        S.Stopper(S.GATE_TUNED, "Gate (tuned)", tuned[S.GATE_TUNED]),
        S.Stopper(S.CUSUM_TUNED, "CUSUM (tuned)", tuned[S.CUSUM_TUNED]),
        S.Stopper(S.LOSS_PLATEAU, "LossPlateau", LossPlateau()),
        S.Stopper(S.EVALSTOP, "EvalStop(k=2)", EvalStop(2)),
        S.Stopper(S.BAYES, "Bayes", BayesStopper.from_env_kwargs(kw)),
        S.Stopper(S.ORACLE, "Oracle", None),
    ]
    rows += S.score_task("hard-0.12", factor, kw, stoppers, range(3), positions)
E8.write_e8(sys.argv[1], rows, E8.stop_position_figures(sys.argv[1], positions))
print(json.dumps({"cpu": time.process_time() - t1, "imports": t1 - t0}))
"""


def run_in(tree: Path, args: list[str], cwd: Path) -> tuple[float, float, str]:
    """Run ``python ARGS`` with ``tree``'s code; (CPU s of its process tree, wall s, stdout)."""
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONUNBUFFERED": "1"}
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE"):
        env.pop(name, None)
    cpu0, t0 = children_cpu(), time.perf_counter()
    proc = subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )
    wall, cpu = time.perf_counter() - t0, children_cpu() - cpu0
    if proc.returncode:
        sys.stderr.write(proc.stderr[-4000:])
        raise SystemExit(f"{tree}: {' '.join(args[:6])} ... exited with {proc.returncode}")
    return cpu, wall, proc.stdout


def learning_curve(stdout: str) -> list:
    """The learning curve ``train`` prints (the JSON line after its heading)."""
    lines = stdout.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("learning curve"):
            return json.loads(lines[i + 1])
    raise SystemExit(f"no learning curve in train's output:\n{stdout}")


def rounds(trees: dict[str, Path], n: int, job) -> dict[str, list]:
    """``job(name, tree, round)`` for each tree, ``n`` rounds in alternating order."""
    out: dict[str, list] = {name: [] for name in trees}
    order = list(trees.items())
    for r in range(n):
        for name, tree in order:
            res = job(name, tree, r)
            out[name].append(res)
            print(
                f"  round {r + 1}/{n} {name:4s} CPU {res[0]:8.2f} s  wall {res[1]:8.2f} s",
                flush=True,
            )
        order.reverse()
    return out


def bench_train(trees: dict[str, Path], n: int, timesteps: int, tmp: Path) -> None:
    """``train --task hard-0.05 --timesteps N`` from both trees; the same learning curve."""

    def job(name: str, tree: Path, r: int):
        out = tmp / f"{name}-{r}.zip"
        cmd = ["-m", "evalstop_cli.main", "train", "--task", "hard-0.05"]
        cmd += ["--timesteps", str(timesteps), "--out", str(out), "--no-progress"]
        cpu, wall, stdout = run_in(tree, cmd, tmp)
        return cpu, wall, learning_curve(stdout)

    res = rounds(trees, n, job)
    curves = [c for name in trees for _, _, c in res[name]]
    same = all(c == curves[0] for c in curves)
    print(f"learning curve ({'the same in every run' if same else 'DIFFERENT'}): {curves[0]}")
    if not same:
        for name in trees:
            print(f"  {name}: {[c for _, _, c in res[name]]}")
    target = TARGETS["train-30000"] if timesteps <= 30_000 else TARGETS["train"]
    cpu = {name: [c for c, _, _ in res[name]] for name in trees}
    print(seconds_ratio_line(f"train hard-0.05, {timesteps} steps", cpu["new"], cpu["ref"], target))


def bench_eval(trees: dict[str, Path], n: int, tmp: Path, model: str | None) -> None:
    """One periodic evaluation: the reference's SB3 ``evaluate_policy``, this tree's batch."""
    if model is None:
        model = str(tmp / "model.zip")
        if not Path(model).exists():  # a kept folder's model is reused (train never overwrites)
            cmd = ["-m", "evalstop_cli.main", "train", "--task", "hard-0.05"]
            cmd += ["--timesteps", "30000", "--out", model, "--no-progress"]
            run_in(trees["new"], cmd, tmp)
    scripts = {"ref": EVAL_SB3, "new": EVAL_BATCH}

    def job(name: str, tree: Path, r: int):
        _, wall, stdout = run_in(tree, ["-c", scripts[name], model], tmp)
        rec = json.loads(stdout.strip().splitlines()[-1])
        return rec["cpu"], wall, rec["returns"]

    res = rounds(trees, n, job)
    returns = [ret for name in trees for _, _, ret in res[name]]
    same = all(r == returns[0] for r in returns)
    print(f"returns ({'the same in every run' if same else 'DIFFERENT'}): {returns[0]}")
    cpu = {name: [c for c, _, _ in res[name]] for name in trees}
    print(
        seconds_ratio_line(
            "one periodic evaluation (8 episodes)", cpu["new"], cpu["ref"], TARGETS["eval"]
        )
    )


def _rows(path: Path) -> list[dict[str, str]]:
    if not path.exists():
        return []
    with path.open(encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def compare_csv(exp: str, new: Path, ref: Path) -> str:
    """How the rows both trees wrote to ``EXP.csv`` compare (shared keys, shared numbers)."""
    rn, rr = _rows(new / f"{exp}.csv"), _rows(ref / f"{exp}.csv")
    if not rn or not rr:
        return f"{exp}.csv: not written by both"
    # A row's identity without paths (a learned cell's hash names its model file).
    keys = [
        k
        for k in ("task", "price_factor", "group", "stopper", "policy", "seed")
        if k in rn[0] and k in rr[0]
    ]

    def index(rows):
        return {tuple(r[k] for k in keys): r for r in rows}

    a, b = index(rn), index(rr)
    common = [k for k in a if k in b]
    cols = [c for c in rr[0] if c in rn[0] and c not in keys and c not in ("cell", "params")]
    diff = []
    for k in common:
        for c in cols:
            x, y = a[k][c], b[k][c]
            try:
                same = float(x) == float(y) or (x != x and y != y) or x == y
            except ValueError:
                continue
            if not same:
                diff.append((k, c, x, y))
    head = (
        f"{exp}.csv: {len(common)} rows in both (of {len(a)} / {len(b)}), "
        f"{len(cols)} shared columns: "
    )
    if not diff:
        return head + "every shared numeric value equal"
    rows = sorted({"/".join(k) for k, _, _, _ in diff})
    k, c, x, y = diff[0]
    return head + (
        f"{len(diff)} values differ, in the rows {', '.join(rows[:12])}"
        f"{' ...' if len(rows) > 12 else ''} (e.g. {'/'.join(k)} {c}: {x} here, {y} there); "
        f"every other row equal"
    )


def bench_reproduce(
    trees: dict[str, Path], n: int, tmp: Path, experiments: str | None, extra: list[str]
) -> None:
    """``reproduce --quick [--experiments LIST]`` from both trees; per-experiment CPU."""

    def job(name: str, tree: Path, r: int):
        out = tmp / f"{name}-{r}"
        cmd = ["-m", "evalstop_cli.main", "reproduce", "--quick", "--out", str(out)]
        cmd += (["--experiments", experiments] if experiments else []) + extra
        cmd += ["--workers", "2"]
        cpu, wall, _ = run_in(tree, cmd, tmp)
        timings = json.loads((out / "timings.json").read_text(encoding="utf-8"))
        per = {t["experiment"]: t["cpu_s"] for t in timings["experiments"]}
        return cpu, wall, per

    res = rounds(trees, n, job)
    for name in trees:
        print(f"{name} per-experiment CPU s (round 1): {res[name][0][2]}")
    cpu = {name: [c for c, _, _ in res[name]] for name in trees}
    wanted = experiments.split(",") if experiments else []
    for exp in wanted:
        if all(exp in per for name in trees for _, _, per in res[name]):
            per = {name: [p[exp] for _, _, p in res[name]] for name in trees}
            print(
                seconds_ratio_line(
                    f"{exp} (timings.json cpu_s)", per["new"], per["ref"], TARGETS.get(exp)
                )
            )
        print(compare_csv(exp, tmp / "new-0", tmp / "ref-0"))
    title = f"reproduce --quick {'--experiments ' + experiments if experiments else '(whole)'}"
    target = TARGETS["quick"] if not experiments else None
    if len(wanted) == 1:
        target = TARGETS.get(wanted[0])
    print(seconds_ratio_line(title + ", process tree", cpu["new"], cpu["ref"], target))


def bench_e8(trees: dict[str, Path], n: int, tmp: Path) -> None:
    """The reference's quick E8 workload from both trees (:data:`E8_REF`, :data:`E8_NEW`)."""
    scripts = {"ref": E8_REF, "new": E8_NEW}
    inner: dict[str, list[float]] = {name: [] for name in trees}

    def job(name: str, tree: Path, r: int):
        out = tmp / f"e8-{name}-{r}"
        cpu, wall, stdout = run_in(tree, ["-c", scripts[name], str(out)], tmp)
        inner[name].append(json.loads(stdout.strip().splitlines()[-1])["cpu"])
        return cpu, wall, None

    res = rounds(trees, n, job)
    print(compare_csv("E8", tmp / "e8-new-0", tmp / "e8-ref-0"))
    cpu = {name: [c for c, _, _ in res[name]] for name in trees}
    print(seconds_ratio_line("E8 quick workload, process", cpu["new"], cpu["ref"], TARGETS["E8"]))
    print(
        seconds_ratio_line(
            "E8 quick workload, after imports", inner["new"], inner["ref"], TARGETS["E8"]
        )
    )


def main(argv: list[str] | None = None) -> int:
    """Run one comparison and print its figures."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ref", required=True, type=Path, help="the reference source tree")
    ap.add_argument("--new", type=Path, default=HERE, help="this tree (default: the script's)")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--keep", type=Path, default=None, help="keep outputs here")
    sub = ap.add_subparsers(dest="what", required=True)
    t = sub.add_parser("train")
    t.add_argument("--timesteps", type=int, default=30_000)
    e = sub.add_parser("eval")
    e.add_argument("--model", default=None, help="a hard-0.05 PPO model (default: train one)")
    r = sub.add_parser("reproduce")
    r.add_argument("--experiments", required=True)
    r.add_argument("extra", nargs="*", help="more reproduce flags for both trees (after --)")
    q = sub.add_parser("e8")
    k = sub.add_parser("quick")
    for part in (t, e, r, q, k):  # --rounds after the subcommand too, as the docs write it
        part.add_argument("--rounds", type=int, default=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.rounds < 1:
        raise SystemExit(f"--rounds: {args.rounds} is not allowed: an integer >= 1")
    trees = {"new": args.new.resolve(), "ref": args.ref.resolve()}
    for tree in trees.values():
        if not (tree / "evalstop_gym" / "__init__.py").exists():
            raise SystemExit(f"--ref/--new: {tree} is not a source tree (no evalstop_gym/)")
    load0 = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench_vs_ref-") as td:
        tmp = args.keep or Path(td)
        tmp.mkdir(parents=True, exist_ok=True)
        if args.what == "train":
            bench_train(trees, args.rounds, args.timesteps, tmp)
        elif args.what == "eval":
            bench_eval(trees, args.rounds, tmp, args.model)
        elif args.what == "reproduce":
            bench_reproduce(trees, args.rounds, tmp, args.experiments, args.extra)
        elif args.what == "e8":
            bench_e8(trees, args.rounds, tmp)
        else:
            bench_reproduce(trees, args.rounds, tmp, None, [])
    load1 = os.getloadavg()
    print(f"load average (1 min) before {load0[0]:.1f}, after {load1[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
