"""The SB3 model a run trains, and what its learning runs under.

:func:`make_model` builds it (TensorBoard logs when tensorboard is installed);
:func:`unchecked_distributions` skips torch's argument checks while it learns (the same
numbers, a third less time per distribution); :func:`has_progress_bar` says whether SB3
can show one.
"""

from __future__ import annotations

import contextlib
import copy
from pathlib import Path
from typing import Any

from ...learned import RECURRENT_ALGOS, algo_class


def make_model(
    algo: str,
    hp: dict[str, Any],
    venv: Any,
    seed: int,
    flatten: bool,
    verbose: int,
    tensorboard: str | None,
    log_dir: Path,
) -> Any:
    """The SB3 model; TensorBoard logs go to ``log_dir/tb`` when tensorboard is installed."""
    if tensorboard is None:
        try:
            import tensorboard as _  # noqa: F401

            tensorboard = str(log_dir / "tb")
        except ImportError:
            tensorboard = None
    lstm = "Lstm" if algo in RECURRENT_ALGOS else ""
    return algo_class(algo)(
        f"Mlp{lstm}Policy" if flatten else f"MultiInput{lstm}Policy",
        venv,
        seed=seed,
        verbose=verbose,
        tensorboard_log=tensorboard,
        device="cpu",
        **copy.deepcopy(hp),  # SB3 fills policy_kwargs in place: keep ours clean
    )


@contextlib.contextmanager
def unchecked_distributions() -> Any:
    """Torch distributions built without checking their arguments, while the block runs.

    PPO and A2C build a ``Categorical`` at every rollout step and minibatch, and its
    argument checks (that the logits are real vectors, that a sample lies in the support)
    cost about a third of building, sampling and scoring one. The checks only read their
    inputs, so every number is the same without them; torch's default comes back after.
    """
    from torch.distributions import Distribution

    before = Distribution._validate_args
    Distribution.set_default_validate_args(False)
    try:
        yield
    finally:
        Distribution.set_default_validate_args(before)


def has_progress_bar() -> bool:
    """Whether SB3 can show a progress bar (rich and tqdm are installed)."""
    try:
        import rich  # noqa: F401
        import tqdm  # noqa: F401
    except ImportError:
        return False
    return True
