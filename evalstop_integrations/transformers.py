"""``EvalStopCallback``: a package stopper decides, at each evaluation, whether a run stops.

For transformers' ``Trainer`` and every TRL trainer (``DPOTrainer``, ``GRPOTrainer``,
``RewardTrainer``... subclass it)::

    from baselines import EvalStop
    from evalstop_integrations.transformers import EvalStopCallback

    stop = EvalStopCallback(EvalStop(2), metric="eval_loss")
    trainer = Trainer(..., args=TrainingArguments(eval_strategy="steps", ...), callbacks=[stop])
    trainer.train()
    stop.stop_step, stop.best_step, stop.delivered_checkpoint

How it differs from transformers' ``EarlyStoppingCallback``: that callback counts
evaluations *without a new best* (``early_stopping_patience``) on ``metric_for_best_model``,
so on a noisy metric it stops after ``patience`` evals that merely fail to beat a lucky
peak, possibly before the real one.  ``EvalStop(k)`` counts *consecutive declines* (each
eval worse than the one before), and any other package stopper (``Cusum``,
``BayesStopper``, a learned model, your own :class:`~baselines.Policy`) can decide
instead.  The callback also keeps the checkpoint it would deliver on disk whatever
``save_total_limit`` says, can load it at the end, and resumes with its state.
"""

from __future__ import annotations

import logging
import math
import os
import shutil
import warnings
import weakref
from pathlib import Path
from typing import Any

from transformers import TrainerCallback
from transformers.trainer_callback import ExportableState
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, IntervalStrategy, SaveStrategy

from baselines.online import OnlineStopper, check_n_checkpoints, check_run_settings
from baselines.policies import Policy
from evalstop_gym.errors import ConfigError

from .common import (
    as_value,
    check_key,
    check_metric,
    new_stopper,
    policy_name,
    resolve_policy,
)

logger = logging.getLogger(__name__)

#: The folder under ``output_dir`` the delivered checkpoint is pinned in.  Trainer's
#: rotation only looks at ``output_dir/checkpoint-*``, so nothing in here is ever rotated.
PIN_DIR = "evalstop-delivered"

#: Live callbacks, so that one transformers rebuilds from a checkpoint's JSON (with
#: ``restore_callback_states_from_checkpoint=True``) can borrow the policy object, which
#: JSON cannot carry.
_LIVE: list[weakref.ref[EvalStopCallback]] = []


