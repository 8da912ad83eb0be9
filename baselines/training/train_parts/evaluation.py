"""The periodic evaluation during training, its learning curve and EvalStop's reference.

:func:`eval_callback` evaluates on the same validation episodes each time (rewound after
each evaluation; played side by side when it can, :mod:`baselines.training.batch_eval`);
:func:`learning_curve` and :func:`best_step` read what it wrote;
:func:`evalstop_reference` is EvalStop(k=2)'s return on those very episodes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np


def eval_callback(
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
        from ..batch_eval import batch_eval_callback

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


def evalstop_reference(
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

    from ...policies import EvalStop

    if "consecutive_declines" not in dict_space.spaces:
        return float("nan")
    predictor = _PolicyPredictor(EvalStop(2), dict_space, flatten)
    if batch is not None:
        played = batch.evaluate(lambda obs: predictor.predict(obs)[0])
        if played is not None:
            return float(np.mean(played[0]))
    eval_env.seed(eval_seed)
    return float(evaluate_policy(predictor, eval_env, episodes)[0])


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


def best_step(curve: list[tuple[int, float, float]]) -> int:
    """The timesteps of the curve's best mean return (the first best; 0 for no curve)."""
    return max(curve, key=lambda c: c[1])[0] if curve else 0


def learning_curve(npz: Path) -> list[tuple[int, float, float]]:
    """(timesteps, mean return, std) of each evaluation in ``npz`` (none if it is absent)."""
    if not npz.exists():
        return []
    data = np.load(npz)
    return [
        (int(t), float(np.mean(r)), float(np.std(r)))
        for t, r in zip(data["timesteps"], data["results"])
    ]
