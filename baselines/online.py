"""Any stopper, one evaluation at a time: the decision core of live use and of replay.

:class:`OnlineStopper` wraps a package policy (``EvalStop(k)``, ``Cusum``,
``BayesStopper``, ``FirstEvalGate``, a ``Learned`` model, any user
:class:`~baselines.policies.Policy`) and feeds it one evaluation of a real run
at a time.  Each observation is built exactly as ``EvalStop-v0`` builds it for
a lone job of ``n_checkpoints`` checkpoints (the same float32 row as
:func:`~evalstop_gym.envs.tables.observation_rows` writes, the same decline
count as :func:`~evalstop_gym.sim.checkpoints.checkpoint_tables`), so a stopper
decides on a user's run as it decides in the simulator::

    stopper = OnlineStopper(EvalStop(2), n_checkpoints=20)
    for step, value in evaluations:       # e.g. from a TrainerCallback
        if stopper.observe(value, step=step):
            break                         # keep stopper.best_step's checkpoint

As in the env, the decision after the last (``n_checkpoints``-th) evaluation
is no decision: the run has ended.  The checkpoint delivered is the best
observed one (the first maximum of the direction-adjusted metric), as the
env's ``deliver="best"``.

Scale.  Scale-dependent stoppers (CUSUM's threshold, a gate's level, Bayes'
priors, a learned model) are tuned in the simulator's eval units, where an
RLHF run's score starts near 0.3 and gains about 0.6.  ``scale`` is a
:class:`ScaleRule`, an affine map applied to the (direction-adjusted) metric
before the policy sees it; :meth:`ScaleRule.fit` fits one common map from a set
of runs (their median start -> 0.3, their median gain -> 0.6), so a map
fitted on *other* runs carries nothing of a run's own future.  The default
is the identity: right for scale-free stoppers (``EvalStop(k)`` counts
declines; ``LossPlateau`` reads relative losses) and the only honest choice
for a lone live run with no reference runs.

Specs.  :func:`short_spec_factory` builds a package stopper from a short name
(``evalstop:2``, ``cusum:0.1``, ``bayes:hard``, ... :data:`SHORT_SPECS`), for a run of
``n`` evaluations: what ``evalstop-gym curves replay --policy`` and the live adapters take.

State.  :meth:`OnlineStopper.state_dict` is JSON-serialisable;
:meth:`OnlineStopper.load_state_dict` on a fresh stopper re-feeds the
recorded evaluations to the policy, so a resumed run continues with the same
decisions (for a deterministic policy; the recorded decisions are kept and a
warning names any that the policy now takes differently).
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from evalstop_gym.corpus.format import MAX_RUN_EVALS
from evalstop_gym.envs.config import parse_obs_fields
from evalstop_gym.envs.core import BOUNDS, ObservationLayout
from evalstop_gym.errors import ConfigError, is_integer
from evalstop_gym.sim.calibration import get_calibration
from evalstop_gym.sim.workloads import JOB_TYPES

from .bayes import REAL_CURVE_NOISE, BayesStopper
from .changepoint import Cusum
from .floors import FirstEvalGate
from .policies import EvalStop, LossPlateau, NoStop, Policy, StopAtProgress

#: Where :meth:`ScaleRule.fit` puts a set of runs' median start and median gain: the
#: simulator's RLHF runs start at about 0.3 and gain about 0.6 eval units
#: (``evalstop_gym.sim.real_curves`` maps a corpus run's gold the same way).
SIM_START, SIM_GAIN = 0.3, 0.6
#: The version of :meth:`OnlineStopper.state_dict`'s layout.
STATE_VERSION = 1
#: The actions recorded in :attr:`OnlineStopper.decisions`.
CONTINUE, STOP, END = "continue", "stop", "end"


@dataclass(frozen=True)
class ScaleRule:
    """An affine map ``offset + factor * x`` of a (direction-adjusted) metric into eval units.

    Attributes:
        offset: Added after scaling.
        factor: Multiplies the metric; > 0, so that it keeps the metric's order.
    """

    offset: float = 0.0
    factor: float = 1.0

    def __post_init__(self) -> None:
        """Refuse a non-finite offset or a factor that is not a finite number > 0."""
        if not _is_number(self.offset):
            raise ConfigError("scale.offset", self.offset, "a finite number")
        if not _is_number(self.factor) or not self.factor > 0:
            raise ConfigError("scale.factor", self.factor, "a finite number > 0")
        object.__setattr__(self, "offset", float(self.offset))
        object.__setattr__(self, "factor", float(self.factor))

    def __call__(self, x: float) -> float:
        """``offset + factor * x``."""
        return self.offset + self.factor * x

    @property
    def is_identity(self) -> bool:
        """True for the map that changes nothing."""
        return self.offset == 0.0 and self.factor == 1.0

    @classmethod
    def fit(
        cls,
        runs: Iterable[Sequence[float]],
        *,
        greater_is_better: bool = True,
        start: float = SIM_START,
        gain: float = SIM_GAIN,
    ) -> ScaleRule:
        """One common map for a set of runs: median start -> ``start``, median gain -> ``gain``.

        A run's start is its first value, its gain its best value less its first
        (both after negating a lower-is-better metric).  Fit the map on runs other
        than the ones it will scale (earlier runs, a held-out set) and nothing of a
        run's own future enters its scaling.

        Raises:
            ConfigError: no run, an empty or non-finite run, or a median gain that is
                not > 0 (the runs never improve on their first value).
        """
        runs = [np.asarray(r, dtype=float) for r in runs]
        if not runs or any(r.ndim != 1 or r.size == 0 for r in runs):
            raise ConfigError("runs", len(runs), "at least one run, each a non-empty series")
        if not all(np.all(np.isfinite(r)) for r in runs):
            raise ConfigError("runs", "a non-finite value", "finite metric values")
        adjusted = [r if greater_is_better else -r for r in runs]
        starts = [float(a[0]) for a in adjusted]
        gains = [float(a.max()) - s for a, s in zip(adjusted, starts, strict=True)]
        med_start, med_gain = float(np.median(starts)), float(np.median(gains))
        if not med_gain > 0:
            raise ConfigError(
                "runs",
                f"median gain {med_gain:g} over {len(runs)} run(s)",
                "runs whose metric rises above its first value (a median gain > 0); "
                "check the metric's direction (greater_is_better)",
            )
        factor = gain / med_gain
        return cls(start - factor * med_start, factor)

    def to_dict(self) -> dict[str, float]:
        """``{"offset": ..., "factor": ...}``."""
        return {"offset": self.offset, "factor": self.factor}

    @classmethod
    def from_dict(cls, d: Any) -> ScaleRule:
        """The rule :meth:`to_dict` wrote."""
        if not isinstance(d, dict) or set(d) != {"offset", "factor"}:
            raise ConfigError("scale", d, "a dict with 'offset' and 'factor'")
        return cls(d["offset"], d["factor"])


#: The short names of the package's stoppers a ``--policy`` spec may use, with their form.
SHORT_SPECS: dict[str, str] = {
    "nostop": "nostop",
    "evalstop": "evalstop[:K] (K consecutive declines, default 2)",
    "cusum": "cusum[:THRESHOLD[,DRIFT]] (eval units, default 0.1,0)",
    "bayes": "bayes[:CALIBRATION] (paper, realistic or hard; default hard)",
    "lossplateau": "lossplateau[:WINDOW,TOLERANCE] (default 3,0.02)",
    "stopat": "stopat:PROGRESS (stop at that share of the run)",
    "gate": "gate:STOP_AT,THRESHOLD (FirstEvalGate, eval units)",
}
#: The short forms, for a refusal.
SHORT_FORMS = "; ".join(SHORT_SPECS.values())


def _numbers(spec: str, arg: str, n_max: int) -> list[float]:
    parts = [p for p in arg.split(",") if p.strip()] if arg else []
    try:
        values = [float(p) for p in parts]
    except ValueError:
        values = []
        parts = ["?"]
    if len(parts) > n_max or len(values) != len(parts):
        raise ConfigError("policy", spec, SHORT_SPECS[spec.partition(":")[0].lower()])
    return values


def short_spec_factory(spec: str) -> Callable[[int], Policy] | None:
    """A factory ``n_checkpoints -> fresh policy`` for a short spec (:data:`SHORT_SPECS`).

    None when ``spec`` names no package stopper (the caller tries its other forms).  The
    factory takes the run's number of evaluations because Bayes models a run of exactly
    that many (its calibration is rebuilt with ``evals_per_job = n``, its eval noise at
    least the real-curve level).

    Raises:
        ConfigError: a short name with malformed arguments, naming its form.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise ConfigError("policy", spec, SHORT_FORMS)
    name, _, arg = spec.strip().partition(":")
    kind = name.lower()
    factory: Callable[[int], Policy]
    if kind == "nostop" and not arg:
        factory = lambda n: NoStop()  # noqa: E731
    elif kind == "evalstop":
        (k,) = _numbers(spec, arg, 1) or [2]
        if k != int(k):
            raise ConfigError("policy", spec, SHORT_SPECS["evalstop"])
        EvalStop(int(k))
        factory = lambda n: EvalStop(int(k))  # noqa: E731
    elif kind == "cusum":
        values = _numbers(spec, arg, 2)
        threshold, drift = (values + [0.1, 0.0][len(values) :])[:2]
        Cusum(threshold, drift)
        factory = lambda n: Cusum(threshold, drift)  # noqa: E731
    elif kind == "lossplateau":
        values = _numbers(spec, arg, 2)
        if len(values) == 1:
            raise ConfigError("policy", spec, SHORT_SPECS["lossplateau"])
        window, tol = values or [3, 0.02]
        if window != int(window):
            raise ConfigError("policy", spec, SHORT_SPECS["lossplateau"])
        LossPlateau(int(window), tol)
        factory = lambda n: LossPlateau(int(window), tol)  # noqa: E731
    elif kind == "stopat":
        values = _numbers(spec, arg, 1)
        if not values:
            raise ConfigError("policy", spec, SHORT_SPECS["stopat"])
        StopAtProgress(values[0])
        factory = lambda n: StopAtProgress(values[0], job_types=JOB_TYPES)  # noqa: E731
    elif kind == "gate":
        values = _numbers(spec, arg, 2)
        if len(values) != 2:
            raise ConfigError("policy", spec, SHORT_SPECS["gate"])
        FirstEvalGate(*values)
        factory = lambda n: FirstEvalGate(*values)  # noqa: E731
    elif kind == "bayes":
        cal = get_calibration(arg or "hard")
        noise = max(cal.eval_noise, REAL_CURVE_NOISE)

        def factory(n: int) -> Policy:
            if n < 2:
                raise ConfigError(
                    "policy", spec, "a run of >= 2 evaluations (Bayes models a curve)"
                )
            return BayesStopper(dataclasses.replace(cal, evals_per_job=n), eval_noise=noise)

    elif kind in SHORT_SPECS:
        raise ConfigError("policy", spec, SHORT_SPECS[kind])
    else:
        return None
    return factory