class EvalStopCallback(TrainerCallback, ExportableState):
    """Stop a ``Trainer`` run when a package stopper says so; keep what it would deliver.

    At every evaluation during ``train()`` the value of ``metric`` is fed to one
    :class:`~baselines.online.OnlineStopper` (the object the offline replay of a log
    uses); when it says stop, ``control.should_training_stop`` is set.  The checkpoint it
    would deliver (the best eval so far, :attr:`best_step`) is saved if the run would not
    save one at that step, and pinned: hard-linked (copied where links are not supported)
    to ``output_dir/evalstop-delivered/checkpoint-<step>``, out of reach of
    ``save_total_limit`` whatever ``metric_for_best_model`` the trainer tracks.  One
    pinning callback per ``output_dir``; a fresh (not resumed) run refuses an
    ``output_dir`` whose pin folder holds an earlier run's pins (they are never deleted).

    Args:
        policy: Any package stopper (``EvalStop(k)``, ``Cusum``, ``BayesStopper``,
            ``Learned``, your own :class:`~baselines.Policy`); ``None``: ``EvalStop(2)``.
        metric: The key of the evaluation metrics to watch (``"eval_loss"``,
            ``"eval_rewards/accuracies"``...).  An evaluation without it is ignored.
        greater_is_better: The metric's direction; ``None``: lower is better for a name
            ending in ``loss``, higher otherwise (transformers' own rule).
        n_checkpoints: The run's number of evaluations (the stopper's progress
            denominator); ``None``: worked out from ``max_steps`` and ``eval_steps`` (or
            the epochs) when training begins.
        load_best_at_end: Load the delivered checkpoint's weights into the model when
            training ends (the callback's own ``load_best_model_at_end``).
        pin: Keep the delivered checkpoint on disk (see above); ``False`` leaves
            checkpoints to the trainer alone.
        job_type: The job type the stopper is told (``rlhf``, ``dpo`` or ``lora``).
        loss_key: The ``log_history`` key of the training loss, given to the stopper with
            each evaluation (the last one logged at or before it, as the log loaders align
            it); only loss-reading stoppers (``LossPlateau``) use it.  ``None``: none.
        scale: Passed to :class:`~baselines.online.OnlineStopper` (how a metric of unknown
            magnitude is mapped for scale-dependent stoppers).
        policy_name: Used only when transformers rebuilds the callback from a checkpoint:
            the live callback whose policy has this name lends it.

    Decisions are recorded in the trainer's state twice: an entry in ``state.log_history``
    per evaluation (``evalstop_value``, ``evalstop_stop``, ``evalstop_best_step``,
    ``step``) and the stopper's :meth:`state` under ``stateful_callbacks`` in every
    checkpoint's ``trainer_state.json``, which :meth:`on_train_begin` reads back on
    ``trainer.train(resume_from_checkpoint=...)`` (with or without transformers'
    ``restore_callback_states_from_checkpoint``).
    """

    def __init__(
        self,
        policy: Policy | None = None,
        *,
        metric: str = "eval_loss",
        greater_is_better: bool | None = None,
        n_checkpoints: int | None = None,
        load_best_at_end: bool = False,
        pin: bool = True,
        job_type: str = "rlhf",
        loss_key: str | None = "loss",
        scale: Any = None,
        policy_name: str | None = None,
    ) -> None:
        self.metric = check_metric(metric)
        if greater_is_better is None:
            greater_is_better = not metric.endswith("loss")
        for field, flag in (
            ("greater_is_better", greater_is_better),
            ("load_best_at_end", load_best_at_end),
            ("pin", pin),
        ):
            if not isinstance(flag, bool):
                raise ConfigError(field, flag, "True or False")
        self.greater_is_better = greater_is_better
        self.n_checkpoints = check_n_checkpoints(n_checkpoints, optional=True)
        self.load_best_at_end = load_best_at_end
        self.pin = pin
        if policy is None and policy_name is not None:
            policy = _borrow_policy(policy_name)
        self.policy = resolve_policy(policy)
        check_run_settings(job_type, scale)  # at construction, not at the first eval
        self.job_type = job_type
        self.loss_key = check_key("loss_key", loss_key, optional=True)
        self.scale = scale
        self.stopper: OnlineStopper | None = None
        self._output_dir: str | None = None
        self._training = False
        self._pinned_step: int | None = None
        #: The ``TrainerState`` of the run it is in (None between runs): callbacks of one
        #: run share it.
        self._run_state: Any = None
        self._restored: dict[str, Any] | None = None
        self._warned_missing = False
        self._warned_elsewhere = False
        #: One ``{"step", "value", "stop", "best_step"}`` per evaluation fed to the stopper.
        self.history: list[dict[str, Any]] = []
        if self.n_checkpoints is not None:
            self.stopper = self._new_stopper(self.n_checkpoints)
        _LIVE[:] = [ref for ref in _LIVE if ref() is not None]
        _LIVE.append(weakref.ref(self))

    # ---------------------------------------------------------------- what it decided

    @property
    def stopped(self) -> bool:
        """Whether the stopper has said stop."""
        return self.stopper is not None and self.stopper.stopped

    @property
    def stop_step(self) -> int | None:
        """The global step of the evaluation at which it said stop (``None``: it did not)."""
        return None if self.stopper is None else self.stopper.stop_step

    @property
    def best_step(self) -> int | None:
        """The global step of the checkpoint it would deliver (``None`` before any eval)."""
        return None if self.stopper is None else self.stopper.best_step

    @property
    def decisions(self) -> list[dict[str, Any]]:
        """The stopper's decisions so far: ``checkpoint``, ``step``, ``value``, ``action``."""
        return [] if self.stopper is None else list(self.stopper.decisions)

    @property
    def delivered_checkpoint(self) -> str | None:
        """The folder of the checkpoint it would deliver, if it is on disk."""
        step = self.best_step
        if step is None or self._output_dir is None:
            return None
        for folder in (self._pin_path(step), self._checkpoint_path(step)):
            if os.path.isdir(folder):
                return folder
        return None

    # ---------------------------------------------------------------- ExportableState

    def state(self) -> dict[str, Any]:
        """The callback's settings and the stopper's state, as JSON for ``trainer_state.json``."""
        return {
            "args": {
                "metric": self.metric,
                "greater_is_better": self.greater_is_better,
                "n_checkpoints": self.n_checkpoints,
                "load_best_at_end": self.load_best_at_end,
                "pin": self.pin,
                "job_type": self.job_type,
                "loss_key": self.loss_key,
                "scale": None if self.stopper is None else self.stopper.scale.to_dict(),
                "policy_name": policy_name(self.policy),
            },
            "attributes": {
                "_restored": None
                if self.stopper is None
                else {"stopper": self.stopper.state_dict(), "history": list(self.history)},
            },
        }

    # ---------------------------------------------------------------- Trainer events

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Size the stopper from the run, or restore it from the checkpoint resumed from."""
        self._output_dir = args.output_dir
        self._training = True
        if self.n_checkpoints is None:
            self.n_checkpoints = _count_evals(args, state)
        saved = self._saved_state(state) if state.global_step > 0 else None
        if saved is None and self._restored is not None and state.global_step > 0:
            saved = self._restored
        if self.pin and state.is_world_process_zero:
            self._check_pin_folder(state)
        self._run_state = state
        self.stopper = self._new_stopper(self.n_checkpoints)
        self.history = []
        self._pinned_step = None
        if saved is not None:
            _check_restored(saved)
            try:
                self.stopper.load_state_dict(saved["stopper"])
            except (AttributeError, KeyError, TypeError, ValueError) as exc:
                if isinstance(exc, ConfigError):
                    raise
                raise _corrupt(saved["stopper"], f"the stopper's saved state ({exc})") from None
            self.history = [dict(h) for h in saved["history"]]
            self._pinned_step = self.best_step if self.pin else None
        self._restored = None
        if self.stopped:
            control.should_training_stop = True  # resumed from a run it had stopped
        if args.save_strategy == SaveStrategy.BEST and args.metric_for_best_model not in (
            self.metric,
            self.metric.removeprefix("eval_"),
        ):
            logger.warning(
                "save_strategy='best' saves only at new bests of %s, not of %s: the checkpoint "
                "EvalStopCallback would deliver may never be written",
                args.metric_for_best_model,
                self.metric,
            )

    def on_evaluate(
        self,
        args: Any,
        state: Any,
        control: Any,
        metrics: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """Feed the watched metric to the stopper; stop, and ask for a save at a new best."""
        if not self._training or self.stopper is None or self.stopper.stopped:
            return
        metrics = metrics or {}
        if self.metric not in metrics:
            if not self.history and not self._warned_missing:
                self._warned_missing = True
                warnings.warn(
                    f"EvalStopCallback: metric={self.metric!r} is not in the evaluation's "
                    f"metrics {sorted(metrics)}; evaluations without it are not decided",
                    stacklevel=2,
                )
            return
        value = as_value(metrics[self.metric], self.metric)
        if value is None:
            return
        step = int(state.global_step)
        if self.history and step <= self.history[-1]["step"]:
            return  # this step was decided already (a resumed run re-evaluating it)
        stop = bool(self.stopper.observe(value, loss=self._last_loss(state, step), step=step))
        best = self.best_step
        self.history.append({"step": step, "value": value, "stop": stop, "best_step": best})
        state.log_history.append(
            {
                "evalstop_value": value,
                "evalstop_stop": int(stop),
                "evalstop_best_step": best,
                "step": step,
            }
        )
        if self.pin and best == step:
            # The checkpoint it would deliver is this step's: make sure one is written.
            control.should_save = True
        if stop:
            control.should_training_stop = True

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Keep a run it has stopped stopped (a resume from its last checkpoint runs one step)."""
        if self.stopped:
            control.should_training_stop = True

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Pin the delivered checkpoint once it is on disk; drop the previous pin."""
        if not self.pin or self.best_step is None or not state.is_world_process_zero:
            return
        step = int(state.global_step)
        if (
            step == self.best_step
            and not os.path.isdir(self._checkpoint_path(step))
            and not self._warned_elsewhere
        ):
            # The trainer saved this step's checkpoint, but not in output_dir (a
            # hyperparameter search writes each trial's into output_dir/run-N/): say so
            # rather than pin nothing in silence.
            self._warned_elsewhere = True
            warnings.warn(
                f"EvalStopCallback: the trainer saved step {step}'s checkpoint outside "
                f"{self._output_dir!r} (no {os.path.basename(self._checkpoint_path(step))} "
                "there; Trainer.hyperparameter_search writes run-N/ folders): nothing is "
                "pinned, and save_total_limit may delete what it would deliver",
                stacklevel=2,
            )
        self._pin(self.best_step)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Load the delivered checkpoint's weights if asked to."""
        self._training = False
        self._run_state = None
        if self.pin and self.best_step is not None and state.is_world_process_zero:
            self._pin(self.best_step)
        if self.load_best_at_end and self.best_step is not None:
            folder = self.delivered_checkpoint
            if folder is None:
                logger.warning(
                    "EvalStopCallback: no checkpoint of step %s on disk to load", self.best_step
                )
            else:
                load_weights(kwargs["model"], folder)

    # ---------------------------------------------------------------- internals

    def _new_stopper(self, n_checkpoints: int) -> OnlineStopper:
        return new_stopper(
            self.policy,
            n_checkpoints,
            greater_is_better=self.greater_is_better,
            job_type=self.job_type,
            scale=self.scale,
        )

    def _last_loss(self, state: Any, step: int) -> float | None:
        """The training loss last logged at or before ``step`` (``None``: none logged)."""
        if self.loss_key is None:
            return None
        for entry in reversed(state.log_history):
            if self.loss_key in entry and entry.get("step", step) <= step:
                return as_value(entry[self.loss_key], self.loss_key)
        return None

    def _saved_state(self, state: Any) -> dict[str, Any] | None:
        """This callback's stopper state in a resumed ``trainer_state.json``, if any."""
        callbacks = state.stateful_callbacks or {}
        if not isinstance(callbacks, dict):
            return None  # not transformers' record: nothing of this callback's
        stored = callbacks.get(type(self).__name__)
        entries = stored if isinstance(stored, list) else [stored] if stored else []
        mine = self.state()["args"]
        for entry in entries:
            if not (
                isinstance(entry, dict)
                and isinstance(entry.get("args", {}), dict)
                and isinstance(entry.get("attributes", {}), dict)
            ):
                raise _corrupt(entry, "an object with 'args' and 'attributes' objects")
            theirs = entry.get("args", {})
            if all(
                theirs.get(k) == mine[k] for k in ("metric", "policy_name", "greater_is_better")
            ):
                return entry.get("attributes", {}).get("_restored")
        return None

    def _check_pin_folder(self, state: Any) -> None:
        """Refuse to pin where another callback of this run pins, or over an earlier run's pins.

        Pins are the only copies of checkpoints ``save_total_limit`` has rotated away: a
        pin of another callback (the same step's folder) or of an earlier run in this
        ``output_dir`` (a fresh run, not a resume) is never deleted; the run stops
        before its first step instead, saying what to do.
        """
        for ref in _LIVE:
            other = ref()
            if (
                other is not None
                and other is not self
                and other.pin
                and other._run_state is state
                and other._output_dir == self._output_dir
            ):
                raise ConfigError(
                    "pin",
                    True,
                    f"one pinning callback per output_dir ({other!r} pins in "
                    f"{self._output_dir!r} in this run): pin=False on the others",
                )
        folder = os.path.join(str(self._output_dir), PIN_DIR)
        if not os.path.lexists(folder):
            return
        if os.path.isdir(folder):
            held = sorted(os.listdir(folder))
            if state.global_step > 0 or not held:
                return  # a resumed run's pins are its own
            what = f"a folder of an earlier run's pins ({', '.join(held[:3])})"
        else:
            what = "a file that is not a folder"
        raise ConfigError(
            "output_dir",
            str(self._output_dir),
            f"a folder whose {PIN_DIR} holds no earlier run's checkpoints, for a fresh run "
            f"(it is {what}: move it, resume that run, or train into another output_dir)",
        )

    def _checkpoint_path(self, step: int) -> str:
        return os.path.join(str(self._output_dir), f"{PREFIX_CHECKPOINT_DIR}-{step}")

    def _pin_path(self, step: int) -> str:
        return os.path.join(str(self._output_dir), PIN_DIR, f"{PREFIX_CHECKPOINT_DIR}-{step}")

    def _pin(self, step: int) -> None:
        source, target = self._checkpoint_path(step), self._pin_path(step)
        if not os.path.isdir(target):
            if not os.path.isdir(source):
                return  # not written yet (or never: save_strategy='best' on another metric)
            _link_tree(source, target)
        if self._pinned_step not in (None, step):
            shutil.rmtree(self._pin_path(self._pinned_step), ignore_errors=True)
        self._pinned_step = step

    def __repr__(self) -> str:
        return (
            f"EvalStopCallback({policy_name(self.policy)}, metric={self.metric!r}, "
            f"greater_is_better={self.greater_is_better})"
        )


