"""The README and the docs stay what a newcomer can use: the README fits in 10 KB (about five minutes'
reading), every relative link resolves, every page under docs/ is indexed in docs/README.md, and every
`bash`/`python` block still parses (a renamed flag or a stray edit shows here, not in a user's shell).
"""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
README_LIMIT = 10 * 1024
# Every Markdown page a reader reaches: the README, docs/, each folder's README, the research area.
PAGES = sorted(
    {
        README,
        *(REPO / "docs").glob("*.md"),
        *(REPO / "research").rglob("*.md"),
        REPO / "envs" / "README.md",
        REPO / "bench" / "README.md",
    }
)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
BLOCK = re.compile(r"^```(bash|python)\n(.*?)^```", re.S | re.M)


def relative_links(text: str) -> list[str]:
    """The targets of `[text](target)` links that are not URLs or page anchors, without their anchor."""
    targets = [m.group(1) for m in LINK.finditer(re.sub(r"```.*?```", "", text, flags=re.S))]
    return [
        t.split("#", 1)[0]
        for t in targets
        if not re.match(r"[a-z][a-z0-9+.-]*:", t) and not t.startswith("#")
    ]


def dead_links(page: Path) -> list[str]:
    return [t for t in relative_links(page.read_text()) if not (page.parent / t).exists()]


def blocks_that_do_not_parse(text: str) -> list[str]:
    """Each fenced bash block checked by `bash -n`, each python block by `ast.parse`; the ones that fail."""
    bad = []
    for lang, body in BLOCK.findall(text):
        if lang == "python":
            try:
                ast.parse(body)
            except SyntaxError as err:
                bad.append(f"python: {err}: {body[:80]!r}")
        else:
            done = subprocess.run(["bash", "-n"], input=body, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                bad.append(f"bash: {done.stderr.strip()}: {body[:80]!r}")
    return bad


def test_the_readme_fits_in_ten_kilobytes() -> None:
    size = len(README.read_bytes())
    assert size <= README_LIMIT, f"README.md is {size} bytes (limit {README_LIMIT}): move detail into docs/"


def test_the_checks_catch_what_they_are_for(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    (tmp_path / "there.md").write_text("x")
    page.write_text("[a](there.md#part) [b](gone.md) [c](https://x.org/y) [d](#anchor)\n```bash\nls\n```\n")
    assert dead_links(page) == ["gone.md"]
    assert blocks_that_do_not_parse("```bash\nif true; then echo\n```\n```python\ndef f(:\n```\n") != []
    assert len(blocks_that_do_not_parse("```bash\nif true; then echo\n```\n```python\ndef f(:\n```\n")) == 2
    assert blocks_that_do_not_parse("```bash\necho ok  # fine\n```\n```python\nx = 1\n```\n") == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(page: Path) -> None:
    assert dead_links(page) == []


def test_every_doc_is_indexed() -> None:
    """An orphan page is one no reader finds: docs/README.md links every page under docs/."""
    index = REPO / "docs" / "README.md"
    linked = {(index.parent / t).resolve() for t in relative_links(index.read_text())}
    orphans = sorted(p.name for p in (REPO / "docs").glob("*.md") if p != index and p.resolve() not in linked)
    assert orphans == []
    assert index.resolve() in {(README.parent / t).resolve() for t in relative_links(README.read_text())}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_command_block_parses(page: Path) -> None:
    assert blocks_that_do_not_parse(page.read_text()) == []
