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

The scale, the short specs and the settings' checks live in :mod:`.online_parts`; this
module keeps :class:`OnlineStopper`, and every name the parts define stays importable
from here.
"""

# Re-exports: the parts' names stay importable from this module (its import path is the API).
# ruff: noqa: F401

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from evalstop_gym.envs.core import BOUNDS
from evalstop_gym.errors import ConfigError
from evalstop_gym.sim.workloads import JOB_TYPES

from .online_parts import specs as _specs
from .online_parts.scale import SIM_GAIN, SIM_START, ScaleRule, is_number
from .online_parts.settings import check_n_checkpoints, check_run_settings, layout_of
from .online_parts.specs import SHORT_FORMS, SHORT_SPECS, short_spec_factory
from .policies import Policy

# The helpers' old private names, which OnlineStopper and tests reach: assigned, since a
# module imports no other module's private name (tests/test_architecture.py).
_is_number = is_number
_layout_of = layout_of
_numbers = _specs._numbers

#: The version of :meth:`OnlineStopper.state_dict`'s layout.
STATE_VERSION = 1
#: The actions recorded in :attr:`OnlineStopper.decisions`.
CONTINUE, STOP, END = "continue", "stop", "end"


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
