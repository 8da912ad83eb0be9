"""Train a learned stopper with Stable-Baselines3 (the command line: ``evalstop_cli.train``).

A run's settings are one :class:`TrainConfig`; ``train(config)`` runs it. Hyperparameters
and defaults come from the RL Zoo files ``baselines/hyperparams/<algo>.yml``
(:mod:`baselines.training.zoo`). Vectorised training (``make_vec_env``, ``n_envs``),
``Monitor`` with the episode metrics as info keywords, periodic evaluation
(``EvalCallback``), a progress bar, TensorBoard logs when tensorboard is installed, fixed
seeds. The model file is SB3's zip plus the metadata :class:`baselines.Learned` needs.

    from baselines.training import TrainConfig, train

    result = train(TrainConfig(out="models/dqn.zip", algo="dqn", timesteps=300_000))
    result = train("models/dqn.zip", algo="dqn", timesteps=300_000)  # the same run

The steps live in :mod:`.train_parts` (the hyperparameter checks, the envs, the model, the
periodic evaluation, the model file); this module keeps the config and the run, and every
name the parts define stays importable from here.
"""

# Re-exports: the parts' names stay importable from this module (its import path is the API).
# ruff: noqa: F401

from __future__ import annotations

import contextlib
import dataclasses
import functools
import numbers
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalstop_gym.envs import EvalStopEnv

from ..learned import RECURRENT_ALGOS, algo_class, write_meta
from .conditioning import check_condition, make_conditioned_env
from .lean_predict import lean_rollouts
from .train_parts import evaluation as _evaluation
from .train_parts import hyperparam_checks as _checks
from .train_parts.envs import (
    EVAL_SEED_OFFSET,
    MONITOR_KEYWORDS,
    build_env,
    check_recurrent,
    env_wrapper,
    make_envs,
    monitored,
)
from .train_parts.evaluation import best_step, eval_callback, evalstop_reference, learning_curve
from .train_parts.hyperparam_checks import (
    HYPERPARAM_VALUES,
    OWN_HYPERPARAMS,
    check_hyperparam_values,
    check_hyperparams,
)
from .train_parts.model import has_progress_bar, make_model, unchecked_distributions
from .train_parts.model_file import observation_meta, output_paths, publish, save_selected, stamp
from .zoo import ENV_WRAPPERS, check_algo, load_hyperparams, load_zoo_config

# The helpers' old private names, which train() and tests reach: assigned, since a module
# imports no other module's private name (tests/test_architecture.py).  _train_in looks up
# _make_model and unchecked_distributions here: patch them on this module.
_make_envs = make_envs
_make_env = build_env
_monitored = monitored
_env_wrapper = env_wrapper
_check_recurrent = check_recurrent
_eval_callback = eval_callback
_evalstop_reference = evalstop_reference
_learning_curve = learning_curve
_best_step = best_step
_output_paths = output_paths
_publish = publish
_stamp = stamp
_save_selected = save_selected
_observation_meta = observation_meta
_make_model = make_model
_has_progress_bar = has_progress_bar
_number = _checks._number
_integer = _checks._integer
_net_arch = _checks._net_arch
_reseed_callback_class = _evaluation._reseed_callback_class
_reseed = _evaluation._reseed
_PolicyPredictor = _evaluation._PolicyPredictor

#: The observation a model gets: ``multi`` (MultiInputPolicy on the Dict) or ``mlp``
#: (MlpPolicy on FlattenObservation).
POLICIES = ("multi", "mlp")
#: Training vector envs: ``dummy`` (SB3's, over N wrapped envs) or ``native`` (N simulators
#: batched in one process, :mod:`baselines.training.native_vec`).
VECS = ("dummy", "native")


