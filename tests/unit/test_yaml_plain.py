"""yaml_plain reads what PyYAML reads, or hands the text to PyYAML: never a different value.

Held side by side with PyYAML's safe loader (the one yaml_io falls back to) on every
YAML file in the repository, on hand-picked edge cases, and on generated documents.
"""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from verifier import yaml_io, yaml_plain

REPO = Path(__file__).resolve().parents[2]
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def pyyaml(text: str) -> Any:
    return yaml.load(text, Loader=SAFE_LOADER)


def same(left: Any, right: Any) -> bool:
    """Equal, and of the same types all the way down (True is not 1, 1.0 is not 1)."""
    if type(left) is not type(right):
        return False
    if isinstance(left, dict):
        return list(left) == list(right) and all(
            same(key, other) and same(left[key], right[other])
            for key, other in zip(left, right, strict=True)
        )
    if isinstance(left, list):
        return len(left) == len(right) and all(map(same, left, right))
    return bool(left == right)


def plain_or_none(text: str) -> tuple[bool, Any]:
    try:
        return True, yaml_plain.load(text)
    except yaml_plain.NotPlain:
        return False, None


def assert_agrees(text: str) -> bool:
    """The plain reading equals PyYAML's whenever there is one; True when there was."""
    read, value = plain_or_none(text)
    if read:
        assert same(value, pyyaml(text)), f"{text!r}: plain {value!r}, PyYAML {pyyaml(text)!r}"
    return read


def repository_yaml_files() -> list[Path]:
    return sorted(
        path
        for pattern in ("*.yaml", "*.yml")
        for path in REPO.rglob(pattern)
        if not any(part.startswith(".") for part in path.relative_to(REPO).parts)
    )


def test_every_yaml_file_in_the_repository_reads_as_pyyaml_reads_it() -> None:
    files = repository_yaml_files()
    assert len(files) > 20
    for path in files:
        assert_agrees(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    "relative",
    ["examples/eval.yaml", "deploy/kubernetes/common/eval.yaml", "tests/fixtures/two-steps/eval.yaml",
     "tests/fixtures/anova-example/eval.yaml"],
)  # fmt: skip
def test_the_bundled_evals_are_read_without_pyyaml(relative: str) -> None:
    """The fast path covers what eval.yaml files are written in, or grading gets slower."""
    assert assert_agrees((REPO / relative).read_text(encoding="utf-8"))


AGREED = [
    "a: |\n  x",
    "a: |\n  x\n",
    "a: |\n  x\n\n\nb: 1",
    "a: |-\n  x\n\n",
    "a: |\n  x\n\n   y\n",
    "a: |\n\n  x\n",
    "a: |  # comment\n  x\n",
    "a: |\n  x\n  # not a comment\n",
    "a: |\n    x\n  # a comment\nb: 1\n",
    "a: >\n  one\n  two\n\n  three\n    indented\n  four\n",
    "a: >-\n  one\n  two\n",
    "- |\n x\n",
    "a:\n  - |\n    x\n    y\n",
    "a:\n- 1\n- 2\nb: 3",
    "- a: 1\n  b: 2\n-   c: 3",
    "a: x # c",
    "a: x#c",
    'a: "x" # c',
    "a: 'it''s'",
    'a: "say \\"hi\\"\\n\\ttab\\\\"',
    "a: [1, b, 'c d', \"e\"]",
    "a: []\nb: {}\nc: { }",
    "arguments: {path: report.md, n: 3, flag: yes}",
    "key: foo bar  ",
    "a:   ",
    "a:\nb:\n  c:\n",
    "---\na: 1",
    "# only a comment\n",
    "",
    "on: 1\nNo: 2\n3: three\n",
    "a: ~\nb: null\nc: Null\nd: true\ne: FALSE\nf: off\ng: y\nh: n",
    "a: 0\nb: -7\nc: 1.5\nd: -0.0\ne: 01.5\nf: 10",
    "a: 0.1.0\nb: 20Gi\nc: 500m\nd: -c\ne: --config=/x\nf: 2026-07-30-run\ng: ../x\nh: 1e5",
    "a: /tests/eval.yaml\nb: _private\nc: café\nd: ~x\ne: <a>",
    "a:\n  b:\n    c: [x]\n  d: 2\ne: 3",
    "a: b\n\n\n# trailing comment",
]


