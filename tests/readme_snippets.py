"""The documentation's code snippets, so that tests run exactly what users copy.

A snippet is the fenced code block right after a ``<!-- snippet: NAME -->``
line in README.md or a page of docs/.  Each name occurs once in all of them
(``tests/test_docs.py`` checks it).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MARKER = re.compile(r"<!-- snippet: ([\w-]+) -->\n```\w*\n(.*?)\n```", re.DOTALL)


def pages() -> list[Path]:
    """The files snippets are read from: README.md, then docs/*.md in name order."""
    return [README, *sorted((ROOT / "docs").glob("*.md"))]


def snippets() -> list[tuple[Path, str, str]]:
    """Every snippet as (file, name, code without its fences), in page order."""
    found = []
    for page in pages():
        for match in MARKER.finditer(page.read_text(encoding="utf-8")):
            found.append((page, match.group(1), match.group(2) + "\n"))
    return found


def _find(name: str) -> tuple[Path, str]:
    for page, found, code in snippets():
        if found == name:
            return page, code
    where = ", ".join(p.relative_to(ROOT).as_posix() for p in pages())
    raise LookupError(f"no code block after '<!-- snippet: {name} -->' in {where}")


def snippet(name: str) -> str:
    """The code of the snippet ``name`` (without its fences)."""
    return _find(name)[1]


def run_snippet(name: str) -> dict:
    """Execute the Python snippet ``name`` and return its global namespace."""
    page, code = _find(name)
    namespace: dict = {"__name__": f"readme_snippet_{name}"}
    exec(compile(code, f"{page}:{name}", "exec"), namespace)
    return namespace
