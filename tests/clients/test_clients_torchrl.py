"""TorchRL's GymEnv on both ids: specs check, and a few DQN iterations on the flat one."""

from __future__ import annotations

import math

import pytest
from readme_snippets import run_snippet

pytest.importorskip("torchrl")
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_torchrl_specs_hold_for_both_ids() -> None:
    from torchrl.envs import GymEnv
    from torchrl.envs.utils import check_env_specs

    import evalstop_gym  # noqa: F401

    for env_id in ("EvalStop-v0", "EvalStopFlat-v0"):
        check_env_specs(GymEnv(env_id, n_jobs=4, num_gpus=16))


def test_torchrl_snippet_from_the_readme() -> None:
    episode = run_snippet("torchrl")["episode"]
    assert bool(episode["next", "done"][-1])
    assert math.isfinite(episode["next", "reward"].sum().item())
