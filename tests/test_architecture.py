"""The house's shape, read from the code: no import circle, no upward arrow, one pool builder.

Also: no module imports another module's private name; the engine does not know its
pooled subclass; the report and the query layer import no experiment, and every
experiment module is listed.

Every ``import`` of the package's modules is read from their source (also the ones inside
functions and under ``TYPE_CHECKING``: a lazy import that goes back up is still a circle),
so these hold for code a test run never reaches.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: The top-level packages from the ground floor up; a package may import only lower ones.
PACKAGES: dict[str, int] = {
    "evalstop_gym": 0,
    "baselines": 1,
    "evalstop_corpora": 1,
    "evalstop_experiments": 2,
    # The live integrations (transformers/TRL, Optuna, Ray Tune) sit beside the harness.
    "evalstop_integrations": 2,
    "evalstop_cli": 3,
}

#: Floors inside ``evalstop_gym``: a module may import only its own floor or lower ones.
GYM_FLOORS: dict[str, int] = {
    "evalstop_gym.errors": 0,
    "evalstop_gym.fileio": 0,
    "evalstop_gym.parallel": 0,
    "evalstop_gym.corpus": 1,
    "evalstop_gym.sim": 2,
    "evalstop_gym.envs": 3,
    "evalstop_gym.suite": 4,
    "evalstop_gym": 5,
}

#: Third-party packages the simulator and the envs never import (``evalstop_gym`` must
#: import with numpy and gymnasium alone; Ray is imported on demand by ``parallel`` only).
HEAVY = (
    "torch",
    "scipy",
    "matplotlib",
    "stable_baselines3",
    "sb3_contrib",
    "trl",
    "transformers",
    "tokenizers",
    "sklearn",
    "optuna",
    "pandas",
)

#: Calls that build a process or thread pool (``Pool`` only as ``multiprocessing.Pool`` or
#: ``<context>.Pool``: the simulator's GPU ``Pool`` is no process pool).
POOL_CLASSES = ("ProcessPoolExecutor", "ThreadPoolExecutor")


def _modules() -> dict[str, Path]:
    mods = {}
    for pkg in PACKAGES:
        base = ROOT / pkg
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            mods[".".join(parts)] = path
    return mods


MODULES = _modules()


def _imports(name: str, path: Path) -> list[tuple[str, int]]:
    """(imported module or package-level name, line) of every import in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            found += [(f"{mod}.{a.name}", node.lineno) for a in node.names]
            found.append((mod, node.lineno))
    return found


def _resolve(target: str) -> str | None:
    """The project module an import names (its longest known prefix), or None."""
    parts = target.split(".")
    for n in range(len(parts), 0, -1):
        cand = ".".join(parts[:n])
        if cand in MODULES:
            return cand
    return None


def _graph() -> dict[str, dict[str, int]]:
    graph: dict[str, dict[str, int]] = {}
    for name, path in MODULES.items():
        edges: dict[str, int] = {}
        for target, line in _imports(name, path):
            mod = _resolve(target)
            if mod is not None and mod != name and not name.startswith(mod + "."):
                edges.setdefault(mod, line)
        graph[name] = edges
    return graph


def _floor(mod: str) -> tuple[int, int]:
    """(the package's floor, the floor inside ``evalstop_gym``: its longest listed prefix)."""
    top = mod.split(".")[0]
    sub = 0
    if top == "evalstop_gym":
        sub = next(
            GYM_FLOORS[p]
            for p in sorted(GYM_FLOORS, key=len, reverse=True)
            if mod == p or mod.startswith(p + ".")
        )
    return PACKAGES[top], sub


def test_the_package_has_no_import_circle() -> None:
    graph = _graph()
    # Tarjan's strongly connected components, iteratively.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(graph[nxt])))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    comp.append(m)
                    if m == node:
                        break
                if len(comp) > 1:
                    circles.append(sorted(comp))
    assert not circles, "import circles: " + "; ".join(" <-> ".join(c) for c in circles)


