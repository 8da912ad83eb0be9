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
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import numbers
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from evalstop_gym.envs import EvalStopEnv
from evalstop_gym.fileio import write_hash_record

from ..learned import RECURRENT_ALGOS, algo_class, write_meta
from .conditioning import check_condition, make_conditioned_env
from .lean_predict import lean_rollouts
from .zoo import ENV_WRAPPERS, check_algo, load_hyperparams, load_zoo_config

#: Episode metrics Monitor writes to its CSV at the end of each episode.
MONITOR_KEYWORDS = (
    "mean_jct_h",
    "wasted_gpu_hours",
    "precision",
    "recall",
    "fpr",
    "mean_delivered_quality",
)
#: Evaluation episodes are seeded this far from the training seed (and the test seeds).
EVAL_SEED_OFFSET = 10_000
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


#: Keys of ``hyperparams`` that are not the SB3 class's keyword arguments.
OWN_HYPERPARAMS = ("env_wrapper",)


def check_hyperparams(algo: str, hyperparams: Any) -> None:
    """Refuse overrides that are not a dict of the SB3 class's keyword arguments, naming them.

    Before any env or folder is made: SB3 would raise a TypeError only when the model is built.
    """
    if hyperparams is None:
        return
    if not isinstance(hyperparams, dict) or not all(isinstance(k, str) for k in hyperparams):
        raise ValueError(
            f"hyperparams={hyperparams!r} is not allowed: a dict (a JSON object) of "
            f"{algo}'s keyword arguments"
        )
    import inspect

    params = inspect.signature(algo_class(algo).__init__).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    taken = {"self", "policy", "env", "seed", "verbose", "tensorboard_log", "device"}
    public = {name for name in params if not name.startswith("_")}
    allowed = sorted((public - taken) | set(OWN_HYPERPARAMS))
    unknown = sorted(set(hyperparams) - set(allowed))
    if unknown:
        raise ValueError(
            f"hyperparams={hyperparams!r} is not allowed: {', '.join(unknown)} "
            f"{'is not one' if len(unknown) == 1 else 'are not'} of {algo}'s keyword "
            f"arguments ({', '.join(allowed)})"
        )
    check_hyperparam_values(algo, hyperparams)


def _number(x: Any) -> bool:
    """A finite real number (a bool is not one)."""
    return isinstance(x, numbers.Real) and not isinstance(x, bool) and bool(np.isfinite(float(x)))


def _integer(x: Any) -> bool:
    """An integer (a bool is not one)."""
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


def _net_arch(x: Any) -> bool:
    """SB3's ``net_arch``: a list of layer sizes, or a dict of such lists (pi/vf/qf)."""
    sizes = lambda v: isinstance(v, list | tuple) and all(_integer(n) and n >= 1 for n in v)  # noqa: E731
    if isinstance(x, dict):
        return bool(x) and set(x) <= {"pi", "vf", "qf"} and all(sizes(v) for v in x.values())
    return sizes(x)


