"""SB3's ``policy.predict`` without its per-call set-up: the same tensors, the same actions.

``BasePolicy.predict`` does, at every call, ``set_training_mode(False)`` (a walk over
every submodule), a deep copy of a Dict observation, a copy of each array, SB3's shape
checks and a walk over the parameters to find the device; then the forward pass
(``_predict`` under ``no_grad``).  On a batch-1 decision or a 4-env rollout step the set-up
costs more than the network.  :func:`lean_predict` hands ``_predict`` the very tensors
``obs_to_tensor`` would build (the observation's own dtype and values, reshaped to
``(-1, *shape)``) and runs the same ``_predict``, so every action is the same, bit for
bit; it only skips what changes nothing when the policy is already in evaluation mode.

:func:`lean_rollouts` puts it behind ``model.policy.predict`` while a block runs (DQN's
``collect_rollouts`` asks ``predict`` for every step's actions); whenever the policy is
in training mode, or the observation is one the lean path does not handle, SB3's own
``predict`` runs instead.  In the same block ``policy.set_training_mode`` sets the very
``training`` flags SB3's walk over the submodules sets, from a list of them made once
(:func:`lean_mode_switch`): DQN switches the mode twice every ``train_freq`` steps, and
the walk (``Module.train`` through ``Module.__setattr__`` on every submodule) costs
about 25 times what setting the flags does.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np
from gymnasium import spaces


def supports(policy: Any) -> bool:
    """Whether :func:`lean_predict` gives ``policy.predict``'s actions for ``policy``.

    A non-recurrent policy with a discrete action space (no clipping or rescaling of the
    actions) on Box observations or a Dict of Box observations, none of them images
    (which SB3 transposes and scales).
    """
    from stable_baselines3.common.preprocessing import is_image_space

    if not isinstance(policy.action_space, spaces.Discrete | spaces.MultiDiscrete):
        return False
    name = type(policy).__name__.lower()
    if "lstm" in name or "recurrent" in name:
        return False
    space = policy.observation_space
    boxes = list(space.spaces.values()) if isinstance(space, spaces.Dict) else [space]
    return all(isinstance(b, spaces.Box) and not is_image_space(b) for b in boxes)


def _as_batch(x: Any, shape: tuple[int, ...]) -> tuple[np.ndarray, bool]:
    """``x`` as ``obs_to_tensor`` reshapes it, and whether it was a batch of observations.

    Raises ValueError on a shape that is neither ``shape`` nor ``(n, *shape)``, as SB3 does.
    """
    a = np.asarray(x)
    if not a.flags.writeable:  # torch warns on a read-only array; SB3 hands it a copy
        a = a.copy()
    if a.shape == shape:
        vectorized = False
    elif a.shape[1:] == shape:
        vectorized = True
    else:
        raise ValueError(f"observation of shape {a.shape}, expected {shape} or (n, *{shape})")
    return a.reshape((-1, *shape)), vectorized


def lean_predict(policy: Any, observation: Any, device: Any, deterministic: bool = True) -> Any:
    """``policy.predict(observation, deterministic=deterministic)[0]`` of a policy in eval mode.

    ``policy`` must be in evaluation mode (``set_training_mode(False)``) and pass
    :func:`supports`; ``device`` is its device (``policy.device``, looked up once).
    """
    import torch as th

    if isinstance(observation, dict):
        tensors, vectorized = {}, False
        for key, sub in policy.observation_space.spaces.items():
            a, vec = _as_batch(observation[key], sub.shape)
            tensors[key] = th.as_tensor(a, device=device)
            vectorized = vectorized or vec
        obs_tensor: Any = tensors
    else:
        a, vectorized = _as_batch(observation, policy.observation_space.shape)
        obs_tensor = th.as_tensor(a, device=device)
    with th.no_grad():
        actions = policy._predict(obs_tensor, deterministic=deterministic)
    actions = actions.cpu().numpy().reshape((-1, *policy.action_space.shape))
    return actions if vectorized else actions.squeeze(axis=0)


def lean_mode_switch(policy: Any) -> Any:
    """``policy.set_training_mode`` without the walk over its submodules, or None.

    SB3's ``BasePolicy.set_training_mode`` is ``self.train(mode)`` and DQN's sets its
    Q-network's mode then its own flag; ``Module.train`` checks that ``mode`` is a bool,
    sets ``training`` through ``Module.__setattr__`` (which, for a name that is no
    parameter, buffer or submodule, writes the instance's ``__dict__``) and recurses
    into the children.  The switch returned writes the same flags of the same modules,
    listed once.  None (keep SB3's) unless the policy's method is one of those two, and
    every module listed uses ``Module.train`` unchanged and keeps ``training`` as a plain
    instance attribute.
    """
    import torch.nn as nn
    from stable_baselines3.common.policies import BasePolicy
    from stable_baselines3.dqn.policies import DQNPolicy

    method = type(policy).set_training_mode
    if method is DQNPolicy.set_training_mode:
        q_net = getattr(policy, "q_net", None)
        if (
            not isinstance(q_net, nn.Module)
            or type(q_net).set_training_mode is not BasePolicy.set_training_mode
        ):
            return None
        modules = [*q_net.modules(), policy]  # the policy's own flag is set last
    elif method is BasePolicy.set_training_mode:
        modules = list(policy.modules())
    else:
        return None
    if not all(map(_plain_training_flag, modules)):
        return None
    flags = [m.__dict__ for m in modules]

    def set_training_mode(mode: bool) -> None:
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        for d in flags:
            d["training"] = mode

    return set_training_mode


def _plain_training_flag(m: Any) -> bool:
    """Whether ``m.train(mode)`` sets only ``m.__dict__["training"]`` (and its children's)."""
    import torch.nn as nn

    d = m.__dict__
    return (
        type(m).train is nn.Module.train
        and isinstance(d.get("training"), bool)
        and not hasattr(type(m), "training")  # no class attribute or descriptor of the name
        and not any("training" in d.get(k, ()) for k in ("_parameters", "_buffers", "_modules"))
    )


@contextlib.contextmanager
def lean_rollouts(model: Any) -> Iterator[None]:
    """``model.policy.predict`` runs :func:`lean_predict` while the block runs.

    Only in evaluation mode (the mode ``collect_rollouts`` sets before asking for actions):
    in training mode, and for an observation whose kind (dict or array) or keys differ from
    the space's,
    SB3's ``predict`` runs (which also switches the mode, as it always does).  The
    epsilon-greedy draws of DQN's ``predict`` stay where they are: only the policy's
    ``predict`` beneath them is replaced.  Nothing changes for a policy
    :func:`supports` refuses.  While the block runs ``policy.set_training_mode`` is
    :func:`lean_mode_switch`'s, where that gives one.
    """
    policy = model.policy
    switch = lean_mode_switch(policy)
    if switch is not None:
        policy.set_training_mode = switch
    try:
        if supports(policy):
            with _lean_predict_of(policy):
                yield
        else:
            yield
    finally:
        if switch is not None:
            del policy.set_training_mode


@contextlib.contextmanager
def _lean_predict_of(policy: Any) -> Iterator[None]:
    """``policy.predict`` runs :func:`lean_predict` while the block runs (:func:`lean_rollouts`)."""
    sb3_predict = policy.predict
    device = policy.device
    keys = (
        set(policy.observation_space.spaces)
        if hasattr(policy.observation_space, "spaces")
        else None
    )

    def predict(
        observation: Any,
        state: Any = None,
        episode_start: Any = None,
        deterministic: bool = False,
    ) -> tuple[Any, Any]:
        is_dict = isinstance(observation, dict)
        if (
            policy.training
            or is_dict != (keys is not None)
            or (is_dict and set(observation) != keys)
        ):
            return sb3_predict(observation, state, episode_start, deterministic)
        return lean_predict(policy, observation, device, deterministic), state

    policy.predict = predict
    try:
        yield
    finally:
        del policy.predict
