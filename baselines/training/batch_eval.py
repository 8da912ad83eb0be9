"""Periodic evaluation of a training run in a batch: the same episodes, actions and numbers.

SB3's ``EvalCallback`` plays its evaluation episodes one after another in a one-env
``DummyVecEnv`` and asks ``model.predict`` for one observation at a time; most of
a training run's CPU went there (``predict``'s per-call set-up, the deep copy of every
Dict observation). :class:`BatchEvaluator` plays the same episodes side by side, one
env per episode, and computes the actions of every env still playing in one call of the
policy, so that the per-call costs are paid once per batch.

What keeps the results identical to SB3's:

- **The same episodes.** SB3 seeds the first episode's reset and lets the env's own
  generator (``np_random``, advanced by each reset) seed the following ones. Here env
  ``k`` starts from a copy of env ``k-1``'s generator as that env's reset left it, which
  is the generator SB3's env has when it resets for episode ``k`` provided stepping an
  episode draws nothing from it; every evaluation checks that (the generator's state at
  each episode's end is the one its reset left) and replays SB3's sequential evaluation
  if it ever fails.
- **The same actions.** A matrix product over a batch does not round as the product
  over one row does (the batch goes through a different BLAS kernel), and the last bit
  of a logit can decide a near-tie. So every module that computes (every leaf module
  but ``Flatten`` and ``Identity``) runs once per row on a one-row slice, exactly the
  call batch-1 prediction makes; what runs on the whole batch is SB3's own code between
  them (the float cast, concatenation, the row-wise softmax and argmax).
- **The same numbers.** Each env is wrapped as ``make_vec_env`` wraps SB3's (``Monitor``
  innermost of the wrappers SB3 adds), and an episode's return and length are Monitor's.
"""

from __future__ import annotations

import copy
import functools
import os
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

#: Leaf modules that only reshape or pass through, safe to run on the whole batch.
_BATCH_SAFE = ("Flatten", "Identity")


class BatchEvaluator:
    """Plays ``n_episodes`` evaluation episodes side by side, one env per episode.

    Args:
        make_env: Builds one wrapped env (as ``make_vec_env`` would: ``Monitor``
            outside the base env, then the observation wrapper).
        n_episodes: Episodes per evaluation (the envs built).
        seed: The first episode's reset seed.
    """

    def __init__(self, make_env: Callable[[], Any], n_episodes: int, seed: int) -> None:
        """Build one env per evaluation episode."""
        if n_episodes < 1:
            raise ValueError(f"n_episodes={n_episodes} is not allowed: at least 1")
        self.envs = [make_env() for _ in range(n_episodes)]
        self.seed = seed
        space = self.envs[0].observation_space
        self._keys = list(space.spaces) if hasattr(space, "spaces") else None
        self._spaces = space.spaces if self._keys is not None else {None: space}

    def evaluate(
        self, act: Callable[[Any], np.ndarray]
    ) -> tuple[list[float], list[int], list[Any]] | None:
        """Every episode's return and length (Monitor's), and its ``is_success`` values.

        ``act(batch)`` gets the observations of the envs still playing, stacked as a
        vector env would (a dict of arrays or one array) and returns their actions.
        None when an env drew from its generator while stepping (the episodes would not
        be SB3's): the caller then evaluates sequentially.
        """
        n = len(self.envs)
        obs: list[Any] = [None] * n
        handed: list[dict[str, Any]] = []
        rng = None
        for k, env in enumerate(self.envs):
            core = _core(env)
            if k == 0:
                obs[k], _ = env.reset(seed=self.seed)
            else:
                core.np_random = copy.deepcopy(rng)
                obs[k], _ = env.reset()
            rng = core.np_random
            handed.append(copy.deepcopy(rng.bit_generator.state))
        rewards: list[float] = [0.0] * n
        lengths: list[int] = [0] * n
        success: list[Any] = [None] * n
        playing = list(range(n))
        while playing:
            actions = act(self._stack([obs[k] for k in playing]))
            still = []
            for k, a in zip(playing, actions):
                o, _, terminated, truncated, info = self.envs[k].step(a)
                if not (terminated or truncated):
                    obs[k] = o
                    still.append(k)
                    continue
                if _core(self.envs[k]).np_random.bit_generator.state != handed[k]:
                    return None
                rewards[k] = info["episode"]["r"]
                lengths[k] = info["episode"]["l"]
                success[k] = info.get("is_success")
            playing = still
        return rewards, lengths, [s for s in success if s is not None]

    def _stack(self, rows: Sequence[Any]) -> Any:
        """Rows stacked into arrays of the space's dtypes (what a vector env hands on)."""
        if self._keys is None:
            sp = self._spaces[None]
            return np.asarray(rows, dtype=sp.dtype).reshape(len(rows), *sp.shape)
        return {
            key: np.asarray([r[key] for r in rows], dtype=self._spaces[key].dtype).reshape(
                len(rows), *self._spaces[key].shape
            )
            for key in self._keys
        }

    def close(self) -> None:
        """Close every env."""
        for env in self.envs:
            env.close()