def _is_number(x: Any) -> bool:
    return (
        isinstance(x, int | float | np.integer | np.floating)
        and not isinstance(x, bool | np.bool_)
        and math.isfinite(float(x))
    )


def _layout_of(
    policy: Any, n_checkpoints: int, obs_fields: Any, eval_window: int | None
) -> ObservationLayout:
    """The observation layout ``policy`` plays on: given, its model's, or the env's default.

    A learned model records the fields and the window it was trained on in its
    ``meta``; every other policy gets the env's default (every field, the
    whole history).
    """
    meta = getattr(policy, "meta", None)
    if obs_fields is None and isinstance(meta, dict) and "obs_fields" in meta:
        obs_fields = meta["obs_fields"]
    if eval_window is None and isinstance(meta, dict) and meta.get("eval_window"):
        eval_window = int(meta["eval_window"])
    fields = parse_obs_fields(obs_fields)
    if eval_window is None:
        eval_window = n_checkpoints
    if not isinstance(eval_window, int) or isinstance(eval_window, bool) or eval_window < 1:
        raise ConfigError("eval_window", eval_window, "an integer >= 1")
    return ObservationLayout(fields, eval_window, n_checkpoints)


def check_n_checkpoints(n_checkpoints: Any, *, optional: bool = False) -> int | None:
    """``n_checkpoints`` as an int in [1, :data:`MAX_RUN_EVALS`] (``None`` passes when
    ``optional``: a live run works it out when it begins).

    Raises:
        ConfigError: Not such an integer.
    """
    if n_checkpoints is None and optional:
        return None
    if not is_integer(n_checkpoints) or not 1 <= n_checkpoints <= MAX_RUN_EVALS:
        allowed = f"an integer in [1, {MAX_RUN_EVALS}]" + (
            " or None (work it out from the run)" if optional else ""
        )
        raise ConfigError("n_checkpoints", n_checkpoints, allowed)
    return int(n_checkpoints)


