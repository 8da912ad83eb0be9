"""RL Zoo (``rl_zoo3``) hyperparameters for ``EvalStop-v0`` and ``EvalStopFlat-v0``.

One YAML file per algorithm (package data, so the installed package has
them) and one module per algorithm whose ``hyperparams`` attribute is that
file's content: RL Zoo accepts a module path as ``--conf-file``, so no clone
of this repository is needed::

    python -m rl_zoo3.train --algo dqn --env EvalStopFlat-v0 \\
        --gym-packages evalstop_gym --conf-file baselines.hyperparams.dqn
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import resources
from typing import Any


def load(algo: str) -> dict[str, Any]:
    """The hyperparameters of ``algo`` (``ppo``, ``dqn``): ``{env id: {name: value}}``."""
    import yaml  # a dependency of rl_zoo3, the only reader of these files

    from evalstop_gym.fileio import read_regular

    path = resources.files(__name__) / f"{algo}.yml"
    if not path.is_file():
        raise ValueError(f"algo={algo!r}: no {algo}.yml in baselines/hyperparams")
    with resources.as_file(path) as real:  # a regular file of bounded size, read once
        text = read_regular(real, max_bytes=2**20, field="hyperparams").decode("utf-8")
    return yaml.safe_load(text)


def module_getattr(algo: str) -> Callable[[str], Any]:
    """A module ``__getattr__`` that reads ``<algo>.yml`` when ``hyperparams`` is asked for.

    Lazy, so importing the module reads no file.
    """

    def __getattr__(name: str) -> Any:
        if name == "hyperparams":
            return load(algo)
        raise AttributeError(f"module 'baselines.hyperparams.{algo}' has no attribute {name!r}")

    return __getattr__