def _core(env: Any) -> Any:
    """The innermost env of ``env``'s wrapper chain (the one whose generator seeds episodes)."""
    import gymnasium as gym

    while isinstance(env, gym.Wrapper):
        env = env.env
    return env


def policy_actions(policy: Any) -> Callable[[Any], np.ndarray]:
    """``act(batch)``: an SB3 policy's deterministic actions, each as batch-1 ``predict`` gives.

    Every computing leaf module runs on one-row slices (see the module's docstring).
    """
    import torch as th

    rows = _RowByRow(policy)
    policy.set_training_mode(False)
    device = policy.device

    def act(batch: Any) -> np.ndarray:
        # What ``obs_to_tensor`` makes of a batch already shaped as the space's (without
        # its checks and its walk over the parameters for the device).
        if isinstance(batch, dict):
            obs_tensor = {k: th.as_tensor(v, device=device) for k, v in batch.items()}
        else:
            obs_tensor = th.as_tensor(batch, device=device)
        with th.no_grad(), rows:
            actions = policy._predict(obs_tensor, deterministic=True)
        return actions.cpu().numpy().reshape((-1, *policy.action_space.shape))

    return act


class _RowByRow:
    """While active, every computing leaf module of ``model`` runs once per batch row.

    A ``Sequential`` of leaf modules runs row by row as a whole (each row through every
    layer in turn: the same calls, fewer splits).
    """

    def __init__(self, model: Any) -> None:
        import torch as th

        self.patched: dict[Any, Callable[[Any], Any]] = {}
        done: set[int] = set()
        for m in model.modules():
            children = list(m.children())
            if isinstance(m, th.nn.Sequential) and children and all(_is_leaf(c) for c in children):
                self.patched[m] = _rows(_chain([_leaf_forward(c) for c in children]))
                done.update(id(c) for c in children)
            elif _is_leaf(m) and id(m) not in done and type(m).__name__ not in _BATCH_SAFE:
                self.patched[m] = _rows(_leaf_forward(m))

    def __enter__(self) -> None:
        for m, rows in self.patched.items():
            m.forward = rows

    def __exit__(self, *exc: object) -> None:
        for m in self.patched:
            del m.forward


def _is_leaf(m: Any) -> bool:
    return not any(True for _ in m.children())


def _leaf_forward(m: Any) -> Callable[[Any], Any]:
    """What calling leaf ``m`` computes, without the module call's hooks and checks."""
    import torch as th

    if type(m) is th.nn.Linear:
        return functools.partial(th.nn.functional.linear, weight=m.weight, bias=m.bias)
    if type(m) is th.nn.Tanh:
        return th.tanh
    if type(m).__name__ in _BATCH_SAFE:
        return m
    return m.forward


def _chain(forwards: Sequence[Callable[[Any], Any]]) -> Callable[[Any], Any]:
    def chained(x: Any) -> Any:
        for f in forwards:
            x = f(x)
        return x

    return chained


