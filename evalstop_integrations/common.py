"""What the integrations share: the default policy, checks of their arguments, one stopper.

Every integration builds its :class:`~baselines.online.OnlineStopper` here, so the three
read their arguments the same way and refuse bad ones with the same one-line message.
"""

from __future__ import annotations

from typing import Any

from baselines.online import OnlineStopper
from baselines.policies import EvalStop, Policy
from evalstop_gym.errors import ConfigError


def resolve_policy(policy: Policy | None) -> Policy:
    """``policy``, or the paper's detector ``EvalStop(k=2)`` for ``None``.

    Raises:
        ConfigError: ``policy`` lacks the stopper interface (``reset()`` and ``act(obs)``).
    """
    if policy is None:
        return EvalStop(2)
    if isinstance(policy, type):
        # The class, not a stopper: it would fail at the first evaluation, mid-run.
        raise ConfigError(
            "policy", policy, f"a stopper object ({policy.__name__}(...)), not its class"
        )
    if not (callable(getattr(policy, "act", None)) and callable(getattr(policy, "reset", None))):
        raise ConfigError(
            "policy", policy, "a stopper with reset() and act(obs) (e.g. baselines.EvalStop(2))"
        )
    return policy


def policy_name(policy: Policy) -> str:
    """The name a policy reports (its ``name``, else its class name)."""
    return str(getattr(policy, "name", type(policy).__name__))


def check_metric(metric: Any) -> str:
    """``metric`` as a non-empty string (the key a tool reports the watched value under)."""
    if not isinstance(metric, str) or not metric:
        raise ConfigError("metric", metric, "the non-empty name of a reported metric")
    return metric


def check_key(field: str, key: Any, optional: bool = False) -> str | None:
    """A result or log key: a non-empty string (``None`` passes when ``optional``)."""
    if key is None and optional:
        return None
    if not isinstance(key, str) or not key:
        raise ConfigError(field, key, "a non-empty string" + (" or None" if optional else ""))
    return key


def new_stopper(
    policy: Policy,
    n_checkpoints: int,
    *,
    greater_is_better: bool,
    job_type: str = "rlhf",
    scale: Any = None,
) -> OnlineStopper:
    """A fresh :class:`OnlineStopper` (the policy is reset by it, as before an episode)."""
    return OnlineStopper(
        policy, n_checkpoints, job_type=job_type, greater_is_better=greater_is_better, scale=scale
    )


def as_value(value: Any, where: str) -> float | None:
    """A reported metric as a float; ``None`` for a missing or non-finite value.

    Tools report tensors, NumPy scalars or plain numbers; a NaN eval (a diverged run) is
    skipped rather than fed to the stopper, which needs finite values.
    """
    if value is None:
        return None
    try:
        out = float(value)
    except OverflowError:  # an int beyond float range: not finite either
        return None
    except (TypeError, ValueError):
        raise ConfigError(where, value, "a number") from None
    return out if out == out and abs(out) != float("inf") else None
