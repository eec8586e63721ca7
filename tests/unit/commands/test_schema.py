"""`verifier schema`: eval.yaml's JSON Schema agrees with the loader.

The schema is generated from the loader's own declarations; these tests hold the two
to the same files: the examples in this repo and in its docs, agent-eval-harness's
example evals (tests/fixtures/agent-eval-harness), and a table of small documents,
each of which the loader and the schema must both accept or both refuse. What only
loading can tell, and the few places where the schema is stricter than the loader,
are listed too, so that a change in either shows up here.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from tests.paths import REPO
from verifier.config.fields import RELATIVE_PATH_PATTERN, Locator
from verifier.config.load import SUITE_LEVEL_KEYS, VERIFIER_KEYS, OutputEntry, eval_schema
from verifier.config.reward_block import ALL_KEYS, COMMON_KEYS, MODE_KEY_SCHEMAS
from verifier.errors import ConfigError
from verifier.grading import check_eval
from verifier.judges import KINDS

VERIFIER = str(Path(sys.executable).with_name("verifier"))
HARNESS = REPO / "tests" / "fixtures" / "agent-eval-harness"
EVAL_FILES = [
    REPO / "examples" / "eval.yaml",
    REPO / "deploy" / "kubernetes" / "common" / "eval.yaml",
    *sorted(HARNESS.glob("*.yaml")),
    REPO / "tests" / "fixtures" / "anova-example" / "eval.yaml",
]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SCHEMA = eval_schema(KINDS)
VALIDATOR = jsonschema.Draft7Validator(SCHEMA)


def schema_accepts(document: Any) -> bool:
    return VALIDATOR.is_valid(document)


def loader_problems(tmp_path: Path, text: str, files: dict[str, str] | None = None) -> list[str]:
    directory = tmp_path / "config"
    directory.mkdir()
    for name, content in (files or {}).items():
        (directory / name).write_text(content)
    path = directory / "eval.yaml"
    path.write_text(textwrap.dedent(text))
    return [problem.message for problem in check_eval(path).problems]


def test_the_schema_is_a_valid_draft_07_schema() -> None:
    jsonschema.Draft7Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "http://json-schema.org/draft-07/schema#"


def test_verifier_schema_prints_it() -> None:
    completed = subprocess.run([VERIFIER, "schema"], capture_output=True, text=True, timeout=60)
    assert completed.returncode == 0, completed.stderr
    assert json.loads(completed.stdout) == SCHEMA


def test_it_describes_every_top_level_key_and_reward_key_the_loader_knows() -> None:
    assert set(SCHEMA["properties"]) == VERIFIER_KEYS | SUITE_LEVEL_KEYS
    assert set(MODE_KEY_SCHEMAS) | {key.name for key in COMMON_KEYS} == ALL_KEYS


@pytest.mark.parametrize("path", EVAL_FILES, ids=lambda path: str(path.relative_to(REPO)))
def test_the_example_evals_are_valid_for_both(path: Path, tmp_path: Path) -> None:
    document = yaml.safe_load(path.read_text())
    assert list(VALIDATOR.iter_errors(document)) == []
    dataset = (document.get("dataset") or {}).get("path")
    if dataset and not (path.parent / dataset).is_dir():  # a copy without its cases
        (tmp_path / dataset).mkdir(parents=True)
        path = Path(shutil.copy(path, tmp_path / "eval.yaml"))
    assert check_eval(path).problems == ()


def yaml_blocks(path: Path) -> list[str]:
    return re.findall(r"```yaml\n(.*?)```", path.read_text(), flags=re.DOTALL)


def test_the_eval_yaml_examples_in_the_docs_are_valid() -> None:
    """Every ```yaml block of README.md and docs/*.md that is an eval.yaml (has a
    top-level `judges`); the files they reference do not exist here, so the schema only."""
    examples = [
        document
        for path in DOCS
        for block in yaml_blocks(path)
        if isinstance(document := yaml.safe_load(block), dict) and "judges" in document
    ]
    assert len(examples) >= 3
    for document in examples:
        assert list(VALIDATOR.iter_errors(document)) == [], document


def test_the_reference_shows_the_editor_line() -> None:
    assert "# yaml-language-server: $schema=" in (REPO / "docs" / "eval-yaml.md").read_text()


JUDGE = "judges:\n  - {name: a, check: 'return True'}\n"
MODULE = {"judges_x.py": "def score(outputs):\n    return 1\n"}

# (eval.yaml, files beside it, whether it is valid): the loader and the schema agree.
AGREED = [
    (JUDGE, None, True),
    (
        "judges:\n  - {name: a, check: 'return True', timeout: null, if: null, arguments: null}\n",
        None,
        True,
    ),
    ("judges:\n  - {name: a, check: 'return True', feedback_type: bool}\n", None, True),
    (
        "judges:\n  - {name: a, check: 'return 1', feedback_type: bool, score_range: null}\n",
        None,
        True,
    ),
    (
        "judges:\n  - {name: a, check: 'return 1', feedback_type: int, score_range: [1, 5.0]}\n",
        None,
        True,
    ),
    (
        "judges:\n  - {name: a, check: 'return 1', feedback_type: '', score_range: [0, 0.5]}\n",
        None,
        True,
    ),
    ("judges:\n  - {name: a, builtin: files/file_exists, arguments: {path: x}}\n", None, True),
    ("judges:\n  - {name: a, builtin: file_exists, check: 5, arguments: {path: x}}\n", None, True),
    (
        "judges:\n  - {name: a, builtin: file_contains, arguments: {path: x, text: y, ignore_case: true}}\n",
        None,
        True,
    ),
    (
        "judges:\n  - {name: a, builtin: command_succeeds, arguments: {command: [make, test], timeout: 5}}\n",
        None,
        True,
    ),
    (
        "judges:\n  - {name: a, builtin: json_path_equals, arguments: {path: x, key: a.0, expected: null}}\n",
        None,
        True,
    ),
    ("judges:\n  - {name: a, module: judges_x, function: score, samples: zero}\n", MODULE, True),
    (
        "judges:\n  - {name: a, prompt: 'ok?', llm_rubric: null, model: m, samples: 3, provider: vllm}\n",
        None,
        True,
    ),
    (
        "judges:\n  - {name: pairwise, anything: [1]}\n  - {name: a, check: 'return 1'}\n",
        None,
        True,
    ),
    (
        JUDGE
        + "outputs: [report.md, {path: ./out/, schema: 'not read'}, {path: ...}, {path: a/./b}]\n",
        None,
        True,
    ),
    (JUDGE + "outputs: null\nreward: null\nannotations: null\nname: null\n", None, True),
    (
        JUDGE + "annotations: {expected: 4}\nmodels: {judge: m}\nmatrix: {x: 1}\n"
        "dataset: {schema: x}\n",
        None,
        True,
    ),
    (JUDGE + "dataset: d\n", None, False),
    (JUDGE + "reward: {judge: a, normalize: true, gate: true, score_range: [0, 10]}\n", None, True),
    (JUDGE + "reward: {weights: {a: 0, b: 2}}\n", None, True),
    (
        JUDGE + "reward: {formula: ' weighted ', weights: {a: 1}, raw: [a], gate: null}\n",
        None,
        True,
    ),
    (JUDGE + "reward: {formula: 'min(a, 1)', weights: {a: 0}}\n", None, True),
    ("name: x\n", None, False),
    ("judges: []\n", None, False),
    ("judges: {a: 1}\n", None, False),
    ("judges:\n  - {name: pairwise, check: 'return 1'}\n", None, False),
    ("judges:\n  - 'a'\n", None, False),
    ("judges:\n  - {name: a, chekc: 'return 1'}\n", None, False),
    ("judges:\n  - {check: 'return 1'}\n", None, False),
    ("judges:\n  - {name: 1a, check: 'return 1'}\n", None, False),
    ("judges:\n  - {name: reward, check: 'return 1'}\n", None, False),
    ("judges:\n  - {name: mean, check: 'return 1'}\n", None, False),
    ("judges:\n  - {name: lambda, check: 'return 1'}\n", None, False),
    ("judges:\n  - {name: a, description: x}\n", None, False),
    ("judges:\n  - {name: a, agent: {x: 1}}\n", None, False),
    ("judges:\n  - {name: a, module: judges_x}\n", MODULE, False),
    ("judges:\n  - {name: a, function: score, module: null}\n", MODULE, False),
    ("judges:\n  - {name: a, llm_rubric: 'ok?', prompt: 'ok?', model: m}\n", None, False),
    ("judges:\n  - {name: a, llm_rubric: null, model: m}\n", None, False),
    ("judges:\n  - {name: a, prompt: '', model: m}\n", None, False),
    ("judges:\n  - {name: a, prompt: 'ok?', model: m, samples: 0}\n", None, False),
    ("judges:\n  - {name: a, prompt: 'ok?', model: m, samples: 2.5}\n", None, False),
    ("judges:\n  - {name: a, prompt: 'ok?', model: m, provider: azure}\n", None, False),
    ("judges:\n  - {name: a, prompt: 'ok?', model: m, context: ../x.md}\n", None, False),
    ("judges:\n  - {name: a, builtin: cost_budget, arguments: {max_cost_usd: 5.0}}\n", None, True),
    ("judges:\n  - {name: a, builtin: cost_budget, arguments: {max_cost_usd: -1}}\n", None, False),
    ("judges:\n  - {name: a, builtin: files_equal, arguments: {path1: x, path2: y}}\n", None, True),
    ("judges:\n  - {name: a, builtin: files_equal, arguments: {path1: x}}\n", None, False),
    (
        "judges:\n  - {name: a, builtin: command_succeeds, arguments: {cmd: x, command: y}}\n",
        None,
        False,
    ),
    (
        "judges:\n  - {name: a, builtin: quality/output_completeness, model: m,\n"
        "     arguments: {strictness: high}}\n",
        None,
        True,
    ),
    (
        "judges:\n  - {name: a, builtin: output_completeness, model: m,\n"
        "     arguments: {strictness: extreme}}\n",
        None,
        False,
    ),
    (
        "outputs: [{tool: Bash}, {path: x}]\njudges:\n  - {name: a, builtin: tool_call_validation}\n",
        None,
        True,
    ),
    ("judges:\n  - {name: a, builtin: null}\n", None, False),
    ("judges:\n  - {name: a, builtin: file_exists}\n", None, False),
    ("judges:\n  - {name: a, builtin: file_exists, arguments: {path: x, pth: y}}\n", None, False),
    (
        "judges:\n  - {name: a, builtin: file_contains, arguments: {path: x, text: 3}}\n",
        None,
        False,
    ),
    ("judges:\n  - {name: a, builtin: command_succeeds, arguments: {command: []}}\n", None, False),
    ("judges:\n  - {name: a, check: null}\n", None, False),
    ("judges:\n  - {name: a, check: 'x = 1'}\n", None, False),
    (
        "judges:\n  - {name: a, check: 'return 1', feedback_type: bool, score_range: [0, 1]}\n",
        None,
        False,
    ),
    (
        "judges:\n  - {name: a, check: 'return 1', feedback_type: int, score_range: [0, 1.5]}\n",
        None,
        False,
    ),
    ("judges:\n  - {name: a, check: 'return 1', feedback_type: str}\n", None, False),
    ("judges:\n  - {name: a, check: 'return 1', score_range: [1]}\n", None, False),
    ("judges:\n  - {name: a, check: 'return 1', timeout: 0}\n", None, False),
    ("judges:\n  - {name: a, check: 'return 1', timeout: 100000}\n", None, False),
    ("judges:\n  - {name: a, check: 'return 1', arguments: [1]}\n", None, False),
    ("judges:\n  - {name: a, check: 'return 1', arguments: {1x: 2}}\n", None, False),
    (JUDGE + "name: 5\n", None, False),
    (JUDGE + "outputs: report.md\n", None, False),
    *(
        (JUDGE + f"outputs: [{path!r}]\n", None, False)
        for path in ("../x", "a/..", "/abs", ".", "./", ".//.", " ")
    ),
    (JUDGE + "outputs: [{schema: x}]\n", None, False),
    (JUDGE + "annotations: [1, 2]\n", None, False),
    (JUDGE + "reward: 3\n", None, False),
    (JUDGE + "reward: {}\n", None, False),
    (JUDGE + "reward: {gate: false}\n", None, False),
    (JUDGE + "reward: {weightz: {a: 1}}\n", None, False),
    (JUDGE + "reward: {weights: {a: 0}}\n", None, False),
    (JUDGE + "reward: {weights: {a: -1}}\n", None, False),
    (JUDGE + "reward: {weights: {a: high}}\n", None, False),
    (JUDGE + "reward: {weights: null}\n", None, False),
    (JUDGE + "reward: {judge: a, formula: a}\n", None, False),
    (JUDGE + "reward: {judge: a, raw: null}\n", None, False),
    (JUDGE + "reward: {judge: null}\n", None, False),
    (JUDGE + "reward: {judge: a, normalize: null}\n", None, False),
    (JUDGE + "reward: {formula: null}\n", None, False),
    (JUDGE + "reward: {formula: '  '}\n", None, False),
    (JUDGE + "reward: {formula: a, raw: a}\n", None, False),
]


@pytest.mark.parametrize(("text", "files", "valid"), AGREED)
def test_the_loader_and_the_schema_agree(
    tmp_path: Path, text: str, files: dict[str, str] | None, valid: bool
) -> None:
    problems = loader_problems(tmp_path, text, files)
    assert (problems == []) is valid, problems
    assert schema_accepts(yaml.safe_load(text)) is valid


# Valid for the schema, refused by the loader: what only reading files, compiling code
# or comparing entries can tell.
ONLY_LOADING = [
    ("judges:\n  - {name: a, check: 'return ('}\n", "does not compile"),
    ("judges:\n  - {name: a, check: 'return 1', if: 'x =='}\n", "not a Python expression"),
    (
        "judges:\n  - {name: a, check: 'return 1'}\n  - {name: a, check: 'return 2'}\n",
        "duplicate judge name",
    ),
    ("judges:\n  - {name: a, check: 'return 1', score_range: [5, 1]}\n", "increasing"),
    ("judges:\n  - {name: a, module: nowhere, function: f}\n", "cannot import"),
    ("judges:\n  - {name: a, prompt_file: missing.md, model: m}\n", "not found"),
    ("judges:\n  - {name: a, prompt: '{{ nothing_known }}', model: m}\n", "nothing_known"),
    (
        "judges:\n  - {name: a, builtin: file_matches, arguments: {path: x, pattern: '('}}\n",
        "not a valid regex",
    ),
    (JUDGE + "annotations: missing.yaml\n", "not a file beside eval.yaml"),
    (JUDGE + "reward: {judge: b}\n", "not a defined judge"),
    (JUDGE + "reward: {formula: 'a ** 2'}\n", "'**'"),
]


@pytest.mark.parametrize(("text", "problem"), ONLY_LOADING)
def test_what_only_loading_can_tell(tmp_path: Path, text: str, problem: str) -> None:
    assert schema_accepts(yaml.safe_load(text))
    problems = loader_problems(tmp_path, text)
    assert any(problem in message for message in problems), problems


# Accepted by the loader, which ignores these values (the name falls back to the dir's,
# a model that is not a string to $EVAL_JUDGE_MODEL); refused by the schema.
SCHEMA_STRICTER = [JUDGE + "name: 0\n", JUDGE + "models: {judge: 5}\n"]


@pytest.mark.parametrize("text", SCHEMA_STRICTER)
def test_where_the_schema_is_stricter_than_the_loader(tmp_path: Path, text: str) -> None:
    assert loader_problems(tmp_path, text) == []
    assert not schema_accepts(yaml.safe_load(text))


PATHS = [
    "a",
    "a/b",
    "./a",
    "a/./b",
    "...",
    "..a",
    "a/..b/c",
    " a",
    "a b/",
    "../a",
    "a/..",
    "a//..",
    "/a",
    "//a",
    ".",
    "./",
    "./.",
    ".//",
    "",
    "  ",
    "a\0b",
]


@pytest.mark.parametrize("path", PATHS)
def test_the_path_pattern_is_the_loaders_rule(path: str) -> None:
    try:
        OutputEntry().parse(path, Locator("eval.yaml", "outputs[0].path"))
        loader_accepts = True
    except ConfigError:
        loader_accepts = False
    assert bool(re.search(RELATIVE_PATH_PATTERN, path)) is loader_accepts
