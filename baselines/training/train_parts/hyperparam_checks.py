"""The hyperparameter overrides checked before anything is built: names, then values.

:func:`check_hyperparams` refuses a key that is not the SB3 class's keyword argument,
:func:`check_hyperparam_values` a value SB3 would reject only late (:data:`HYPERPARAM_VALUES`),
each in one line naming the key; :class:`~baselines.training.train.TrainConfig` runs them.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from ...learned import algo_class

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