#: What a value of each SB3 hyperparameter may be, as SB3 would take it from JSON
#: (``--hyperparams``): a check, and the words that say what is allowed.  SB3 checks some
#: of these only when the model is built or at its first update (``n_epochs=0`` fails
#: inside ``train`` with an UnboundLocalError, ``gamma="x"`` in the first rollout), after
#: the envs and the log folder were made.
HYPERPARAM_VALUES: dict[str, tuple[Any, str]] = {
    # A schedule (a callable of the remaining progress) is SB3's too, from Python.
    "learning_rate": (lambda x: callable(x) or (_number(x) and x > 0), "a number > 0"),
    "n_steps": (lambda x: _integer(x) and x >= 1, "an integer >= 1"),
    "batch_size": (lambda x: _integer(x) and x >= 1, "an integer >= 1"),
    "n_epochs": (lambda x: _integer(x) and x >= 1, "an integer >= 1"),
    "gamma": (lambda x: _number(x) and 0 <= x <= 1, "a number in [0, 1]"),
    "gae_lambda": (lambda x: _number(x) and 0 <= x <= 1, "a number in [0, 1]"),
    "clip_range": (lambda x: callable(x) or (_number(x) and x > 0), "a number > 0"),
    "clip_range_vf": (
        lambda x: x is None or callable(x) or (_number(x) and x > 0),
        "null or a number > 0",
    ),
    "ent_coef": (lambda x: _number(x) and x >= 0, "a number >= 0"),
    "vf_coef": (lambda x: _number(x) and x >= 0, "a number >= 0"),
    "max_grad_norm": (  # inf: no clipping
        lambda x: x == float("inf") or (_number(x) and x > 0),
        "a number > 0",
    ),
    "target_kl": (lambda x: x is None or (_number(x) and x > 0), "null or a number > 0"),
    "rms_prop_eps": (lambda x: _number(x) and x > 0, "a number > 0"),
    "buffer_size": (lambda x: _integer(x) and x >= 1, "an integer >= 1"),
    "learning_starts": (lambda x: _integer(x) and x >= 0, "an integer >= 0"),
    "tau": (lambda x: _number(x) and 0 < x <= 1, "a number in (0, 1]"),
    "train_freq": (
        lambda x: (
            (_integer(x) and x >= 1)
            or (
                isinstance(x, list | tuple)
                and len(x) == 2
                and _integer(x[0])
                and x[0] >= 1
                and getattr(x[1], "value", x[1]) in ("step", "episode")
            )
        ),
        'an integer >= 1, or [n, "step"] / [n, "episode"]',
    ),
    "gradient_steps": (lambda x: _integer(x) and x >= -1, "an integer >= 0, or -1"),
    "target_update_interval": (lambda x: _integer(x) and x >= 1, "an integer >= 1"),
    "exploration_fraction": (lambda x: _number(x) and 0 <= x <= 1, "a number in [0, 1]"),
    "exploration_initial_eps": (lambda x: _number(x) and 0 <= x <= 1, "a number in [0, 1]"),
    "exploration_final_eps": (lambda x: _number(x) and 0 <= x <= 1, "a number in [0, 1]"),
    "sde_sample_freq": (lambda x: _integer(x) and x >= -1, "an integer >= -1"),
    "stats_window_size": (lambda x: _integer(x) and x >= 1, "an integer >= 1"),
    **{
        k: (lambda x: isinstance(x, bool), "true or false")
        for k in (
            "normalize_advantage",
            "use_sde",
            "use_rms_prop",
            "optimize_memory_usage",
            "share_features_extractor",
        )
    },
    "policy_kwargs": (
        lambda x: (
            isinstance(x, dict)
            and all(isinstance(k, str) for k in x)
            and ("net_arch" not in x or _net_arch(x["net_arch"]))
        ),
        "an object of the policy's keyword arguments, net_arch a list of layer sizes "
        "(integers >= 1) or an object of such lists under pi, vf or qf",
    ),
}


def check_hyperparam_values(algo: str, hyperparams: dict[str, Any]) -> None:
    """Refuse a hyperparameter value SB3 would reject late (see :data:`HYPERPARAM_VALUES`).

    One line naming the key, the value and what is allowed, before any env or folder is
    made; a key not listed is left to SB3 (a failure when the model is built is still
    reported in one line, and the log folder removed: :func:`train`).
    """
    for key, value in hyperparams.items():
        rule = HYPERPARAM_VALUES.get(key)
        if rule is not None and not rule[0](value):
            raise ValueError(f"hyperparams: {key}={value!r} is not allowed for {algo}: {rule[1]}")


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


@contextlib.contextmanager
def unchecked_distributions() -> Any:
    """Torch distributions built without checking their arguments, while the block runs.

    PPO and A2C build a ``Categorical`` at every rollout step and minibatch, and its
    argument checks (that the logits are real vectors, that a sample lies in the support)
    cost about a third of building, sampling and scoring one. The checks only read their
    inputs, so every number is the same without them; torch's default comes back after.
    """
    from torch.distributions import Distribution

    before = Distribution._validate_args
    Distribution.set_default_validate_args(False)
    try:
        yield
    finally:
        Distribution.set_default_validate_args(before)


