"""The simulator's layout: no import circle, no private name across modules, one engine.

Read from the sources (imports inside functions and under ``TYPE_CHECKING``
included): a lazy or type-only import that goes back round is still a circle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import evalstop_gym
from evalstop_gym import SimConfig, Simulator, make_simulator
from evalstop_gym.sim.pooled import PooledSimulator

SIM = Path(evalstop_gym.__file__).resolve().parent / "sim"


def _imports(path: Path) -> list[tuple[str, str]]:
    """(sibling module, imported name) of every ``from .x import y`` in ``path`` ("" for ``from .``)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            found.extend(((node.module or "").split(".")[0], a.name) for a in node.names)
    return found


GRAPH = {
    p.stem: {m for m, _ in _imports(p) if (SIM / f"{m}.py").is_file()}
    for p in SIM.glob("*.py")
    if p.name != "__init__.py"
}


def test_no_import_circle_in_the_simulator() -> None:
    state: dict[str, int] = {}

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for d in sorted(GRAPH[m]):
            if state.get(d) == 1:
                raise AssertionError("import circle: " + " -> ".join([*path, m, d]))
            if d not in state:
                visit(d, [*path, m])
        state[m] = 2

    for m in sorted(GRAPH):
        if m not in state:
            visit(m, [])


def test_no_module_imports_another_ones_private_name() -> None:
    private = [
        f"{p.name}: {m}.{name}"
        for p in SIM.glob("*.py")
        for m, name in _imports(p)
        if name.startswith("_")
    ]
    assert private == []


def test_the_engine_imports_neither_its_subclass_nor_the_package() -> None:
    assert "pooled" not in GRAPH["engine"]
    assert all(m for m, _ in _imports(SIM / "engine.py"))  # no "from . import ..."
    # Simulator(config) with pools still builds the pooled engine, as make_simulator does.
    cfg = SimConfig(n_jobs=5, pools={"gpu": 64})
    assert type(Simulator(cfg, 0)) is type(make_simulator(cfg, 0)) is PooledSimulator