@dataclass(frozen=True)
class TrainConfig:
    """The settings of one training run, each field documented where it is declared.

    ``timesteps``, ``n_envs``, the training environment's arguments and the algorithm's
    hyperparameters default to ``baselines/hyperparams/<algo>.yml``; ``env_kwargs`` and
    ``hyperparams`` override them key by key. Invalid values fail here, naming the field.
    """

    out: str | Path
    """Model file to write (``.zip`` is added if missing); logs go to the folder of that name."""
    algo: str = "ppo"
    """SB3 algorithm: a key of :data:`baselines.learned.ALGO_CLASSES` (``ppo``, ``dqn``, ...)."""
    timesteps: int | None = None
    """Training budget in env steps (None: the zoo file's ``n_timesteps``)."""
    n_envs: int | None = None
    """Parallel training envs (None: the zoo file's ``n_envs``)."""
    seed: int = 0
    """Seed of the model and the training envs; evaluation is seeded :data:`EVAL_SEED_OFFSET`
    away."""
    policy: str = "multi"
    """``multi`` (MultiInputPolicy on the Dict observation) or ``mlp`` (MlpPolicy, flattened)."""
    env_kwargs: dict[str, Any] | None = None
    """``EvalStop-v0`` arguments over the zoo file's ``env_kwargs``."""
    eval_freq: int = 20_000
    """Training timesteps between periodic evaluations."""
    eval_episodes: int = 8
    """Cluster episodes per periodic evaluation (a recurrent model plays as many jobs)."""
    progress: bool = True
    """Show a progress bar (when rich and tqdm are installed)."""
    tensorboard: str | None = None
    """TensorBoard log folder (None: ``<out folder>/tb`` when tensorboard is installed)."""
    subproc: bool = False
    """Run the training envs in subprocesses (SubprocVecEnv) instead of one (DummyVecEnv)."""
    label: str | None = None
    """Free text recorded in the model's metadata."""
    verbose: int = 0
    """SB3's verbosity."""
    hyperparams: dict[str, Any] | None = None
    """SB3 keyword arguments over the zoo file's; ``{"env_wrapper": None}`` trains on whole
    cluster episodes instead of the zoo file's per-job episodes."""
    keep_best: bool = True
    """Save the model that scored best in the periodic evaluations (validation episodes,
    seeded apart from the seeds ``baselines.evaluate`` and ``reproduce`` test on), not merely
    the last one: value-based learners like DQN keep oscillating after they have learned."""
    vec: str = "dummy"
    """``dummy`` (SB3's vector env over N wrapped envs) or ``native`` (N simulators batched in
    one process, :class:`baselines.training.native_vec.NativeVecEnv`)."""
    batch_eval: bool = True
    """Play each periodic evaluation's episodes side by side, the actions of every env in
    one call of the policy (:mod:`baselines.training.batch_eval`: the same episodes,
    actions and numbers as SB3's one-by-one ``EvalCallback``, which False plays; a
    recurrent model always plays SB3's way)."""
    lean_predict: bool = True
    """Ask the policy for each rollout step's actions without ``predict``'s per-call set-up
    (:func:`baselines.training.lean_predict.lean_rollouts`: the same tensors into the same
    forward pass, so the same actions, random draws and weights; False runs SB3's
    ``predict``)."""
    make_base_env: Any = None
    """A picklable ``() -> env`` (e.g. a ``functools.partial`` of
    :class:`baselines.training.domain_random.DomainRandomised`) that replaces the training
    envs' ``EvalStop-v0`` (the zoo wrapper still wraps it) and the periodic evaluation's;
    ``env_kwargs`` then only gives the observation the model records."""
    condition: str = "none"
    """What the model sees beside the boundary fields (:data:`~baselines.training.conditioning.CONDITIONS`):
    ``none``; ``task`` adds the task's eval noise, GPU-hour price and evals per run (the
    ``task`` field); ``task+summary`` also a few statistics of the eval history (the
    ``summary`` field).  Play such a model through
    :class:`~baselines.training.conditioning.Conditioned` (or ``ConditionedSource``)."""

    def __post_init__(self) -> None:
        """Refuse an unknown algorithm, policy or vector env, a budget below one and an
        evaluation of no episodes or at no interval."""
        check_algo(self.algo)
        check_condition(self.condition)
        if self.policy not in POLICIES:
            raise ValueError(
                f"policy={self.policy!r} is not allowed: 'multi' (Dict obs) or 'mlp' (flattened)"
            )
        if self.vec not in VECS:
            raise ValueError(f"vec={self.vec!r} is not allowed: one of {list(VECS)}")
        for name in ("timesteps", "n_envs"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise ValueError(
                    f"timesteps={self.timesteps} and n_envs={self.n_envs} must be >= 1"
                )
        for name in ("eval_episodes", "eval_freq"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
                raise ValueError(f"{name}={value!r} is not allowed: an integer >= 1")
        check_hyperparams(self.algo, self.hyperparams)


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
    config: TrainConfig | str | os.PathLike[str] | None = None, /, **fields: Any
) -> TrainResult:
    """Train a stopper on EvalStop-v0 as ``config`` says and save it to ``config.out``.

    ``train(config)`` runs a :class:`TrainConfig`; ``train(out, algo=..., ...)`` (or
    ``train(out=..., ...)``) builds one from its fields first, and ``fields`` given beside a
    config replace its values.

    Returns:
        The model file, the budget trained, the time it took and the learning curve.
    """
    import torch

    config = _as_config(config, fields)
    zoo = load_zoo_config(config.algo)
    config = dataclasses.replace(
        config,
        timesteps=int(zoo["n_timesteps"]) if config.timesteps is None else config.timesteps,
        n_envs=int(zoo["n_envs"]) if config.n_envs is None else config.n_envs,
        env_kwargs={**zoo.get("env_kwargs", {}), **(config.env_kwargs or {})},
    )
    if config.condition != "none":
        config = dataclasses.replace(
            config,
            make_base_env=functools.partial(
                make_conditioned_env,
                config.env_kwargs,
                config.condition == "task+summary",
                config.make_base_env,
            ),
        )
    torch.set_num_threads(1)
    # One env built only to read the task's config and spaces.
    probe = EvalStopEnv(**config.env_kwargs)
    hp = {**load_hyperparams(config.algo), **(config.hyperparams or {})}
    if config.algo in ("ppo", "recurrentppo") and hp.get("normalize_advantage", True):
        # What PPO asserts when it is built: advantages of one sample cannot be normalised.
        if hp.get("n_steps", 2) * config.n_envs < 2:
            raise ValueError(
                f"hyperparams: n_steps={hp['n_steps']} with n_envs={config.n_envs} is not "
                f"allowed for {config.algo}: n_steps * n_envs >= 2 (or normalize_advantage "
                "false)"
            )
        if hp.get("batch_size", 2) < 2:
            raise ValueError(
                f"hyperparams: batch_size={hp['batch_size']} is not allowed for "
                f"{config.algo}: an integer >= 2 (or normalize_advantage false)"
            )
    out, log_dir = _output_paths(config.out)
    # The outermost folder this call makes (None: the log folder exists already).
    made = (
        None
        if log_dir.exists()
        else next(d for d in (log_dir, *log_dir.parents) if d.parent.exists())
    )
    log_dir.mkdir(parents=True, exist_ok=True)
    try:
        return _train_in(config, zoo, probe, hp, out, log_dir)
    except _BuildError as err:
        # Nothing trained: the log folder this call made holds only its envs' empty logs.
        # Its parents this call made go too, each only if empty (another run may be
        # writing beside it under a root both made).
        if made is not None:
            shutil.rmtree(log_dir, ignore_errors=True)
            for parent in log_dir.parents:
                if not parent.is_relative_to(made):
                    break
                try:
                    parent.rmdir()
                except OSError:
                    break
        cause = f"{type(err.__cause__).__name__}: {err.__cause__}"
        if config.hyperparams:
            raise ValueError(
                f"hyperparams={config.hyperparams!r} is not allowed: {config.algo} refused "
                f"them ({cause})"
            ) from err.__cause__
        raise ValueError(f"{config.algo} could not build its model ({cause})") from err.__cause__


class _BuildError(Exception):
    """The SB3 model could not be built from the hyperparameters (the cause is chained)."""


def _train_in(
    config: TrainConfig, zoo: dict[str, Any], probe: Any, hp: dict[str, Any], out: Path,
    log_dir: Path,
) -> TrainResult:  # fmt: skip
    """:func:`train`'s work once its output paths are fixed."""
    flatten = config.policy == "mlp"
    # ``{"env_wrapper": null}`` in the overrides trains on whole cluster episodes.
    wrapper = _env_wrapper(hp.pop("env_wrapper", zoo.get("env_wrapper")), config.vec)
    recurrent = _check_recurrent(config.algo, wrapper, probe)
    venv, eval_env = _make_envs(
        config.env_kwargs,
        config.n_envs,
        config.seed,
        flatten,
        config.subproc,
        log_dir,
        vec=config.vec,
        wrapper=wrapper,
        make_base=config.make_base_env,
        eval_wrapped=recurrent,
    )
    eval_episodes = config.eval_episodes
    if recurrent:  # as many evaluation jobs as whole cluster episodes would hold
        eval_episodes *= probe.config.resolved_workload().n_jobs
    try:
        model = _make_model(
            config.algo, hp, venv, config.seed, flatten, config.verbose, config.tensorboard,
            log_dir,
        )  # fmt: skip
    except (AssertionError, ValueError, TypeError, KeyError) as err:
        venv.close()
        eval_env.close()
        raise _BuildError from err
    eval_seed = config.seed + EVAL_SEED_OFFSET
    callback = _eval_callback(
        eval_env,
        eval_seed,
        config.eval_freq,
        config.n_envs,
        eval_episodes,
        log_dir,
        config.keep_best,
        batch_of=None
        if recurrent or not config.batch_eval
        else functools.partial(
            _monitored,
            functools.partial(_make_env, config.env_kwargs, None, config.make_base_env),
            flatten,
        ),
    )
    t0 = time.perf_counter()
    lean = lean_rollouts(model) if config.lean_predict else contextlib.nullcontext()
    # What an earlier run may have left in the log folder: this run reads back only what
    # its own evaluations write (a stale best_model.zip would be loaded, running its
    # pickled code, and saved as this run's model when this run makes no evaluation).
    best, evaluations = log_dir / "best_model.zip", log_dir / "evaluations.npz"
    left = {p: _stamp(p) for p in (best, evaluations)}
    with unchecked_distributions(), lean:
        model.learn(
            total_timesteps=config.timesteps,
            callback=callback,
            progress_bar=config.progress and _has_progress_bar(),
        )
    seconds = time.perf_counter() - t0
    trained_steps = int(model.num_timesteps)
    # Written under a temporary name and renamed once complete (model and record), so an
    # interrupted run never leaves a half-written model at ``out``.
    tmp_out = out.with_name(f".{out.stem}.tmp.zip")
    model, selected_best = _save_selected(
        model, config.algo, best, config.keep_best and _stamp(best) != left[best], tmp_out
    )
    curve = _learning_curve(evaluations) if _stamp(evaluations) != left[evaluations] else []
    # A custom base env (e.g. a padded mixture) may observe more than env_kwargs' env.
    space = (
        probe.observation_space
        if config.make_base_env is None
        else config.make_base_env().observation_space
    )
    batch = getattr(callback, "batch", None)
    ref = _evalstop_reference(eval_env, eval_seed, space, flatten, eval_episodes, batch)
    write_meta(
        tmp_out,
        {
            **_observation_meta(space, probe.window, flatten),
            "algo": config.algo,
            "policy": config.policy,
            "env_kwargs": config.env_kwargs,
            "timesteps": trained_steps,
            "selected": "best periodic evaluation" if selected_best else "last",
            "selected_at": _best_step(curve) if selected_best else trained_steps,
            "train_seconds": seconds,
            "seed": config.seed,
            "n_envs": config.n_envs,
            "env_wrapper": wrapper,
            "train_env": None if config.make_base_env is None else repr(config.make_base_env),
            "condition": config.condition,
            "eval_episodes": "job" if recurrent else "cluster",
            "hyperparams": hp,
            "label": config.label,
            "learning_curve": curve,
            "evalstop_reference": ref,
        },
    )
    _publish(tmp_out, out)
    venv.close()
    eval_env.close()
    if batch is not None:
        batch.close()
    return TrainResult(out, trained_steps, seconds, trained_steps / seconds, curve, model)


def _as_config(
    config: TrainConfig | str | os.PathLike[str] | None, fields: dict[str, Any]
) -> TrainConfig:
    """``config`` itself, with ``fields`` replacing its values, or a config built of ``fields``."""
    if isinstance(config, TrainConfig):
        return dataclasses.replace(config, **fields) if fields else config
    if config is None:
        return TrainConfig(**fields)
    return TrainConfig(config, **fields)
