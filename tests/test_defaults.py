"""Each default is stated once or tied by a test: SimConfig, EvalStopEnv, its docstring, README."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from evalstop_cli.envargs import env_parameters
from evalstop_gym import SimConfig
from evalstop_gym.envs import EvalStopEnv

README = Path(__file__).resolve().parents[1] / "README.md"


def _signature_defaults() -> dict[str, object]:
    return {name: p.default for name, p in env_parameters().items()}


def test_env_signature_defaults_agree_with_simconfig() -> None:
    defaults = _signature_defaults()
    shared = [f for f in SimConfig.__dataclass_fields__.values() if f.name in defaults]
    assert len(shared) >= 10
    for f in shared:
        assert defaults[f.name] == f.default, f.name


def test_env_docstring_states_the_signature_defaults() -> None:
    doc = EvalStopEnv.__doc__ or ""
    call = re.search(r'gym\.make\("EvalStop-v0",(.*?)\)\n', doc, re.S)
    assert call, "the Arguments section shows the full gym.make call"
    node = ast.parse(f"f({call.group(1)})", mode="eval").body
    stated = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords}
    assert stated == {**_signature_defaults(), "render_mode": None}


def test_readme_table_states_the_signature_defaults() -> None:
    rows = re.findall(r"^\| `(\w+)` \| (`[^`]*`|[\w.]+) \|", README.read_text(), re.M)
    defaults = _signature_defaults()
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
