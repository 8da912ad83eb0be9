"""``EvalStopConfig``: everything that defines an ``EvalStop-v0`` env, validated once.

The simulator's settings are a :class:`~evalstop_gym.sim.config.SimConfig`
(the field ``sim_config``); this adds what the env layer decides: the observation's
fields, the reward and the action set.  :meth:`EvalStopConfig.from_kwargs`
takes the flat keyword arguments of ``gym.make("EvalStop-v0", **kwargs)``, and
:func:`arguments` lists them with their types, defaults and allowed values:
the one place the env, the command line, the benchmark suite, the Bayes
stopper and the README table's test read them from.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import typing
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ..errors import ConfigError, check_real
from ..sim.boundary import BOUNDARY_FIELDS
from ..sim.calibration import CALIBRATIONS
from ..sim.config import COST_PRESETS, DELIVER_MODES, SimConfig
from ..sim.pools import PLACEMENTS
from ..sim.real_curves import load_corpus
from ..sim.schedulers import SCHEDULERS
from ..sim.signals import SIGNAL_FIELDS, check_signal_fields
from ..sim.workloads import WORKLOADS

REWARD_MODES: tuple[str, ...] = ("utility", "system")
REWARD_TIMINGS: tuple[str, ...] = ("dense", "delayed")
#: Upper bound of gpu_hour_price, time_cost and quality_weight: every reward stays finite
#: for any cluster and trace SimConfig accepts.
MAX_REWARD_WEIGHT = 1e3


def parse_obs_fields(
    obs_fields: str | list[str] | tuple[str, ...] | None, signals: bool = False
) -> tuple[str, ...]:
    """Validate ``obs_fields`` (a list or a comma-separated string) in whitelist order.

    ``signals``: also admit the training-side signals (:data:`SIGNAL_FIELDS`, after the
    boundary fields); signals named without any boundary field add to all of them.
    """
    if obs_fields is None:
        return BOUNDARY_FIELDS
    given = obs_fields
    allowed = BOUNDARY_FIELDS + SIGNAL_FIELDS if signals else BOUNDARY_FIELDS
    if isinstance(obs_fields, str):
        obs_fields = [f.strip() for f in obs_fields.split(",") if f.strip()]
    fields = list(obs_fields) if isinstance(obs_fields, list | tuple) else []
    unknown = [f for f in fields if not isinstance(f, str) or f not in allowed]
    if unknown or not fields or len(set(fields)) != len(fields):
        what = "boundary fields" + (" and training-side signals" if signals else "")
        raise ConfigError(
            "obs_fields",
            given,
            f"a non-empty subset, without repeats, of the {what} {list(allowed)}",
        )
    if signals and not any(f in BOUNDARY_FIELDS for f in fields):
        fields = [*BOUNDARY_FIELDS, *fields]
    return tuple(f for f in allowed if f in fields)


class UnknownArgumentError(ConfigError, TypeError):
    """A keyword argument ``EvalStop-v0`` does not have.

    Also a ``TypeError`` with Python's own wording ("got an unexpected keyword
    argument"): libraries that try an optional argument and fall back on that
    error (TorchRL's ``GymEnv`` tries ``frameskip``) keep working.
    """

    def __init__(self, message: str, field: str = "", value: Any = None) -> None:
        """The message alone, as ``TypeError`` takes it (Gymnasium's ``make`` re-raises it so)."""
        Exception.__init__(self, message)
        self.field = field
        self.value = value
        self.allowed = "an argument of EvalStop-v0"


@dataclass(frozen=True)
class EvalStopConfig:
    """The simulator's config plus the env's observation, reward and action settings.

    Attributes:
        sim_config: Everything that defines an episode except the seed (its fields
            are ``gym.make`` arguments of the same names).
        obs_fields: Boundary fields to observe: a list or a comma-separated
            string; None (default) for all.  Held as a tuple in boundary order.
            It may also name training-side signals (:data:`SIGNAL_FIELDS`: ``reward``,
            ``reward_std``, ``kl``, ``entropy``, ``completion_length``, ``clip_ratio``;
            see docs/SIGNALS.md), which come after the boundary fields; signals alone add
            to every boundary field.  A signal needs ``curves=`` a corpus some of whose
            runs logged it (a job on a run without it sees it absent).
        reward: ``"utility"`` (default: delivered quality minus a price on
            GPU-hours) or ``"system"`` (time in system plus quality).
        reward_timing: ``"dense"`` (default: the utility paid decision by
            decision) or ``"delayed"`` (each job's utility paid when it leaves
            the cluster; utility mode only).
        gpu_hour_price: Price of a GPU-hour in eval-score units (utility reward).
        time_cost: Weight of the jobs-in-system integral (system reward).
        quality_weight: Weight of the delivered quality (system reward).
        deprioritize: Offer action 2, deprioritise (not with pools).
    """

    sim_config: SimConfig = field(default_factory=SimConfig)
    obs_fields: str | list[str] | tuple[str, ...] | None = None
    reward: str = "utility"
    reward_timing: str = "dense"
    gpu_hour_price: float = 5e-4
    time_cost: float = 0.01
    quality_weight: float = 1.0
    deprioritize: bool = False

    def __post_init__(self) -> None:
        """Validate every field; raise :class:`ConfigError` naming the first bad one."""
        if not isinstance(self.sim_config, SimConfig):
            raise ConfigError("sim_config", self.sim_config, "a SimConfig")
        if not isinstance(self.deprioritize, bool):
            raise ConfigError("deprioritize", self.deprioritize, "True or False")
        if self.deprioritize and self.sim_config.pools is not None:
            raise ConfigError(
                "deprioritize", self.deprioritize, "False with pools (not supported yet)"
            )
        if not isinstance(self.reward, str) or self.reward not in REWARD_MODES:
            raise ConfigError("reward", self.reward, f"one of {list(REWARD_MODES)}")
        if not isinstance(self.reward_timing, str) or self.reward_timing not in REWARD_TIMINGS:
            raise ConfigError("reward_timing", self.reward_timing, f"one of {list(REWARD_TIMINGS)}")
        if self.reward_timing == "delayed" and self.reward != "utility":
            raise ConfigError(
                "reward_timing",
                self.reward_timing,
                "'dense' with reward='system' (paid as time passes)",
            )
        for name in ("gpu_hour_price", "time_cost", "quality_weight"):
            value = check_real(name, getattr(self, name), 0.0, MAX_REWARD_WEIGHT)
            object.__setattr__(self, name, value)
        fields = parse_obs_fields(self.obs_fields, signals=True)
        if any(f in SIGNAL_FIELDS for f in fields):
            curves = self.sim_config.curves
            if curves is None:
                check_signal_fields(fields, None)
            else:
                hacking, healthy = load_corpus(os.fspath(curves))  # cached: read by SimConfig
                check_signal_fields(fields, curves, (*hacking, *healthy))
        object.__setattr__(self, "obs_fields", fields)

    @classmethod
    def from_kwargs(cls, **kwargs: Any) -> EvalStopConfig:
        """The config of ``gym.make("EvalStop-v0", **kwargs)``; an unknown key is refused.

        The simulator's fields are validated first (as ``SimConfig``), then the env's.
        """
        known = _argument_names()
        refuse_unknown_arguments({k: v for k, v in kwargs.items() if k not in known})
        sim = {k: v for k, v in kwargs.items() if known[k]}
        env = {k: v for k, v in kwargs.items() if not known[k]}
        return cls(SimConfig(**sim), **env)


def refuse_unknown_arguments(
    kwargs: dict[str, Any], env_id: str = "EvalStop-v0", names: list[str] | None = None
) -> None:
    """Raise :class:`UnknownArgumentError` on the first key of ``kwargs`` not in ``names``.

    ``names``: the env's valid arguments, by default ``EvalStop-v0``'s
    (``EvalStopConfig``'s fields and ``render_mode``).  The message names the
    env and the argument, suggests the closest valid one and lists them all.
    """
    valid = [*_argument_names(), "render_mode"] if names is None else names
    for name, value in kwargs.items():
        if name not in valid:
            close = difflib.get_close_matches(name, valid, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise UnknownArgumentError(
                f"{env_id} got an unexpected keyword argument {name!r}{hint}; "
                f"its arguments are {valid}",
                name,
                value,
            )


class Argument(NamedTuple):
    """One keyword argument of ``EvalStop-v0``: its type, default and closed set of values."""

    name: str
    annotation: Any
    default: Any
    allowed: tuple[str, ...] | None


def _env_fields() -> list[dataclasses.Field[Any]]:
    """The init fields of ``EvalStopConfig`` itself (all but ``sim_config``)."""
    return [f for f in dataclasses.fields(EvalStopConfig) if f.init and f.name != "sim_config"]


def _sim_fields() -> list[dataclasses.Field[Any]]:
    """The init fields of ``SimConfig`` (its arguments)."""
    return [f for f in dataclasses.fields(SimConfig) if f.init and not f.name.startswith("_")]


def _argument_names() -> dict[str, bool]:
    """Argument name -> whether it is a simulator field, in :func:`arguments` order."""
    return {**{f.name: True for f in _sim_fields()}, **{f.name: False for f in _env_fields()}}


def allowed_values() -> dict[str, tuple[str, ...]]:
    """The closed sets of values of the string arguments that have one.

    Read when asked: a scheduler registered after import is allowed too.
    """
    return {
        "workload": tuple(sorted(WORKLOADS)),
        "scheduler": tuple(sorted(SCHEDULERS)),
        "calibration": tuple(sorted(CALIBRATIONS)),
        "deliver": DELIVER_MODES,
        "curve_scale": ("run", "corpus"),
        "curve_split": ("all", "train", "test"),
        "curve_noise": ("recorded", "fresh"),
        "placement": tuple(PLACEMENTS),
        "costs": tuple(sorted(COST_PRESETS)),
        "obs_fields": BOUNDARY_FIELDS + SIGNAL_FIELDS,
        "reward": REWARD_MODES,
        "reward_timing": REWARD_TIMINGS,
    }


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return f.default


def arguments() -> dict[str, Argument]:
    """Every keyword argument of ``EvalStop-v0`` but ``render_mode``: the simulator's, then the env's."""
    allowed = allowed_values()
    out: dict[str, Argument] = {}
    for owner, fields in ((SimConfig, _sim_fields()), (EvalStopConfig, _env_fields())):
        hints = typing.get_type_hints(owner)
        for f in fields:
            out[f.name] = Argument(f.name, hints[f.name], _default(f), allowed.get(f.name))
    return out
