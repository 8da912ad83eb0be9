"""What the TRL and English generators' evaluation callbacks share.

Both score the policy at step 0 and every ``eval_every`` steps through the trainer's own
``log`` (so the scores land in ``state.log_history`` and ``trainer_state.json``), with the
model in eval mode; both sample fixed-length completions outside the global random stream,
and both need a completion's log-probability under a model for the KL they report.  Needs
torch and transformers (the ``trl`` extra).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from transformers import TrainerCallback


def sample_completions(
    model: Any, prompt_ids: np.ndarray, seed: int, length: int, pad_id: int
) -> np.ndarray:
    """One ``length``-token completion per prompt (token ids), isolated from the global stream.

    Args:
        model: A causal LM.
        prompt_ids: ``(n, prompt length)`` token ids (one length for all: no padding).
        seed: Seed of the sampling (a forked torch random state).
        length: Tokens per completion (exactly: ``min_new_tokens`` = ``max_new_tokens``).
        pad_id: The tokenizer's padding id.

    Returns:
        ``(n, length)`` token ids.
    """
    import torch

    with torch.random.fork_rng(devices=[]), torch.no_grad():
        torch.manual_seed(seed)
        ids = torch.as_tensor(prompt_ids)
        out = model.generate(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            do_sample=True,
            top_k=0,
            top_p=1.0,
            temperature=1.0,
            max_new_tokens=length,
            min_new_tokens=length,
            pad_token_id=pad_id,
        )
    return out[:, ids.shape[1] :].numpy()


def sequence_logprob(model: Any, prompt_ids: np.ndarray, completion_ids: np.ndarray) -> np.ndarray:
    """Log-probability of each completion given its prompt, summed over completion tokens."""
    import torch

    with torch.no_grad():
        full = torch.as_tensor(np.concatenate([prompt_ids, completion_ids], axis=1))
        logp = torch.log_softmax(model(input_ids=full).logits[:, :-1].float(), dim=-1)
        token_logp = logp.gather(-1, full[:, 1:, None]).squeeze(-1)
        return token_logp[:, prompt_ids.shape[1] - 1 :].sum(dim=1).numpy()


class PeriodicEvalCallback(TrainerCallback):
    """Logs :meth:`scores` at step 0, every ``config.eval_every`` steps and at the last step.

    A subclass sets ``self.config`` (with ``eval_every``) and ``self.trainer`` (the trainer
    whose ``log`` files the scores) and defines ``scores(model, step) -> dict``.
    """

    config: Any
    trainer: Any

    def scores(self, model: Any, step: int) -> dict[str, float]:
        """The values to log at ``step`` (a subclass's)."""
        raise NotImplementedError

    def _evaluate(self, state: Any, control: Any, model: Any) -> None:
        # Trainer.log ends in CallbackHandler.on_log, which clears control.should_log: without
        # restoring it, the training metrics of this very step would never be logged.
        pending_log = control.should_log
        was_training = model.training
        model.eval()
        try:
            self.trainer.log(self.scores(model, state.global_step))
        finally:
            model.train(was_training)
            control.should_log = pending_log

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Evaluate the initial policy (step 0)."""
        self._evaluate(state, control, kwargs["model"])

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Evaluate every ``eval_every`` steps and at the last step."""
        if state.global_step % self.config.eval_every == 0 or state.global_step == state.max_steps:
            self._evaluate(state, control, kwargs["model"])
