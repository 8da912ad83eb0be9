"""docs/ARCHITECTURE.md's tree lists every module of the packages, and only modules that exist."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ARCHITECTURE = ROOT / "docs" / "ARCHITECTURE.md"
PACKAGES = ("evalstop_gym", "evalstop_corpora", "baselines", "evalstop_experiments", "evalstop_cli")


def _tree() -> set[str]:
    """The module paths the tree block names (folders by indentation, two spaces a level)."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    block = next(b for b in re.findall(r"```\n(.*?)```", text, re.S) if "evalstop_gym/ " in b)
    listed, folders = set(), []
    for line in block.splitlines():
        name = line.strip().split(" ")[0]
        depth = (len(line) - len(line.lstrip())) // 2
        folders = folders[:depth]
        if name.endswith("/"):
            folders.append(name.rstrip("/"))
        elif name.endswith(".py"):
            listed.add("/".join([*folders, name]))
    return listed


def _modules() -> set[str]:
    return {
        p.relative_to(ROOT).as_posix()
        for pkg in PACKAGES
        for p in (ROOT / pkg).rglob("*.py")
        if p.name != "__init__.py"
    }


def test_the_tree_lists_every_module() -> None:
    assert sorted(_modules() - _tree()) == []


def test_the_tree_lists_no_module_that_is_gone() -> None:
    assert sorted(_tree() - _modules()) == []


def test_the_paths_the_page_names_exist() -> None:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    named = set(re.findall(r"`((?:tests|docs|evalstop_\w+|baselines)/[\w/.]*?)`", text))
    assert named, "the page names no path"
    assert sorted(p for p in named if not (ROOT / p).exists()) == []
