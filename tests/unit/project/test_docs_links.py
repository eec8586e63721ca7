"""Every relative link of the project's markdown pages resolves: the file or dir it
names exists, and its `#anchor` is a heading of the page it points to, spelled as
GitHub spells heading anchors."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from tests.paths import REPO

PAGES = sorted([*REPO.glob("*.md"), *(REPO / "docs").glob("*.md")])

FENCED = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.MULTILINE | re.DOTALL)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"(?<!!)\[[^\]\n]*\]\(([^)\s]+)\)")


def prose(text: str) -> str:
    """The text without its code (fenced blocks, inline spans), where no link lives."""
    return INLINE_CODE.sub("", FENCED.sub("", text))


def anchors(page: Path) -> set[str]:
    """GitHub's anchors of a page's headings: lower case, punctuation but `-` and `_`
    dropped, spaces as `-`, a repeated heading numbered from `-1`."""
    seen: Counter[str] = Counter()
    found = set()
    for heading in re.findall(r"^#{1,6} (.+?)#*$", FENCED.sub("", page.read_text()), re.MULTILINE):
        text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip())
        slug = re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")
        found.add(f"{slug}-{seen[slug]}" if seen[slug] else slug)
        seen[slug] += 1
    return found


def links(page: Path) -> list[str]:
    return [
        target
        for target in LINK.findall(prose(page.read_text()))
        if not re.match(r"[a-z]+:", target)
    ]


def test_the_pages_are_found() -> None:
    names = {page.relative_to(REPO).as_posix() for page in PAGES}
    assert {"README.md", "CHANGELOG.md", "docs/eval-yaml.md", "docs/builtins.md"} <= names


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.relative_to(REPO).as_posix())
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in links(page):
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(f"{target}: no such file")
        elif anchor and (resolved.suffix != ".md" or anchor not in anchors(resolved)):
            broken.append(f"{target}: no heading #{anchor} in {resolved.name}")
    assert broken == []


def test_the_slugs_are_githubs() -> None:
    page = REPO / "docs" / "harbor.md"
    assert "rewardjson-and-harbors-job-metrics---reward-keys" in anchors(page)
    assert "the-tasks-own-toolchain---environment" in anchors(page)