@pytest.mark.parametrize("text", AGREED)
def test_edge_cases_read_as_pyyaml_reads_them(text: str) -> None:
    assert assert_agrees(text)


NOT_PLAIN = [
    "a: &anchor 1\nb: *anchor",
    "a: !!str 1",
    "a:\tb",
    "a: 1\r\nb: 2",
    "\ufeffa: 1",
    "a: 1\na: 2",
    "a: one\n  two",
    "- x\n  y",
    "a: |+\n  x\n\n",
    "a: |2\n   x",
    "a: 1.",
    "a: 1_000",
    "a: 0x1F",
    "a: 07",
    "a: .5",
    "a: +1",
    "a: 12:30",
    "a: 2026-01-01",
    "a: <<",
    "a: =",
    "a: {b: {c: 1}}",
    "a: [b, [c]]",
    'a: "unclosed',
    'a: "\\u00e9"',
    "a: b: c",
    "? complex\n: key",
    "a: 1\n---\nb: 2",
    "%YAML 1.1\n---\na: 1",
    "just a scalar",
    "a: 1\n b: 2",
    "a: " + "9" * 5000,
    "a:\x85b",
    "a: b\u2028c",
]


@pytest.mark.parametrize("text", NOT_PLAIN)
def test_what_the_subset_leaves_out_goes_to_pyyaml(text: str) -> None:
    assert not plain_or_none(text)[0]


def test_duplicate_keys_are_still_an_error_naming_the_line(tmp_path: Path) -> None:
    path = tmp_path / "eval.yaml"
    path.write_text("name: a\njudges: []\nname: b\n")
    with pytest.raises(yaml_io.ConfigError, match=r"line 3.*duplicate key 'name'"):
        yaml_io.read_yaml(path)


def test_a_number_too_long_for_python_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "eval.yaml"
    path.write_text("a: " + "9" * 5000 + "\n")
    with pytest.raises(yaml_io.ConfigError, match="invalid YAML"):
        yaml_io.read_yaml(path)


SCALARS = [
    "plain", "two words", "yes", "No", "on", "OFF", "true", "null", "~", "", "0", "7", "-3",
    "1.5", "-0.25", "01.5", "1.", "1_000", "0x1F", "0b11", "07", ".5", "+1", "1e5", "1.0e+3",
    "12:30", "2026-01-01", "2026-01-01 10:00:00", "0.1.0", "20Gi", "-c", "--flag=x", "<<",
    "=", "<a>", "~x", "a: b", "a #b", "a#b", "x'y", 'say "hi"', "back\\slash", "[x]", "{x}",
    "*x", "&x", "!x", "%x", "@x", "`x`", "?x", ":x", ">x", "|x", "-", "- x", "é", "a,b",
    ".inf", ".nan", "NaN", "Yes please", "/abs/path", "{{ outputs.x }}",
]  # fmt: skip
TEXTS = ["line one", "line one\nline two", "a\n\nb\n", "  indented\nnot", "x\n  more\ny",
         "trailing\n\n", "# hash\nreturn 1", "a: b\n- c"]  # fmt: skip
KEYS = ["name", "check", "a_b", "a-b", "a.b", "x/y", "on", "null", "3", "07", "k ey", "k:"]


