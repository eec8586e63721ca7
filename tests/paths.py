"""Where the tests find the repository's files, whatever folder a test lives in."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TESTS = REPO / "tests"
FIXTURES = TESTS / "fixtures"
DOCS = REPO / "docs"