def _as_config(
    config: TrainConfig | str | os.PathLike[str] | None, fields: dict[str, Any]
) -> TrainConfig:
    """``config`` itself, with ``fields`` replacing its values, or a config built of ``fields``."""
    if isinstance(config, TrainConfig):
        return dataclasses.replace(config, **fields) if fields else config
    if config is None:
        return TrainConfig(**fields)
    return TrainConfig(config, **fields)


def _publish(tmp_out: Path, out: Path) -> None:
    """Move the finished model file into place and record its hash."""
    with open(tmp_out, "rb+") as fh:
        os.fsync(fh.fileno())
    os.replace(tmp_out, out)
    # Loading a model runs pickled code: record its hash so that only this file is loaded.
    write_hash_record(out)


def _stamp(path: Path) -> tuple[int, int, int] | None:
    """What tells a file rewritten since: (inode, size, mtime in ns); None if absent."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


def _save_selected(
    model: Any, algo: str, best: Path, keep_best: bool, out: Path
) -> tuple[Any, bool]:
    """Save the best-evaluated model ``best`` (if asked and this run wrote it) or the last
    one to ``out``."""
    selected_best = keep_best and best.exists()
    if selected_best:
        model = algo_class(algo).load(best, device="cpu")
    model.save(out)
    return model, selected_best


def _check_recurrent(algo: str, wrapper: str | None, probe: EvalStopEnv) -> bool:
    """True for a recurrent algorithm, once its training setup keeps one job per LSTM thread.

    Its LSTM state is one job's memory, so it trains on per-job episodes, and
    ``Learned`` finds a job's state again from the job's history, which needs a
    window covering every checkpoint.
    """
    if algo not in RECURRENT_ALGOS:
        return False
    if wrapper is None:
        raise ValueError(f"algo={algo!r} needs env_wrapper={ENV_WRAPPERS[0]!r} (per-job episodes)")
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
    return out, out.with_suffix("")


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
    (:mod:`baselines.training.native_vec`) instead of N wrapped envs.  ``wrapper``
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
    return algo_class(algo)(
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
    batch_of: Any = None,
) -> Any:
    """Periodic evaluation on the same validation episodes each time.

    With ``batch_of`` (a ``() -> env`` wrapped as ``eval_env``'s one env), the episodes
    are played side by side in envs it builds (:mod:`baselines.training.batch_eval`).
    """
    from stable_baselines3.common.callbacks import EvalCallback

    if batch_of is not None:
        from .batch_eval import batch_eval_callback

        return batch_eval_callback(
            batch_of,
            eval_env,
            eval_seed,
            max(eval_freq // n_envs, 1),
            eval_episodes,
            str(log_dir),
            str(log_dir) if keep_best else None,
            _reseed(eval_env, eval_seed),
        )
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
    eval_env: Any,
    eval_seed: int,
    dict_space: Any,
    flatten: bool,
    episodes: int,
    batch: Any = None,
) -> float:
    """EvalStop(k=2)'s return on the very episodes every evaluation used (NaN without its field).

    Played side by side in ``batch`` (a :class:`baselines.training.batch_eval.BatchEvaluator`
    over those episodes) when given, else one by one in ``eval_env``.
    """
    from stable_baselines3.common.evaluation import evaluate_policy

    from ..policies import EvalStop

    if "consecutive_declines" not in dict_space.spaces:
        return float("nan")
    predictor = _PolicyPredictor(EvalStop(2), dict_space, flatten)
    if batch is not None:
        played = batch.evaluate(lambda obs: predictor.predict(obs)[0])
        if played is not None:
            return float(np.mean(played[0]))
    eval_env.seed(eval_seed)
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


def _monitored(make_env: Any, flatten: bool) -> Any:
    """``make_env()`` wrapped as ``make_vec_env`` wraps it (Monitor, then the flattening)."""
    from gymnasium.wrappers import FlattenObservation
    from stable_baselines3.common.monitor import Monitor

    env = Monitor(make_env())
    return FlattenObservation(env) if flatten else env


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
