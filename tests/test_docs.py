"""The documentation stays true: docs/ARCHITECTURE.md's tree lists every module and only
modules that exist; the links of README.md and docs/*.md reach files and headings that
exist; the snippet names are unique; the user pages carry no issue numbers, round
names or commit hashes; the short snippets run."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from readme_snippets import pages, run_snippet, snippets

ROOT = Path(__file__).resolve().parents[1]
ARCHITECTURE = ROOT / "docs" / "ARCHITECTURE.md"
README_PATH = ROOT / "README.md"
PACKAGES = (
    "evalstop_gym",
    "evalstop_corpora",
    "baselines",
    "evalstop_experiments",
    "evalstop_cli",
    "evalstop_integrations",
)


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


LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = heading.strip().lower().replace("`", "")
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    return {_slug(h) for h in re.findall(r"^#+ (.+)$", text, re.M)}


def _links() -> list[tuple[Path, str]]:
    found = []
    for page in pages():
        text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
        found += [(page, target) for target in LINK.findall(text)]
    return found


def test_every_link_reaches_a_file_and_heading_that_exist() -> None:
    broken = []
    for page, target in _links():
        if re.match(r"[a-z]+:", target):
            continue  # a web address
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{page.name}: {target} (no such file)")
        elif anchor and file.suffix == ".md" and anchor not in _anchors(file):
            broken.append(f"{page.name}: {target} (no such heading)")
    assert broken == []


def test_the_readme_links_every_page_of_docs() -> None:
    linked = {(ROOT / t.partition("#")[0]).resolve() for p, t in _links() if p.name == "README.md"}
    pages_of_docs = set((ROOT / "docs").glob("*.md"))
    assert sorted(p.name for p in pages_of_docs if p.resolve() not in linked) == []


def test_snippet_names_are_unique() -> None:
    names = [name for _, name, _ in snippets()]
    assert sorted({n for n in names if names.count(n) > 1}) == []


def test_user_pages_carry_no_history() -> None:
    """No issue numbers, round names, commit hashes or remarks on the machine's load."""
    allowed_hash = {"ARCHITECTURE.md"}  # the fixtures name the code they were written by
    found = []
    for page in pages():
        text = page.read_text(encoding="utf-8")
        for pattern in (
            r"\bissues? #?\d+",
            r"#\d+\b",
            r"\b(this|the previous|the last|that) round\b",
            r"\bload average\b",
        ):
            found += [f"{page.name}: {m}" for m in re.findall(pattern, text, re.I)]
        if page.name not in allowed_hash:
            # a 7-40 digit hex word with a digit and a letter, outside SHA-256 records
            words = re.findall(r"\b[0-9a-f]{7,40}\b", text)
            found += [
                f"{page.name}: {w}" for w in words if re.search(r"\d", w) and re.search("[a-f]", w)
            ]
    assert found == []


@pytest.mark.parametrize("name", ["env", "simulator", "pools", "stoppers", "cluster"])
def test_the_short_snippets_run(name: str) -> None:
    run_snippet(name)


def test_the_readme_command_lines_parse() -> None:
    """Every `evalstop-gym ...` line of the README's shell blocks is accepted by the CLI's parser."""
    import shlex

    from evalstop_cli.main import build_parser

    parser = build_parser()
    text = README_PATH.read_text(encoding="utf-8")
    blocks = re.findall(r"```bash\n(.*?)```", text, re.S)
    lines = [
        line.split("#")[0].strip()
        for block in blocks
        for line in block.replace("\\\n", " ").splitlines()
        if line.strip().startswith("evalstop-gym ")
    ]
    assert len(lines) >= 5
    for line in lines:
        parser.parse_args(shlex.split(line)[1:])
