"""A learned stopper with Stable-Baselines3 (the command line: ``evalstop_cli.train``).

Hyperparameters and defaults come from the RL Zoo files ``hyperparams/<algo>.yml``.
Vectorised training (``make_vec_env``, ``--n-envs``), ``Monitor`` with the
episode metrics as info keywords, periodic evaluation (``EvalCallback``), a
progress bar, TensorBoard logs when tensorboard is installed, fixed seeds.
The model file is SB3's zip plus the metadata :class:`baselines.Learned` needs.
"""

from __future__ import annotations

import ast
import copy
import functools
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from evalstop_gym.envs import EvalStopEnv
from evalstop_gym.fileio import atomic_savefig, write_hash_record

from .learned import ALGO_CLASSES, RECURRENT_ALGOS, _algo, write_meta

#: Episode metrics Monitor writes to its CSV at the end of each episode.
MONITOR_KEYWORDS = (
    "mean_jct_h",
    "wasted_gpu_hours",
    "precision",
    "recall",
    "fpr",
    "mean_delivered_quality",
)

#: RL Zoo hyperparameter files, one per algorithm: the single source of the settings.
HYPERPARAMS_DIR = Path(__file__).with_name("hyperparams")
ALGOS: tuple[str, ...] = tuple(ALGO_CLASSES)
#: Keys of a zoo file that are not keyword arguments of the SB3 algorithm.
ZOO_KEYS = ("n_envs", "n_timesteps", "policy", "env_kwargs", "env_wrapper")
#: Training-env wrappers a zoo file may name (``env_wrapper``), by RL Zoo's dotted path.
ENV_WRAPPERS: tuple[str, ...] = ("evalstop_gym.envs.wrappers.JobEpisodes",)
#: The environment id the zoo files configure.
ZOO_ENV_ID = "EvalStop-v0"


def load_zoo_config(algo: str) -> dict[str, Any]:
    """The ``EvalStop-v0`` entry of ``hyperparams/<algo>.yml``, ``policy_kwargs`` as a dict.

    RL Zoo writes ``policy_kwargs`` as Python source (``"dict(net_arch=[64, 64])"``);
    it is read here as literals only, never evaluated.
    """
    import yaml

    if algo not in ALGOS:
        raise ValueError(f"algo={algo!r} is not allowed: one of {list(ALGOS)}")
    path = HYPERPARAMS_DIR / f"{algo}.yml"
    with open(path) as fh:
        conf = dict(yaml.safe_load(fh)[ZOO_ENV_ID])
    if isinstance(conf.get("policy_kwargs"), str):
        conf["policy_kwargs"] = _literal_dict_call(conf["policy_kwargs"], path)
    return conf


def _literal_dict_call(text: str, path: Path) -> dict[str, Any]:
    """``"dict(a=1, b=[2])"`` -> ``{"a": 1, "b": [2]}``; anything else is refused."""
    node = ast.parse(text, mode="eval").body
    if not (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "dict"
        and not node.args
    ):
        raise ValueError(f"{path}: policy_kwargs={text!r} is not allowed: dict(key=literal, ...)")
    return {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords if kw.arg}


def load_hyperparams(algo: str) -> dict[str, Any]:
    """The SB3 keyword arguments of ``algo`` (its zoo file without the zoo-only keys)."""
    return {k: v for k, v in load_zoo_config(algo).items() if k not in ZOO_KEYS}


@dataclass
class TrainResult:
    """A trained model's file, budget and learning curve."""

    path: Path
    timesteps: int
    seconds: float
    steps_per_second: float
    learning_curve: list[tuple[int, float, float]]  # (timesteps, mean return, std)
    model: Any = None  # the SB3 model as saved (the best-evaluated one with keep_best)


