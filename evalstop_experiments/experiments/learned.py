"""E6: learned stoppers (SB3) against the scripted ones, on E1's setting and at sigma = 0.12.

Two learned policies per noise level, as the fair comparison asks: one trained
on EvalStop's own boundary (job type, evals, consecutive declines) and one on
the full whitelist.  Models are trained once per output folder (reused on
--resume), in parallel, and then run through the same cells and seeds as the
scripted policies.
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path
from typing import Any

from evalstop_gym.parallel import Executor

from ..cells import EVALSTOP, Cell, PolicySpec, base_env, env_sweep
from ..plan import Experiment, Plan, ReproduceOptions
from ..summary import find, generic_section, rows_of

SIGMAS = (0.02, 0.12)
OBS_VARIANTS = {
    "boundary": "job_type,evals,consecutive_declines",
    "full": None,
}
BUDGET = {"quick": 20_000, "default": 300_000}
#: Periodic evaluations per training run and episodes per evaluation (quick / default).
#: Evaluating (cluster episodes with a network call per decision) took three quarters of
#: a quick model's CPU at (10, 8); quick keeps a best-of-five selection on 4 episodes.
EVALUATIONS = {"quick": (5, 4), "default": (10, 8)}
#: DQN: in our trials PPO (gamma 0.95 or 0.99) collapsed to stopping nearly every
#: job, while DQN with gamma 0.99 learned to stop hacking runs at their peak.
ALGO = "dqn"


def available() -> bool:
    """Whether SB3 and torch are installed (E6 trains models with them).

    Found, not imported: the workers train and play the models, and importing torch in
    this process only to ask would cost it most of a CPU second.
    """
    return all(importlib.util.find_spec(m) is not None for m in ("stable_baselines3", "torch"))


def eval_every(timesteps: int, evaluations: int = 10) -> int:
    """Timesteps between evaluations: ``evaluations`` per run, at least 2,000 apart, at least one."""
    return min(max(timesteps // evaluations, 2_000), timesteps)


def train_one(args: tuple[str, float, str | None, int, int, bool]) -> dict[str, Any]:
    """Train one E6 model: ``(path, sigma, obs_fields, timesteps, seed, quick)``; its timings."""
    from baselines.training import train

    path, sigma, fields, timesteps, seed, quick = args
    evaluations, episodes = EVALUATIONS["quick" if quick else "default"]
    env = {"eval_noise": sigma}
    if fields:
        env["obs_fields"] = fields
    res = train(
        path,
        algo=ALGO,
        timesteps=timesteps,
        env_kwargs=env,
        seed=seed,
        progress=False,
        eval_freq=eval_every(timesteps, evaluations),
        eval_episodes=episodes,
        # The batched env plays the episodes SB3's DummyVecEnv would, and the model comes
        # out the same to the bit (tests/policies/test_native_training.py), for less CPU.
        vec="native",
    )
    return {
        "path": str(res.path),
        "timesteps": res.timesteps,
        "seconds": res.seconds,
        "steps_per_second": res.steps_per_second,
    }


def train_models(
    out: Path,
    *,
    quick: bool,
    executor: Executor | None = None,
    timesteps: int | None = None,
    seed: int = 0,
) -> dict[str, dict[str, Any]]:
    """Train (or reuse) the four E6 models; return their metadata by path (``trained_now``: not reused)."""
    from baselines.learned import read_meta
    from evalstop_gym.fileio import verify_hash_record

    steps = timesteps or BUDGET["quick" if quick else "default"]
    tag = "_quick" if quick else ""
    jobs = []
    labels = {}
    for sigma in SIGMAS:
        for variant, fields in OBS_VARIANTS.items():
            # Quick models are evaluated less often: never reused by a full run.
            path = out / "models" / f"e6_{ALGO}_sigma{sigma}_{variant}_{steps}{tag}.zip"
            labels[str(path)] = (sigma, variant)
            # Reuse only a model whose bytes match the hash record train wrote (loading
            # one runs pickled code); any other file at that path is retrained over.
            if not verify_hash_record(path):
                if path.exists():
                    print(f"E6: {path} does not match its hash record; retraining it")
                jobs.append((str(path), sigma, fields, steps, seed, quick))
    if jobs:
        (out / "models").mkdir(parents=True, exist_ok=True)
        (executor or Executor()).map(train_one, jobs)
    info = {}
    for path, (sigma, variant) in labels.items():
        meta = read_meta(path)
        info[path] = {
            "sigma": sigma,
            "variant": variant,
            **{k: meta[k] for k in ("timesteps", "train_seconds", "learning_curve", "algo")},
            "evalstop_reference": meta.get("evalstop_reference"),
            "selected_at": meta.get("selected_at"),
            "trained_now": any(job[0] == path for job in jobs),
        }
    return info


def e6_cells(overrides: dict[str, Any], models: dict[str, dict[str, Any]]) -> list[Cell]:
    """The scripted policies and the learned models, at each noise level of :data:`SIGMAS`."""
    env0 = base_env(overrides)
    cells = env_sweep("E6", env0, "eval_noise", SIGMAS)
    for path, m in models.items():
        label = f"{m['algo'].upper()}[{m['variant']}]"
        fields = OBS_VARIANTS[m["variant"]]
        env = {**env0, "eval_noise": m["sigma"]}
        if fields:
            env["obs_fields"] = fields
        spec = PolicySpec("Learned", {"path": path}, label=label)
        cells.append(Cell("E6", spec, env, sweep="eval_noise", value=m["sigma"]))
    order = {sigma: i for i, sigma in enumerate(SIGMAS)}
    return sorted(cells, key=lambda c: order[c.value])  # stable: scripted, then learned


def build(out: Path, opts: ReproduceOptions, plan: Plan) -> None:
    """Train (or reuse) the learned stoppers, then run them beside the scripted ones."""
    if not available():
        plan.notes.append(
            "E6 skipped: stable-baselines3 and torch are not installed (pip install -e '.[train]')."
        )
        return
    out.mkdir(parents=True, exist_ok=True)
    models = train_models(
        out, quick=opts.quick, executor=opts.executor, timesteps=opts.train_timesteps
    )
    if not any(m["trained_now"] for m in models.values()):
        plan.reused.add("E6")
    plan.cells += e6_cells(opts.overrides, models)
    plan.header["E6 training"] = "; ".join(
        f"{Path(p).stem}: {m['algo'].upper()}, {m['timesteps']} steps in "
        f"{m['train_seconds']:.0f} s, kept the best evaluation (at {m['selected_at']})"
        for p, m in models.items()
    )
    plan.plots.append(functools.partial(_learning_curve_plot, models=models))


def _learning_curve_plot(out: Path, summary: list[dict[str, Any]], models: dict[str, Any]) -> Path:
    from ..plots import plot_learning_curves

    curves = {
        f"{m['algo'].upper()}[{m['variant']}] σ={m['sigma']}": [
            tuple(x) for x in m["learning_curve"]
        ]
        for m in models.values()
    }
    refs = {
        f"EvalStop σ={m['sigma']}": m["evalstop_reference"]
        for m in models.values()
        if m.get("evalstop_reference") is not None
    }
    return plot_learning_curves(curves, out / "e6_learning_curves.png", refs)


def section(summary: list[dict[str, Any]]) -> list[str]:
    """The generic table, then learned vs EvalStop on the utility return per noise level."""
    lines = generic_section(summary, "E6", EXPERIMENT.title)
    for s in rows_of(summary, "E6"):
        ev = find(summary, "E6", EVALSTOP, s["value"], s["variant"])
        if s["policy_kind"] != "Learned" or ev is None:
            continue
        diff, half = s["return"] - ev["return"], s["return_ci95"] + ev["return_ci95"]
        verdict = "better than" if diff > half else "worse than" if diff < -half else "on par with"
        lines.append(
            f"- {s['group']}: {s['policy']} utility {s['return']:.2f} vs EvalStop {ev['return']:.2f} "
            f"— {verdict} EvalStop."
        )
    return [*lines, ""]


def _wanted(opts: ReproduceOptions, exp: Experiment) -> bool:
    return opts.wants(exp.id, opts.learned)


EXPERIMENT = Experiment(
    "E6",
    "Scripted vs learned (SB3) stoppers",
    6,
    build,
    wanted=_wanted,
    section=section,
    long=True,
    starting="train (or reuse) the learned stoppers, then run them beside the scripted ones.",
    work="models",
)