def _rows(forward: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``forward`` applied to each one-row slice of a batch, the results concatenated."""
    import torch as th

    def rows(x: Any) -> Any:
        if x.dim() < 2 or x.shape[0] == 1:
            return forward(x)
        return th.cat([forward(r) for r in x.split(1)])

    return rows


def batch_eval_callback(
    make_env: Callable[[], Any],
    eval_env: Any,
    seed: int,
    eval_freq: int,
    n_eval_episodes: int,
    log_path: str | None,
    best_model_save_path: str | None,
    callback_after_eval: Any = None,
) -> Any:
    """SB3's ``EvalCallback`` whose evaluations play their episodes in a batch.

    Everything but the episodes' playing is ``EvalCallback``'s: the log file
    (``evaluations.npz``), the logger's records, the best-model file. ``eval_env`` (the
    one-env vector env SB3's callback would play) is kept for the sequential fallback.
    The callback's ``batch`` (its :class:`BatchEvaluator`) stays open after training, for
    other players of the same episodes; close it when done.
    """
    from stable_baselines3.common.callbacks import EvalCallback

    class BatchEvalCallback(EvalCallback):
        """``EvalCallback`` playing each evaluation's episodes side by side."""

        def __init__(self) -> None:
            super().__init__(
                eval_env,
                eval_freq=eval_freq,
                n_eval_episodes=n_eval_episodes,
                log_path=log_path,
                best_model_save_path=best_model_save_path,
                deterministic=True,
                verbose=0,
                callback_after_eval=callback_after_eval,
            )
            self.batch = BatchEvaluator(make_env, n_eval_episodes, seed)

        def _init_callback(self) -> None:
            # SB3 warns when the training env's type is not the eval env's (the batched
            # env's is not); the episodes are played here, in their own batch, either way.
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", "Training and eval env are not of the same")
                super()._init_callback()

        def _on_step(self) -> bool:
            if not (self.eval_freq > 0 and self.n_calls % self.eval_freq == 0):
                return True
            played = self.batch.evaluate(policy_actions(self.model.policy))
            if played is None:  # an env drew while stepping: play SB3's way
                return super()._on_step()
            rewards, lengths, successes = played
            return self._record(rewards, lengths, successes)

        def _record(self, rewards: list[float], lengths: list[int], successes: list[Any]) -> bool:
            """What ``EvalCallback._on_step`` does with an evaluation's episodes."""
            self._is_success_buffer = list(successes)
            if self.log_path is not None:
                self.evaluations_timesteps.append(self.num_timesteps)
                self.evaluations_results.append(rewards)
                self.evaluations_length.append(lengths)
                kwargs = {}
                if self._is_success_buffer:
                    self.evaluations_successes.append(self._is_success_buffer)
                    kwargs = {"successes": self.evaluations_successes}
                np.savez(
                    self.log_path,
                    timesteps=self.evaluations_timesteps,
                    results=self.evaluations_results,
                    ep_lengths=self.evaluations_length,
                    **kwargs,
                )
            mean_reward = np.mean(rewards)
            self.last_mean_reward = float(mean_reward)
            self.logger.record("eval/mean_reward", float(mean_reward))
            self.logger.record("eval/mean_ep_length", np.mean(lengths))
            if self._is_success_buffer:
                self.logger.record("eval/success_rate", np.mean(self._is_success_buffer))
            self.logger.record("time/total_timesteps", self.num_timesteps, exclude="tensorboard")
            self.logger.dump(self.num_timesteps)
            go_on = True
            if mean_reward > self.best_mean_reward:
                if self.best_model_save_path is not None:
                    self.model.save(os.path.join(self.best_model_save_path, "best_model"))
                self.best_mean_reward = float(mean_reward)
                if self.callback_on_new_best is not None:
                    go_on = self.callback_on_new_best.on_step()
            if self.callback is not None:
                go_on = go_on and self._on_event()
            return go_on

    return BatchEvalCallback()