def train(
    out: str | Path,
    *,
    algo: str = "ppo",
    timesteps: int | None = None,
    n_envs: int | None = None,
    seed: int = 0,
    policy: str = "multi",
    env_kwargs: dict[str, Any] | None = None,
    eval_freq: int = 20_000,
    eval_episodes: int = 8,
    progress: bool = True,
    tensorboard: str | None = None,
    subproc: bool = False,
    label: str | None = None,
    verbose: int = 0,
    hyperparams: dict[str, Any] | None = None,
    keep_best: bool = True,
    vec: str = "dummy",
    make_base_env: Any = None,
) -> TrainResult:
    """Train a stopper on EvalStop-v0 and save it to ``out`` (a .zip).

    ``timesteps``, ``n_envs``, the training environment's arguments and the
    algorithm's hyperparameters default to ``hyperparams/<algo>.yml``;
    ``env_kwargs`` and ``hyperparams`` override them key by key.

    With ``keep_best`` (default) the saved model is the one that scored best in
    the periodic evaluations (validation episodes, seeded apart from the seeds
    ``baselines.evaluate`` and ``reproduce`` test on), not merely the last one:
    value-based learners like DQN keep oscillating after they have learned.

    ``make_base_env`` (a picklable ``() -> env``, e.g. a ``functools.partial`` of
    :class:`baselines.domain_random.DomainRandomised`) replaces the training
    envs' ``EvalStop-v0`` (the zoo wrapper still wraps it) and the periodic
    evaluation's; ``env_kwargs`` then only gives the observation the model records.
    """
    import torch

    zoo = load_zoo_config(algo)
    timesteps = int(zoo["n_timesteps"]) if timesteps is None else timesteps
    n_envs = int(zoo["n_envs"]) if n_envs is None else n_envs
    _check_args(policy, timesteps, n_envs)
    torch.set_num_threads(1)
    env_kwargs = {**zoo.get("env_kwargs", {}), **(env_kwargs or {})}
    out, log_dir = _output_paths(out)
    flatten = policy == "mlp"
    hp = {**load_hyperparams(algo), **(hyperparams or {})}
    # ``{"env_wrapper": null}`` in the overrides trains on whole cluster episodes.
    wrapper = _env_wrapper(hp.pop("env_wrapper", zoo.get("env_wrapper")), vec)
    recurrent = _check_recurrent(algo, wrapper, env_kwargs)
    venv, eval_env = _make_envs(
        env_kwargs,
        n_envs,
        seed,
        flatten,
        subproc,
        log_dir,
        vec=vec,
        wrapper=wrapper,
        make_base=make_base_env,
        eval_wrapped=recurrent,
    )
    if recurrent:  # as many evaluation jobs as whole cluster episodes would hold
        eval_episodes *= EvalStopEnv(**env_kwargs).config.resolved_workload().n_jobs
    model = _make_model(algo, hp, venv, seed, flatten, verbose, tensorboard, log_dir)
    callback = _eval_callback(
        eval_env, seed + EVAL_SEED_OFFSET, eval_freq, n_envs, eval_episodes, log_dir, keep_best
    )
    t0 = time.perf_counter()
    model.learn(
        total_timesteps=timesteps, callback=callback, progress_bar=progress and _has_progress_bar()
    )
    seconds = time.perf_counter() - t0
    trained_steps = int(model.num_timesteps)
    # Written under a temporary name and renamed once complete (model and record), so an
    # interrupted run never leaves a half-written model at ``out``.
    tmp_out = out.with_name(f".{out.stem}.tmp.zip")
    model, selected_best = _save_selected(model, algo, log_dir, keep_best, tmp_out)
    curve = _learning_curve(log_dir / "evaluations.npz")
    probe = EvalStopEnv(**env_kwargs)
    # A custom base env (e.g. a padded mixture) may observe more than env_kwargs' env.
    space = probe.observation_space if make_base_env is None else make_base_env().observation_space
    ref = _evalstop_reference(eval_env, seed + EVAL_SEED_OFFSET, space, flatten, eval_episodes)
    write_meta(
        tmp_out,
        {
            **_observation_meta(space, probe.window, flatten),
            "algo": algo,
            "policy": policy,
            "env_kwargs": env_kwargs,
            "timesteps": trained_steps,
            "selected": "best periodic evaluation" if selected_best else "last",
            "selected_at": _best_step(curve) if selected_best else trained_steps,
            "train_seconds": seconds,
            "seed": seed,
            "n_envs": n_envs,
            "env_wrapper": wrapper,
            "train_env": None if make_base_env is None else repr(make_base_env),
            "eval_episodes": "job" if recurrent else "cluster",
            "hyperparams": hp,
            "label": label,
            "learning_curve": curve,
            "evalstop_reference": ref,
        },
    )
    with open(tmp_out, "rb+") as fh:
        os.fsync(fh.fileno())
    os.replace(tmp_out, out)
    # Loading a model runs pickled code: record its hash so that only this file is loaded.
    write_hash_record(out)
    venv.close()
    eval_env.close()
    return TrainResult(out, trained_steps, seconds, trained_steps / seconds, curve, model)


