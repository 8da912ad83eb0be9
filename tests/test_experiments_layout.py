"""The harness's layout: no import circle, a report that imports no experiment, one pool."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "evalstop_experiments"


def _module(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """Every module of the package ``path`` imports, at the top or inside a function."""
    me = _module(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            mod = f"{base}.{node.module}" if node.level and node.module else node.module or base
            found.add(mod)
            found.update(f"{mod}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    modules = {_module(p) for p in PACKAGE.rglob("*.py")}
    return {m for m in found if m in modules and m != me}


def test_no_import_circle_in_the_harness() -> None:
    graph = {_module(p): _imports(p) for p in PACKAGE.rglob("*.py")}
    # the package __init__ is where everyone's imports pass: leave it out of the edges
    graph = {m: {d for d in deps if d != "evalstop_experiments"} for m, deps in graph.items()}
    state: dict[str, int] = {}

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for d in graph.get(m, ()):
            if state.get(d) == 1:
                raise AssertionError("import circle: " + " -> ".join([*path, m, d]))
            if d not in state:
                visit(d, [*path, m])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [])


def test_the_report_and_the_query_layer_import_no_experiment() -> None:
    for name in ("report.py", "summary.py", "plots.py", "plan.py", "scoring.py", "reproduce.py"):
        deps = _imports(PACKAGE / name)
        leaked = {
            d
            for d in deps
            if d.startswith("evalstop_experiments.experiments.") and name != "reproduce.py"
        }
        assert not leaked, (name, leaked)


def test_only_the_parallel_helper_builds_a_pool() -> None:
    pool = re.compile(r"ProcessPoolExecutor|multiprocessing\.Pool|import multiprocessing")
    for folder in ("evalstop_experiments", "evalstop_cli", "baselines", "benchmarks"):
        for path in (ROOT / folder).rglob("*.py"):
            assert not pool.search(path.read_text(encoding="utf-8")), path


def test_every_experiment_module_exports_its_experiment_and_is_listed() -> None:
    from evalstop_experiments.experiments import EXPERIMENTS, REPORT_ORDER, TITLES

    modules = {p.stem for p in (PACKAGE / "experiments").glob("*.py") if p.stem != "__init__"}
    listed = {e.build.__module__.rpartition(".")[2] for e in EXPERIMENTS}
    assert listed == modules
    assert len({e.id for e in EXPERIMENTS}) == len(EXPERIMENTS)
    assert [e.number for e in REPORT_ORDER] == sorted(e.number for e in EXPERIMENTS)
    assert list(TITLES) == [f"E{i}" for i in range(1, 12)]