def _corrupt(value: Any, allowed: str) -> ConfigError:
    """The one-line error of a resumed checkpoint whose saved callback state is damaged."""
    return ConfigError(
        "stateful_callbacks['EvalStopCallback']",
        value,
        f"{allowed}, as an EvalStopCallback wrote it in the checkpoint's trainer_state.json "
        "(resume from an unchanged checkpoint, or start the run afresh)",
    )


def _check_restored(saved: Any) -> None:
    """Refuse a saved ``_restored`` state that is not what :meth:`EvalStopCallback.state` writes."""
    if not isinstance(saved, dict) or not isinstance(saved.get("stopper"), dict):
        raise _corrupt(saved, "an object with the stopper's state under 'stopper'")
    history = saved.get("history")
    if not isinstance(history, list) or not all(
        isinstance(h, dict)
        and isinstance(h.get("step"), int)
        and not isinstance(h.get("step"), bool)
        and isinstance(h.get("value"), int | float)
        and math.isfinite(h["value"])
        for h in history
    ):
        raise _corrupt(
            history, "a list of {'step': int, 'value': finite number, ...} under 'history'"
        )


def _borrow_policy(name: str) -> Policy:
    """The policy of the newest live callback whose policy is called ``name``."""
    for ref in reversed(_LIVE):
        callback = ref()
        if callback is not None and policy_name(callback.policy) == name:
            return callback.policy
    raise ConfigError(
        "policy_name",
        name,
        "the policy of an EvalStopCallback built in this process (transformers rebuilt the "
        "callback from a checkpoint; pass the callback with its policy to the Trainer)",
    )