def _save_selected(
    model: Any, algo: str, log_dir: Path, keep_best: bool, out: Path
) -> tuple[Any, bool]:
    """Save the best-evaluated model (if asked and evaluated) or the last one to ``out``."""
    best = log_dir / "best_model.zip"
    selected_best = keep_best and best.exists()
    if selected_best:
        model = _algo(algo).load(best, device="cpu")
    model.save(out)
    return model, selected_best


#: Evaluation episodes are seeded this far from the training seed (and the test seeds).
EVAL_SEED_OFFSET = 10_000


def _check_args(policy: str, timesteps: int, n_envs: int) -> None:
    if policy not in ("multi", "mlp"):
        raise ValueError(
            f"policy={policy!r} is not allowed: 'multi' (Dict obs) or 'mlp' (flattened)"
        )
    if timesteps < 1 or n_envs < 1:
        raise ValueError(f"timesteps={timesteps} and n_envs={n_envs} must be >= 1")


def _check_recurrent(algo: str, wrapper: str | None, env_kwargs: dict[str, Any]) -> bool:
    """True for a recurrent algorithm, once its training setup keeps one job per LSTM thread.

    Its LSTM state is one job's memory, so it trains on per-job episodes, and
    ``Learned`` finds a job's state again from the job's history, which needs a
    window covering every checkpoint.
    """
    if algo not in RECURRENT_ALGOS:
        return False
    if wrapper is None:
        raise ValueError(f"algo={algo!r} needs env_wrapper={ENV_WRAPPERS[0]!r} (per-job episodes)")
    probe = EvalStopEnv(**env_kwargs)
    k = probe.config.resolved_calibration().evals_per_job
    if probe.window < k or "evals" not in probe.obs_fields:
        raise ValueError(
            f"algo={algo!r} needs 'evals' in obs_fields and eval_window None or >= {k} "
            f"(got obs_fields={list(probe.obs_fields)}, eval_window={probe.window})"
        )
    return True


def _output_paths(out: str | Path) -> tuple[Path, Path]:
    """The model file (``.zip``) and its log folder (``models/ppo.zip`` -> ``models/ppo/``)."""
    out = Path(out)
    if out.suffix != ".zip":
        out = out.with_suffix(".zip")
    log_dir = out.with_suffix("")
    log_dir.mkdir(parents=True, exist_ok=True)
    return out, log_dir


def _make_envs(
    env_kwargs: dict[str, Any],
    n_envs: int,
    seed: int,
    flatten: bool,
    subproc: bool,
    log_dir: Path,
    *,
    vec: str = "dummy",
    wrapper: str | None = None,
    make_base: Any = None,
    eval_wrapped: bool = False,
) -> tuple[Any, Any]:
    """The training vector env (with Monitor logs) and the one-env evaluation vector env.

    ``vec="native"`` trains on N simulators batched in one process
    (:mod:`baselines.native_vec`) instead of N wrapped envs.  ``wrapper``
    (:data:`ENV_WRAPPERS`) wraps the training envs, and the evaluation env only
    with ``eval_wrapped`` (a recurrent model, whose state SB3's evaluation would
    carry across a cluster episode's interleaved jobs): otherwise the periodic
    evaluation plays whole cluster episodes, the score the model is selected by.
    """
    from gymnasium.wrappers import FlattenObservation
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

    wrap = FlattenObservation if flatten else None
    make_env = functools.partial(_make_env, env_kwargs, None, make_base)  # picklable
    make_train_env = functools.partial(_make_env, env_kwargs, wrapper, make_base)
    if vec == "native":
        if make_base is not None:
            raise ValueError(
                "make_base_env needs vec='dummy' (the native vec env is EvalStop-v0's)"
            )
        from .native_vec import make_native_venv

        (log_dir / "monitor").mkdir(parents=True, exist_ok=True)
        monitor = str(log_dir / "monitor" / "native")
        venv = make_native_venv(n_envs, seed, flatten, env_kwargs, monitor, MONITOR_KEYWORDS)
    else:
        venv = make_vec_env(
            make_train_env,
            n_envs=n_envs,
            seed=seed,
            wrapper_class=wrap,
            monitor_dir=str(log_dir / "monitor"),
            # A job episode has no cluster metrics to log.
            monitor_kwargs={"info_keywords": () if wrapper else MONITOR_KEYWORDS},
            vec_env_cls=SubprocVecEnv if subproc else DummyVecEnv,
        )
    eval_env = make_vec_env(
        make_train_env if eval_wrapped else make_env,
        n_envs=1,
        seed=seed + EVAL_SEED_OFFSET,
        wrapper_class=wrap,
    )
    return venv, eval_env


