"""The README's client snippets, so that tests run exactly what users copy.

A snippet is the fenced code block right after a ``<!-- snippet: NAME -->``
line in README.md.
"""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def snippet(name: str) -> str:
    """The code of the README snippet ``name`` (without its fences)."""
    text = README.read_text(encoding="utf-8")
    pattern = rf"<!-- snippet: {re.escape(name)} -->\n```\w*\n(.*?)\n```"
    match = re.search(pattern, text, re.DOTALL)
    if match is None:
        raise LookupError(f"{README}: no code block after '<!-- snippet: {name} -->'")
    return match.group(1) + "\n"


def run_snippet(name: str) -> dict:
    """Execute the Python snippet ``name`` and return its global namespace."""
    namespace: dict = {"__name__": f"readme_snippet_{name}"}
    exec(compile(snippet(name), f"{README}:{name}", "exec"), namespace)
    return namespace