def _count_evals(args: Any, state: Any) -> int:
    """How many evaluations ``train()`` will run: the stopper's progress denominator."""
    if args.eval_strategy == IntervalStrategy.EPOCH:
        return max(1, math.ceil(state.num_train_epochs))
    if args.eval_strategy == IntervalStrategy.STEPS and state.eval_steps:
        every, last = int(state.eval_steps), int(state.max_steps)
        first = max(every, math.ceil((args.eval_delay or 0) / every) * every)
        n = max(0, (last - first) // every + 1) if first <= last else 0
        return max(1, n + (last % every != 0))  # the final step is evaluated too
    raise ConfigError(
        "eval_strategy",
        str(args.eval_strategy),
        "'steps' or 'epoch' (the callback decides at evaluations), or pass n_checkpoints",
    )


def _link_tree(source: str, target: str) -> None:
    """``target`` as a copy of the folder ``source`` made of hard links (copies if unsupported)."""

    def link(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    tmp = target + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    Path(tmp).parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(source, tmp, copy_function=link)
    os.replace(tmp, target)


def load_weights(model: Any, folder: str) -> None:
    """Load a checkpoint folder's weights into ``model`` (as ``Trainer`` loads its best).

    Reads ``model.safetensors`` or ``pytorch_model.bin``, a sharded index, or a PEFT
    adapter (through the model's ``load_adapter``).
    """
    import torch
    from transformers.trainer_utils import load_sharded_checkpoint
    from transformers.utils import (
        ADAPTER_SAFE_WEIGHTS_NAME,
        ADAPTER_WEIGHTS_NAME,
        SAFE_WEIGHTS_INDEX_NAME,
        SAFE_WEIGHTS_NAME,
        WEIGHTS_INDEX_NAME,
        WEIGHTS_NAME,
    )

    def has(name: str) -> bool:
        return os.path.isfile(os.path.join(folder, name))

    if has(ADAPTER_SAFE_WEIGHTS_NAME) or has(ADAPTER_WEIGHTS_NAME):
        model.load_adapter(folder, model.active_adapters[0])
    elif has(SAFE_WEIGHTS_NAME):
        import safetensors.torch

        state_dict = safetensors.torch.load_file(os.path.join(folder, SAFE_WEIGHTS_NAME), "cpu")
        model.load_state_dict(state_dict, False)  # tied weights are saved once
    elif has(WEIGHTS_NAME):
        path = os.path.join(folder, WEIGHTS_NAME)
        model.load_state_dict(torch.load(path, map_location="cpu", weights_only=True), False)
    elif has(SAFE_WEIGHTS_INDEX_NAME) or has(WEIGHTS_INDEX_NAME):
        load_sharded_checkpoint(model, folder, strict=False)
    else:
        raise ConfigError("checkpoint", folder, "a folder with model weights written by Trainer")