def _make_model(
    algo: str,
    hp: dict[str, Any],
    venv: Any,
    seed: int,
    flatten: bool,
    verbose: int,
    tensorboard: str | None,
    log_dir: Path,
) -> Any:
    """The SB3 model; TensorBoard logs go to ``log_dir/tb`` when tensorboard is installed."""
    if tensorboard is None:
        try:
            import tensorboard as _  # noqa: F401

            tensorboard = str(log_dir / "tb")
        except ImportError:
            tensorboard = None
    lstm = "Lstm" if algo in RECURRENT_ALGOS else ""
    return _algo(algo)(
        f"Mlp{lstm}Policy" if flatten else f"MultiInput{lstm}Policy",
        venv,
        seed=seed,
        verbose=verbose,
        tensorboard_log=tensorboard,
        device="cpu",
        **copy.deepcopy(hp),  # SB3 fills policy_kwargs in place: keep ours clean
    )


def _eval_callback(
    eval_env: Any,
    eval_seed: int,
    eval_freq: int,
    n_envs: int,
    eval_episodes: int,
    log_dir: Path,
    keep_best: bool,
) -> Any:
    """Periodic evaluation on the same validation episodes each time."""
    from stable_baselines3.common.callbacks import EvalCallback

    return EvalCallback(
        eval_env,
        eval_freq=max(eval_freq // n_envs, 1),
        n_eval_episodes=eval_episodes,
        log_path=str(log_dir),
        best_model_save_path=str(log_dir) if keep_best else None,
        deterministic=True,
        verbose=0,
        callback_after_eval=_reseed(eval_env, eval_seed),
    )


def _evalstop_reference(
    eval_env: Any, eval_seed: int, dict_space: Any, flatten: bool, episodes: int
) -> float:
    """EvalStop(k=2)'s return on the very episodes every evaluation used (NaN without its field)."""
    from stable_baselines3.common.evaluation import evaluate_policy

    from .policies import EvalStop

    if "consecutive_declines" not in dict_space.spaces:
        return float("nan")
    eval_env.seed(eval_seed)
    predictor = _PolicyPredictor(EvalStop(2), dict_space, flatten)
    return float(evaluate_policy(predictor, eval_env, episodes)[0])


def _observation_meta(space: Any, window: int, flatten: bool) -> dict[str, Any]:
    """What :class:`baselines.Learned` needs to rebuild and check the observation.

    The window recorded is the one ``space`` shows (a padded base env's may be wider
    than its ``env_kwargs``'), else ``window``.
    """
    from evalstop_gym.envs.wrappers import WINDOW_FIELDS

    shown = [s.shape[0] // 2 for k, s in space.spaces.items() if k in WINDOW_FIELDS]
    return {
        "flatten": flatten,
        "obs_fields": list(space.spaces),
        "eval_window": shown[0] if shown else window,
        "observation_space": {
            k: {"low": s.low.tolist(), "high": s.high.tolist()} for k, s in space.spaces.items()
        },
    }


def _reseed_callback_class() -> Any:
    from stable_baselines3.common.callbacks import BaseCallback

    class Reseed(BaseCallback):
        """After each evaluation, rewind the eval env's seed: every evaluation then
        runs the same episodes, so the learning curve compares like with like."""

        def __init__(self, env: Any, seed: int) -> None:
            super().__init__()
            self.env, self.seed = env, seed

        def _on_step(self) -> bool:
            self.env.seed(self.seed)
            return True

    return Reseed


def _reseed(env: Any, seed: int) -> Any:
    return _reseed_callback_class()(env, seed)


class _PolicyPredictor:
    """A ``baselines`` policy behind SB3's ``predict``, so ``evaluate_policy`` can run it."""

    def __init__(self, policy: Any, dict_space: Any, flatten: bool) -> None:
        self.policy, self.space, self.flatten = policy, dict_space, flatten

    def predict(
        self, obs: Any, state: Any = None, episode_start: Any = None, deterministic: bool = True
    ):
        from gymnasium.spaces import unflatten

        if self.flatten:
            rows = [unflatten(self.space, o) for o in obs]
        else:
            n = len(next(iter(obs.values())))
            rows = [{k: v[i] for k, v in obs.items()} for i in range(n)]
        return np.array([self.policy.act(r) for r in rows], dtype=np.int64), state


def _make_env(env_kwargs: dict[str, Any], wrapper: str | None = None, make_base: Any = None) -> Any:
    """EvalStop-v0 with the episode metrics lifted into info, so Monitor can log them.

    With ``wrapper`` (:data:`ENV_WRAPPERS`), EvalStop-v0 inside that wrapper instead;
    ``make_base()`` builds the env in place of EvalStop-v0.
    """
    import gymnasium as gym

    import evalstop_gym  # noqa: F401
    from evalstop_gym.envs import wrappers

    env = make_base() if make_base is not None else gym.make("EvalStop-v0", **env_kwargs)
    if wrapper is not None:
        return getattr(wrappers, wrapper.rpartition(".")[2])(env)
    return wrappers.EpisodeMetricsInfo(env)


def _env_wrapper(name: str | None, vec: str) -> str | None:
    """Check a zoo file's ``env_wrapper`` (None, or one of :data:`ENV_WRAPPERS`)."""
    if name is None:
        return None
    if name not in ENV_WRAPPERS:
        raise ValueError(f"env_wrapper={name!r} is not allowed: one of {list(ENV_WRAPPERS)}")
    if vec != "dummy":
        raise ValueError(f"env_wrapper={name!r} needs vec='dummy' (got vec={vec!r})")
    return name


def _has_progress_bar() -> bool:
    try:
        import rich  # noqa: F401
        import tqdm  # noqa: F401
    except ImportError:
        return False
    return True


def _best_step(curve: list[tuple[int, float, float]]) -> int:
    return max(curve, key=lambda c: c[1])[0] if curve else 0


def _learning_curve(npz: Path) -> list[tuple[int, float, float]]:
    if not npz.exists():
        return []
    data = np.load(npz)
    return [
        (int(t), float(np.mean(r)), float(np.std(r)))
        for t, r in zip(data["timesteps"], data["results"])
    ]


def plot_learning_curves(
    curves: dict[str, list[tuple[int, float, float]]],
    path: Path,
    refs: dict[str, float] | None = None,
) -> Path:
    """Plot evaluation return against timesteps per model, with reference lines; to ``path``."""
    from matplotlib.figure import Figure  # no pyplot: the caller's backend stays as it is

    fig = Figure(figsize=(7, 4), constrained_layout=True)
    ax = fig.subplots()
    for name, curve in curves.items():
        if not curve:
            continue
        t, m, s = (np.array(x) for x in zip(*curve))
        ax.plot(t, m, marker="o", ms=3, label=name)
        ax.fill_between(t, m - s, m + s, alpha=0.15)
    for name, v in (refs or {}).items():
        if v is not None and np.isfinite(v):
            ax.axhline(v, ls="--", lw=1, color="grey")
            ax.annotate(name, (ax.get_xlim()[0], v), fontsize=7, va="bottom", color="grey")
    ax.set_xlabel("training timesteps")
    ax.set_ylabel("evaluation return (utility)")
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    ax.set_title("Learned stoppers: learning curves (periodic evaluation)")
    return atomic_savefig(fig, path, dpi=110)
