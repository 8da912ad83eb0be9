"""The RL Zoo hyperparameter files: the single source of a training run's defaults.

``baselines/hyperparams/<algo>.yml`` holds one ``EvalStop-v0`` entry per algorithm, in RL
Zoo's format, so ``python -m rl_zoo3.train --conf-file baselines.hyperparams.<algo>`` and
:func:`baselines.training.train` read the same settings. RL Zoo writes ``policy_kwargs`` as
Python source (``"dict(net_arch=[64, 64])"``); it is read here as literals only, never
evaluated.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from ..learned import ALGO_CLASSES

#: RL Zoo hyperparameter files, one per algorithm (package data of ``baselines``; the module
#: path ``baselines.hyperparams.<algo>`` is what RL Zoo's ``--conf-file`` takes).
HYPERPARAMS_DIR = Path(__file__).parents[1] / "hyperparams"
#: The algorithms a zoo file exists for (those :class:`baselines.Learned` loads).
ALGOS: tuple[str, ...] = tuple(ALGO_CLASSES)
#: Keys of a zoo file that are not keyword arguments of the SB3 algorithm.
ZOO_KEYS = ("n_envs", "n_timesteps", "policy", "env_kwargs", "env_wrapper")
#: Training-env wrappers a zoo file may name (``env_wrapper``), by RL Zoo's dotted path.
ENV_WRAPPERS: tuple[str, ...] = ("evalstop_gym.envs.wrappers.JobEpisodes",)
#: The environment id the zoo files configure.
ZOO_ENV_ID = "EvalStop-v0"


def check_algo(algo: str) -> None:
    """Refuse an algorithm without a zoo file, naming the allowed ones."""
    if algo not in ALGOS:
        raise ValueError(f"algo={algo!r} is not allowed: one of {list(ALGOS)}")


def load_zoo_config(algo: str) -> dict[str, Any]:
    """The ``EvalStop-v0`` entry of ``hyperparams/<algo>.yml``, ``policy_kwargs`` as a dict.

    RL Zoo writes ``policy_kwargs`` as Python source (``"dict(net_arch=[64, 64])"``);
    it is read here as literals only, never evaluated.
    """
    import yaml

    check_algo(algo)
    path = HYPERPARAMS_DIR / f"{algo}.yml"
    with open(path) as fh:
        conf = dict(yaml.safe_load(fh)[ZOO_ENV_ID])
    if isinstance(conf.get("policy_kwargs"), str):
        conf["policy_kwargs"] = _literal_dict_call(conf["policy_kwargs"], path)
    return conf


def _literal_dict_call(text: str, path: Path) -> dict[str, Any]:
    """``"dict(a=1, b=[2])"`` -> ``{"a": 1, "b": [2]}``; anything else is refused."""
    node = ast.parse(text, mode="eval").body
    if not (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "dict"
        and not node.args
    ):
        raise ValueError(f"{path}: policy_kwargs={text!r} is not allowed: dict(key=literal, ...)")
    return {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords if kw.arg}


def load_hyperparams(algo: str) -> dict[str, Any]:
    """The SB3 keyword arguments of ``algo`` (its zoo file without the zoo-only keys)."""
    return {k: v for k, v in load_zoo_config(algo).items() if k not in ZOO_KEYS}


__all__ = [
    "ALGOS",
    "ENV_WRAPPERS",
    "HYPERPARAMS_DIR",
    "ZOO_ENV_ID",
    "ZOO_KEYS",
    "check_algo",
    "load_hyperparams",
    "load_zoo_config",
]
