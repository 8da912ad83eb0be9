"""The envs a run trains and is evaluated on, and what a recurrent model needs of them.

:func:`make_envs` builds the training vector env (with Monitor logs; SB3's over wrapped
envs, or the native batched one) and the one-env evaluation vector env, seeded
:data:`EVAL_SEED_OFFSET` away; :func:`build_env` is one such env (EvalStop-v0 with the
episode metrics in info, or inside the zoo file's wrapper), :func:`monitored` it wrapped as
``make_vec_env`` wraps it.  :func:`env_wrapper` and :func:`check_recurrent` check the zoo
file's wrapper and a recurrent algorithm's setup.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from evalstop_gym.envs import EvalStopEnv

from ...learned import RECURRENT_ALGOS
from ..zoo import ENV_WRAPPERS

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


def make_envs(
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
    make_env = functools.partial(build_env, env_kwargs, None, make_base)  # picklable
    make_train_env = functools.partial(build_env, env_kwargs, wrapper, make_base)
    if vec == "native":
        if make_base is not None:
            raise ValueError(
                "make_base_env needs vec='dummy' (the native vec env is EvalStop-v0's)"
            )
        from ..native_vec import make_native_venv

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


def build_env(env_kwargs: dict[str, Any], wrapper: str | None = None, make_base: Any = None) -> Any:
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


def monitored(make_env: Any, flatten: bool) -> Any:
    """``make_env()`` wrapped as ``make_vec_env`` wraps it (Monitor, then the flattening)."""
    from gymnasium.wrappers import FlattenObservation
    from stable_baselines3.common.monitor import Monitor

    env = Monitor(make_env())
    return FlattenObservation(env) if flatten else env


def env_wrapper(name: str | None, vec: str) -> str | None:
    """Check a zoo file's ``env_wrapper`` (None, or one of :data:`ENV_WRAPPERS`)."""
    if name is None:
        return None
    if name not in ENV_WRAPPERS:
        raise ValueError(f"env_wrapper={name!r} is not allowed: one of {list(ENV_WRAPPERS)}")
    if vec != "dummy":
        raise ValueError(f"env_wrapper={name!r} needs vec='dummy' (got vec={vec!r})")
    return name


def check_recurrent(algo: str, wrapper: str | None, probe: EvalStopEnv) -> bool:
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