class _Generator:
    """Random documents in many YAML styles, valid or not: a quarter or so fall outside the
    subset, and each of the rest must read as PyYAML reads it."""

    def __init__(self, seed: int) -> None:
        self.random = random.Random(seed)

    def document(self) -> str:
        lines: list[str] = []
        if self.random.random() < 0.1:
            lines.append("---")
        self.node(lines, 0, depth=0, kind=self.random.choice(["map", "map", "seq"]))
        text = "\n".join(lines)
        return text + self.random.choice(["\n", "", "\n\n", "\n# end\n"])

    def node(self, lines: list[str], indent: int, depth: int, kind: str) -> None:
        pad = " " * indent
        for _ in range(self.random.randint(1, 4)):
            if self.random.random() < 0.1:
                lines.append(pad + self.random.choice(["# comment", "", "  # deeper comment"]))
            head = (pad + self.random.choice(KEYS) + self.random.choice([":", " :"])
                    if kind == "map" else pad + "-")  # fmt: skip
            self.value(lines, head, indent, depth)

    def value(self, lines: list[str], head: str, indent: int, depth: int) -> None:
        choice = self.random.random()
        step = self.random.choice([1, 2, 4])
        if depth < 3 and choice < 0.25:
            lines.append(head + self.random.choice(["", "  # why"]))
            nested = indent + step if self.random.random() < 0.9 else indent
            self.node(lines, nested, depth + 1, self.random.choice(["map", "seq"]))
        elif depth < 3 and choice < 0.35 and head.endswith("-"):
            first: list[str] = []
            self.node(first, indent + 2, depth + 1, "map")
            lines.append(head + " " + first[0].lstrip(" "))
            lines.extend(first[1:])
        elif choice < 0.5:
            style = self.random.choice(["|", "|-", ">", ">-", "|+", "|2"])
            lines.append(f"{head} {style}")
            inner = " " * (indent + step)
            for line in self.random.choice(TEXTS).split("\n"):
                lines.append(inner + line if line else self.random.choice(["", inner]))
        elif choice < 0.6:
            items = self.random.sample(SCALARS, self.random.randint(0, 3))
            if self.random.random() < 0.5:
                lines.append(f"{head} [{', '.join(self.scalar(item) for item in items)}]")
            else:
                pairs = ", ".join(
                    f"{self.random.choice(KEYS)}: {self.scalar(item)}" for item in items
                )
                lines.append(f"{head} {{{pairs}}}")
        else:
            comment = self.random.choice(["", "", " # note", "#tight"])
            lines.append(f"{head} {self.scalar(self.random.choice(SCALARS))}{comment}")

    def scalar(self, text: str) -> str:
        style = self.random.random()
        if style < 0.6:
            return text
        if style < 0.8:
            return "'" + text.replace("'", "''") + "'"
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def test_generated_documents_read_as_pyyaml_reads_them() -> None:
    generator = _Generator(seed=20261130)
    read = 0
    for _ in range(4000):
        text = generator.document()
        read_plain, value = plain_or_none(text)
        if not read_plain:
            continue
        read += 1
        try:
            expected = pyyaml(text)
        except yaml.YAMLError as error:
            pytest.fail(f"{text!r}: plain read {value!r}, PyYAML refuses it: {error}")
        assert same(value, expected), f"{text!r}: plain {value!r}, PyYAML {expected!r}"
    assert read > 600, f"only {read} of 4000 generated documents were in the subset"


def test_a_line_of_two_million_escapes_is_read_in_one_pass() -> None:
    """A case's input.yaml is read in the grader's process: a search that went back to
    the line's start at every escape would take minutes on this line (2M escapes, one
    closing quote at the end), a single pass about a second."""
    script = (
        "from verifier import yaml_plain\n"
        "escapes = 2_000_000\n"
        "text = 'a: \"' + chr(92) * 2 * escapes + '\"\\n'\n"
        "assert yaml_plain.load(text)['a'] == chr(92) * escapes\n"
    )
    completed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                               timeout=30, cwd=REPO)  # fmt: skip
    assert completed.returncode == 0, completed.stderr
