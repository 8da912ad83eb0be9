"""The env's defaults are EvalStopConfig's; the hand-written texts that restate them agree.

``evalstop_gym.envs.config.arguments`` is the one source (the env, the CLI, the
suite and the Bayes stopper read it); the env docstring's ``gym.make`` call and
the keyword-argument table of docs/ENVIRONMENT.md are prose, so they are checked against it.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from evalstop_gym.envs import EvalStopEnv
from evalstop_gym.envs.config import arguments

ARGUMENTS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "ENVIRONMENT.md"


def _defaults() -> dict[str, object]:
    return {name: a.default for name, a in arguments().items()}


def test_env_docstring_states_the_config_defaults() -> None:
    doc = EvalStopEnv.__doc__ or ""
    call = re.search(r'gym\.make\("EvalStop-v0",(.*?)\)\n', doc, re.S)
    assert call, "the Arguments section shows the full gym.make call"
    node = ast.parse(f"f({call.group(1)})", mode="eval").body
    stated = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords}
    assert stated == {**_defaults(), "render_mode": None}


def test_arguments_table_states_the_config_defaults() -> None:
    rows = re.findall(r"^\| `(\w+)` \| (`[^`]*`|[\w.]+) \|", ARGUMENTS_PAGE.read_text(), re.M)
    defaults = _defaults()
    checked = 0
    for name, cell in rows:
        if name not in defaults:
            continue
        text = cell.strip("`")
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            continue  # "preset's", "K", "all": described, not a literal
        assert value == defaults[name], (name, value, defaults[name])
        checked += 1
    assert checked >= 5


def test_the_bayes_ceiling_models_the_env_the_kwargs_build() -> None:
    from baselines import BayesStopper

    env = EvalStopEnv(eval_noise=0.05)
    bayes = BayesStopper.from_env_kwargs({"eval_noise": 0.05})
    sim = env.env_config.sim_config
    assert bayes.config == {
        "calibration": sim.calibration,
        "eval_noise": 0.05,
        "gpu_hour_price": env.gpu_hour_price,
        "workload": sim.workload,
        "deliver": sim.deliver,
        "hack_fraction": sim.resolved_workload().hack_fraction,
    }
    assert BayesStopper.from_config(env.env_config).config == bayes.config
