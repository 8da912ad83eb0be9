"""Module paths that moved keep working for users' code, with a DeprecationWarning naming the new one."""

from __future__ import annotations

import importlib
import sys

import pytest

MOVED = {
    "baselines.train": ("baselines.training.train", "TrainConfig"),
    "baselines.native_vec": ("baselines.training.native_vec", "NativeVecEnv"),
    "baselines.domain_random": ("baselines.training.domain_random", "DomainRandomised"),
}


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_warns_and_gives_the_new_objects(old: str) -> None:
    pytest.importorskip("stable_baselines3")
    new, name = MOVED[old]
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=new):
        module = importlib.import_module(old)
    assert getattr(module, name) is getattr(importlib.import_module(new), name)
    with pytest.raises(AttributeError):
        module.no_such_name  # noqa: B018