def test_imports_point_down_only() -> None:
    upward = [
        f"{mod} imports {dep} (line {line})"
        for mod, edges in _graph().items()
        for dep, line in edges.items()
        if _floor(dep) > _floor(mod)
        or (_floor(dep)[0] == _floor(mod)[0] and dep.split(".")[0] != mod.split(".")[0])
    ]
    assert not upward, "\n".join(upward)


@pytest.mark.parametrize("name", sorted(m for m in MODULES if m.startswith("evalstop_gym")))
def test_the_env_package_imports_no_heavy_library(name: str) -> None:
    heavy = sorted({t.split(".")[0] for t, _ in _imports(name, MODULES[name])} & set(HEAVY))
    assert not heavy, f"{name} imports {heavy}"


def test_only_parallel_builds_a_pool() -> None:
    builders = []
    scripts = {
        p.relative_to(ROOT).as_posix(): p for p in sorted((ROOT / "benchmarks").rglob("*.py"))
    }
    for name, path in {**MODULES, **scripts}.items():
        if name == "evalstop_gym.parallel":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                f = node.func
                called = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
                if called in POOL_CLASSES or (called == "Pool" and isinstance(f, ast.Attribute)):
                    builders.append(f"{name}:{node.lineno} {called}(...)")
    assert not builders, "pools built outside evalstop_gym.parallel: " + ", ".join(builders)


def test_no_module_imports_another_ones_private_name() -> None:
    private = [
        f"{name}:{line} imports {target}"
        for name, path in MODULES.items()
        for target, line in _imports(name, path)
        if target.rpartition(".")[2].startswith("_")
        and not target.rpartition(".")[2].startswith("__")
        and _resolve(target) not in (None, name, target)  # a private module is imported by name
    ]
    assert not private, "\n".join(private)


def test_the_engine_does_not_know_its_pooled_subclass() -> None:
    assert "evalstop_gym.sim.pooled" not in _graph()["evalstop_gym.sim.engine"]
    from evalstop_gym import SimConfig, Simulator, make_simulator
    from evalstop_gym.sim.pooled import PooledSimulator

    # Simulator(config) with pools still builds the pooled engine, as make_simulator does.
    cfg = SimConfig(n_jobs=5, pools={"gpu": 64})
    assert type(Simulator(cfg, 0)) is type(make_simulator(cfg, 0)) is PooledSimulator


def test_the_report_and_the_query_layer_import_no_experiment() -> None:
    graph = _graph()
    layer = ("report", "summary", "plots", "plan", "scoring", "cells", "runner")
    names = [f"evalstop_experiments.{name}" for name in layer]
    # A package's parts too (scoring is one): each of its modules is of the layer.
    parts = [m for m in graph if any(m.startswith(n + ".") for n in names)]
    assert "evalstop_experiments.scoring.task" in parts
    for name in names + parts:
        leaked = [d for d in graph[name] if d.startswith("evalstop_experiments.experiments")]
        assert not leaked, (name, leaked)


def test_every_experiment_module_exports_its_experiment_and_is_listed() -> None:
    # The harness's statistics need SciPy (the cli extra); a core install has none.
    pytest.importorskip("scipy")
    from evalstop_experiments.experiments import EXPERIMENTS, REPORT_ORDER, TITLES

    folder = ROOT / "evalstop_experiments" / "experiments"
    modules = {p.stem for p in folder.glob("*.py") if p.stem != "__init__"}
    listed = {e.build.__module__.rpartition(".")[2] for e in EXPERIMENTS}
    assert listed == modules
    assert len({e.id for e in EXPERIMENTS}) == len(EXPERIMENTS)
    assert [e.number for e in REPORT_ORDER] == sorted(e.number for e in EXPERIMENTS)
    assert list(TITLES) == [f"E{i}" for i in range(1, 15)]