def check_run_settings(job_type: Any, scale: Any) -> ScaleRule | None:
    """A run's ``job_type`` checked and its ``scale`` as a :class:`ScaleRule` (or None).

    What :class:`OnlineStopper` checks of them, callable before one is built (the live-run
    integrations check their arguments when they are built, not at a run's first eval).

    Raises:
        ConfigError: a job type not in :data:`JOB_TYPES`, or a scale that is not a
            ``ScaleRule``, its dict, or None.
    """
    if job_type not in JOB_TYPES:
        raise ConfigError("job_type", job_type, f"one of {list(JOB_TYPES)}")
    if isinstance(scale, dict):
        scale = ScaleRule.from_dict(scale)
    if scale is not None and not isinstance(scale, ScaleRule):
        raise ConfigError("scale", scale, "a ScaleRule, its dict, or None (identity)")
    return scale


class OnlineStopper:
    """Drive ``policy`` one evaluation of a real run at a time, as ``EvalStop-v0`` would.

    Args:
        policy: Any stopper with ``reset()`` and ``act(obs)`` (0 continue, 1 stop).
        n_checkpoints: K, the evaluations the run will have in all (the env's
            checkpoints a job declares): progress after the i-th is i / K.
        job_type: ``"rlhf"`` (default), ``"dpo"`` or ``"lora"``: the observed one-hot
            (``BayesStopper`` and ``FirstEvalGate`` treat RLHF runs only as possibly hacking).
        greater_is_better: False for a metric to minimise (``eval_loss``): it is negated
            before anything else, so "a decline" and "the best" mean what they should.
        scale: A :class:`ScaleRule` (or its dict) applied after the direction; None: identity.
        relative_loss: Show the policy the training loss relative to the first one
            observed (the env's loss is relative to its initial value); False: as given.
        obs_fields: The observed fields; default: a learned model's own, else all.
        eval_window: W, the eval and loss windows; default: a learned model's own,
            else K (the whole history, as the env's default).

    Raises:
        ConfigError: a bad argument; ValueError: a policy whose
            ``check_observation_space`` refuses the layout.
    """

    def __init__(
        self,
        policy: Policy,
        n_checkpoints: int,
        *,
        job_type: str = "rlhf",
        greater_is_better: bool = True,
        scale: ScaleRule | dict[str, float] | None = None,
        relative_loss: bool = True,
        obs_fields: Sequence[str] | str | None = None,
        eval_window: int | None = None,
    ) -> None:
        """Check the arguments and the policy's observation space; reset the policy."""
        if not callable(getattr(policy, "act", None)) or not callable(
            getattr(policy, "reset", None)
        ):
            raise ConfigError("policy", policy, "a stopper with reset() and act(obs)")
        check_n_checkpoints(n_checkpoints)
        scale = check_run_settings(job_type, scale)
        if not isinstance(greater_is_better, bool):
            raise ConfigError("greater_is_better", greater_is_better, "True or False")
        self.policy = policy
        self.n_checkpoints = k = int(n_checkpoints)
        self.job_type = job_type
        self.greater_is_better = greater_is_better
        self.scale = scale or ScaleRule()
        self.relative_loss = bool(relative_loss)
        self.layout = _layout_of(policy, k, obs_fields, eval_window)
        policy_k = getattr(policy, "k", None)
        if type(policy).__name__ == "BayesStopper" and policy_k != k:
            raise ConfigError(
                "n_checkpoints",
                k,
                f"the checkpoints {getattr(policy, 'name', 'the policy')} models ({policy_k}): "
                "build it with a calibration of evals_per_job = n_checkpoints",
            )
        check = getattr(policy, "check_observation_space", None)
        if check is not None:
            check(self.layout.space)
        self._type = JOB_TYPES.index(job_type)
        self._reset_run()

    def _reset_run(self) -> None:
        self.policy.reset()
        k = self.n_checkpoints
        self._evals = np.zeros((1, k))  # the policy's units, future slots 0 (never read)
        self._loss = np.zeros((1, k))
        self._values: list[float] = []  # as the user gave them
        self._losses: list[float | None] = []
        self._steps: list[int] = []
        self._decisions: list[dict[str, Any]] = []
        self._loss_base: float | None = None
        self._declines = 0
        self._stop_index: int | None = None
        self._best_index: int | None = None
        self._warned_beyond = False
        self._warned_clip = False

    # ------------------------------------------------------------------ reading

    @property
    def name(self) -> str:
        """The policy's name."""
        return str(getattr(self.policy, "name", type(self.policy).__name__))

    @property
    def stopped(self) -> bool:
        """True once the policy said stop."""
        return self._stop_index is not None

    @property
    def n_observed(self) -> int:
        """Evaluations observed so far (after a stop, up to the stop)."""
        return len(self._values)

    @property
    def stop_step(self) -> int | None:
        """The step of the evaluation after which the policy stopped (None: not stopped)."""
        return None if self._stop_index is None else self._steps[self._stop_index]

    @property
    def best_index(self) -> int | None:
        """0-based index of the checkpoint it would deliver (None before any evaluation)."""
        return self._best_index

    @property
    def best_step(self) -> int | None:
        """The step of the checkpoint it would deliver: the best observed value (first maximum)."""
        return None if self._best_index is None else self._steps[self._best_index]

    @property
    def best_value(self) -> float | None:
        """The metric at :attr:`best_step`, as the user gave it."""
        return None if self._best_index is None else self._values[self._best_index]

    @property
    def decisions(self) -> list[dict[str, Any]]:
        """One dict per evaluation: ``checkpoint`` (1-based), ``step``, ``value``, ``action``.

        ``action`` is ``"continue"``, ``"stop"`` or ``"end"`` (no decision: the run's
        K-th evaluation or a later one).
        """
        return [dict(d) for d in self._decisions]

    # ------------------------------------------------------------------ deciding

    def policy_value(self, value: float) -> float:
        """The value the policy sees for the user's ``value``: direction, then scale."""
        v = float(value) if self.greater_is_better else -float(value)
        return self.scale(v)

    def observation(self) -> dict[str, np.ndarray]:
        """The observation after the last evaluation, as ``EvalStop-v0`` would show it.

        Field for field what :func:`~evalstop_gym.envs.tables.observation_rows` writes into
        the env's row of a lone job after this checkpoint (the same float32 casts, clips,
        masks and decline count; ``tests/policies/test_online.py`` checks it against the
        env and against that function), built in O(W) rather than as a (K, D) table.
        """
        i = min(len(self._values), self.n_checkpoints)
        if i == 0:
            raise RuntimeError("no evaluation observed yet: call observe() first")
        w = self.layout.window
        n = min(i, w)  # the filled slots, right-aligned
        obs: dict[str, np.ndarray] = {}
        for f in self.layout.fields:
            if f == "job_type":
                a = np.zeros(len(JOB_TYPES), dtype=np.float32)
                a[self._type] = 1.0
            elif f in ("evals", "loss"):
                src = self._evals if f == "evals" else self._loss
                a = np.zeros(2 * w, dtype=np.float32)
                a[w - n : w] = np.clip(src[0, i - n : i].astype(np.float32), *BOUNDS[f])
                a[2 * w - n :] = 1.0
            elif f == "consecutive_declines":
                a = np.array([self._declines], dtype=np.float32)
            elif f == "progress":
                a = np.array([i / self.n_checkpoints], dtype=np.float32)
            else:  # pragma: no cover - parse_obs_fields admits the boundary fields only
                raise KeyError(f"no builder for the observation field {f!r}")
            obs[f] = a
        return obs

    def observe(self, value: float, *, loss: float | None = None, step: int | None = None) -> bool:
        """Record one evaluation; True when the policy stops the run now.

        Args:
            value: The watched metric at this evaluation (the user's units and direction).
            loss: The training loss at this evaluation; carried over from the last one
                when None (a constant 1, relative, before any is given).  Only stoppers
                that read the loss (``LossPlateau``, a model trained with it) need it.
            step: The training step (default: the evaluation's 1-based number); strictly
                increasing.

        After a stop, a further call records nothing and returns True.  Evaluations
        beyond the K-th get no decision (False, with one warning).
        """
        if self.stopped:
            return True
        if not _is_number(value):
            raise ConfigError("value", value, "a finite number")
        if loss is not None and not _is_number(loss):
            raise ConfigError("loss", loss, "a finite number or None")
        i = len(self._values) + 1
        if step is None:
            step = self._steps[-1] + 1 if self._steps else i
        if not isinstance(step, int | np.integer) or isinstance(step, bool) or step < 0:
            raise ConfigError("step", step, "an integer >= 0")
        step = int(step)
        if self._steps and step <= self._steps[-1]:
            raise ConfigError(
                "step", step, f"a step after the previous evaluation's ({self._steps[-1]})"
            )
        self._record(float(value), None if loss is None else float(loss), step)
        self._warn_if_clipped(i, step)
        if i >= self.n_checkpoints:
            if i > self.n_checkpoints and not self._warned_beyond:
                self._warned_beyond = True
                warnings.warn(
                    f"{self.name}: evaluation {i} at step {step} is beyond n_checkpoints="
                    f"{self.n_checkpoints}; no decision after the K-th (the run has ended)",
                    stacklevel=2,
                )
            self._decisions.append(self._decision(i, step, value, END))
            return False
        action = self.policy.act(self.observation())
        try:
            a = int(action)
        except (TypeError, ValueError):
            a = -1
        if a not in (0, 1):
            raise ConfigError(f"{self.name}.act()", action, "0 (continue) or 1 (stop)")
        self._decisions.append(self._decision(i, step, value, STOP if a else CONTINUE))
        if a:
            self._stop_index = i - 1
        return bool(a)

    def _warn_if_clipped(self, i: int, step: int) -> None:
        """One warning when the policy's value leaves the env's eval bounds (it is clipped there)."""
        lo, hi = BOUNDS["evals"]
        if self._warned_clip or i > self.n_checkpoints or "evals" not in self.layout.fields:
            return
        v = self._evals[0, i - 1]
        if not lo <= v <= hi:
            self._warned_clip = True
            warnings.warn(
                f"{self.name}: the value at step {step} is {v:g} in the policy's units; the "
                f"env's observation clips to [{lo:g}, {hi:g}]: pass scale= (a ScaleRule) to map "
                "the metric into eval units",
                stacklevel=3,
            )

    def _record(self, value: float, loss: float | None, step: int) -> None:
        i = len(self._values)
        self._values.append(value)
        self._losses.append(loss)
        self._steps.append(step)
        if self._best_index is None or self.policy_value(value) > self.policy_value(
            self._values[self._best_index]
        ):
            self._best_index = i
        if i >= self.n_checkpoints:
            return
        self._evals[0, i] = self.policy_value(value)
        # Evals in a row lower than the one before (the engine's comparison, on float64).
        self._declines = (
            self._declines + 1 if i and self._evals[0, i] < self._evals[0, i - 1] else 0
        )
        self._loss[0, i] = self._relative_loss(loss, i)

    def _relative_loss(self, loss: float | None, i: int) -> float:
        if loss is None:
            return float(self._loss[0, i - 1]) if i else 1.0
        if not self.relative_loss:
            return loss
        if self._loss_base is None:
            self._loss_base = loss
        base = self._loss_base
        # A loss that starts at 0 or below (GRPO's can) has no ratio: shift it to start at 1.
        return loss / base if base > 0 else 1.0 + loss - base

    @staticmethod
    def _decision(i: int, step: int, value: float, action: str) -> dict[str, Any]:
        return {"checkpoint": i, "step": step, "value": float(value), "action": action}

    # ------------------------------------------------------------------ state

    def _settings(self) -> dict[str, Any]:
        return {
            "n_checkpoints": self.n_checkpoints,
            "job_type": self.job_type,
            "greater_is_better": self.greater_is_better,
            "scale": self.scale.to_dict(),
            "relative_loss": self.relative_loss,
            "obs_fields": list(self.layout.fields),
            "eval_window": self.layout.window,
        }

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue the run's decisions, as JSON-serialisable data."""
        return {
            "version": STATE_VERSION,
            "policy": self.name,
            **self._settings(),
            "values": list(self._values),
            "losses": list(self._losses),
            "steps": list(self._steps),
            "decisions": self.decisions,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`state_dict`'s ``state``: its evaluations are re-fed to the policy.

        Raises:
            ConfigError: a state of another layout version or of other settings
                (K, direction, scale, fields, window): it would decide differently.
        """
        if not isinstance(state, dict) or state.get("version") != STATE_VERSION:
            got = state.get("version") if isinstance(state, dict) else state
            raise ConfigError("state.version", got, f"{STATE_VERSION} (an OnlineStopper state)")
        mine = self._settings()
        for key, want in mine.items():
            if state.get(key) != want:
                raise ConfigError(f"state.{key}", state.get(key), f"{want!r}, this stopper's")
        values, losses, steps = state.get("values"), state.get("losses"), state.get("steps")
        recorded = state.get("decisions")
        if not (
            isinstance(values, list)
            and isinstance(losses, list)
            and isinstance(steps, list)
            and isinstance(recorded, list)
            and len(values) == len(losses) == len(steps) == len(recorded)
        ):
            raise ConfigError("state", "values/losses/steps/decisions", "lists of one length each")
        self._reset_run()
        changed = []
        for v, loss, s, rec in zip(values, losses, steps, recorded, strict=True):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                stop = self.observe(v, loss=loss, step=s)
            if self._decisions[-1]["action"] != rec.get("action"):
                changed.append(int(s))
                self._decisions[-1]["action"] = rec.get("action")
                stop = rec.get("action") == STOP
                self._stop_index = len(self._values) - 1 if stop else None
            if stop:
                break
        if changed:
            warnings.warn(
                f"{self.name}: the policy now decides differently at step(s) {changed} than "
                "the recorded state (it is not deterministic); the recorded decisions are kept",
                stacklevel=2,
            )

    def __repr__(self) -> str:
        """The policy, K and the state of the run."""
        where = f"stopped at step {self.stop_step}" if self.stopped else f"{self.n_observed} evals"
        return f"OnlineStopper({self.policy!r}, n_checkpoints={self.n_checkpoints}, {where})"


__all__ = [
    "CONTINUE",
    "END",
    "SHORT_SPECS",
    "STOP",
    "OnlineStopper",
    "ScaleRule",
    "short_spec_factory",
]
