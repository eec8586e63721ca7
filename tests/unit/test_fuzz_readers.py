"""Every reader of the case is total: property-based over the shapes a hostile agent leaves.

The case reader (a tree of any names and contents, its input.yaml and stdout.log), the
trajectory reader (Harbor's agent logs and the case's own trail), the report parsers,
the YAML reader, the LLM prompt builder (the conversation, the material, the fences)
and the signal names each turn any input into a value, or the reader's own documented
fact, in bounded time: never an exception. The strategies are in fuzzing.py.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import time
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.fuzzing import (
    ATIF,
    CONTENTS,
    DOCUMENTS,
    EVENT,
    FUZZ,
    HOSTILE_TEXT,
    JSON_VALUES,
    YAML_TEXT,
    lines,
    to_bytes,
)
from verifier.case import check_case_dir, read_case
from verifier.console import signal_name
from verifier.judges.builtins import all_builtins
from verifier.judges.builtins.reports import ReportError, parse_report
from verifier.judges.llm.answer_scale import AnswerScale
from verifier.judges.llm.conversation import conversation_of
from verifier.judges.llm.prompt import PromptPlan, Reference
from verifier.judges.llm.template import compile_template
from verifier.trajectory import FROM_AGENT_LOGS, FROM_CASE, read_trail
from verifier.values import json_text
from verifier.yaml_io import parse_untrusted_yaml

TIME_BOUND_S = 10.0
NAMES = st.one_of(
    st.sampled_from(
        [
            "input.yaml",
            "stdout.log",
            "trajectory.json",
            "events.json",
            "events.jsonl",
            "agent",
            "logs",
            "a b",
            "-rf",
            "..x",
            "ünï",
            "\u202e.md",
        ]
    ),
    st.text(
        alphabet=st.characters(blacklist_characters="/\0", blacklist_categories=["Cs"]),
        min_size=1,
        max_size=12,
    ).filter(lambda name: name not in (".", "..")),
)
TRAILS = st.one_of(
    ATIF.map(json.dumps),
    st.lists(EVENT, max_size=5).map(json.dumps),
    st.lists(st.one_of(EVENT, st.sampled_from(HOSTILE_TEXT)), max_size=5).map(lines),
).map(to_bytes)
TREES = st.dictionaries(st.lists(NAMES, min_size=1, max_size=3).map("/".join), CONTENTS, max_size=6)


# Odd entries the agent can leave beside its files: (name, kind, symlink target).
SPECIALS = st.lists(
    st.tuples(
        NAMES,
        st.sampled_from(["symlink", "fifo", "dir", "unreadable"]),
        st.sampled_from(
            [
                "/etc/passwd",
                "..",
                ".",
                "loop",
                "missing",
                "trajectory.json",
                "input.yaml",
                "/dev/zero",
                "/proc/self/environ",
            ]
        ),
    ),
    max_size=4,
)


def write_specials(root: Path, specials: list[tuple[str, str, str]]) -> None:
    for name, kind, target in specials:
        path = root / name
        if os.path.lexists(path):
            continue
        if kind == "symlink":
            path.symlink_to(name if target == "loop" else target)
        elif kind == "fifo":
            os.mkfifo(path)
        elif kind == "dir":
            path.mkdir()
        else:
            path.write_text("secret")
            path.chmod(0)


@contextmanager
def bounded() -> Iterator[None]:
    started = time.monotonic()
    yield
    assert time.monotonic() - started < TIME_BOUND_S


def write_tree(root: Path, tree: dict[str, bytes]) -> None:
    """Each file of tree under root; a path whose parent is a file is left out."""
    for relative, data in tree.items():
        path = root / relative
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        except (FileExistsError, NotADirectoryError, IsADirectoryError):
            continue


@pytest.mark.slow
@settings(FUZZ, max_examples=60)
@given(
    tree=TREES,
    specials=SPECIALS,
    logs_trail=st.one_of(st.none(), TRAILS, CONTENTS),
    choice=st.sampled_from([FROM_AGENT_LOGS, FROM_CASE, "trajectory.json", "x/y.json"]),
)
def test_the_case_reader_reads_any_tree(
    tree: dict[str, bytes],
    specials: list[tuple[str, str, str]],
    logs_trail: bytes | None,
    choice: str,
) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        case, logs = Path(scratch) / "case", Path(scratch) / "logs"
        case.mkdir()
        logs.mkdir()
        write_tree(case, tree)
        write_specials(case, specials)
        if logs_trail is not None:
            (logs / "trajectory.json").write_bytes(logs_trail)
        with bounded():
            reading = read_case(
                check_case_dir(case), (), {}, agent_logs=logs, trajectory_from=choice
            )
        record = reading.record
        assert all(isinstance(warning, str) for warning in reading.warnings)
        assert (record["trajectory"] is None) == (record["trajectory_problem"] is not None)
        if choice == FROM_AGENT_LOGS and record["trajectory"] is not None:
            assert record["trajectory"]["source"] == f"{logs}/trajectory.json"
        for key in ("cost_usd",):
            assert record[key] is None or (isinstance(record[key], float) and record[key] >= 0)
        json_text(record)  # every value of the record can be shown


@pytest.mark.slow
@settings(FUZZ, max_examples=150)
@given(trail=st.one_of(TRAILS, DOCUMENTS))
def test_a_trajectory_of_any_shape_reads_or_is_a_fact(trail: bytes) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        logs = Path(scratch)
        (logs / "trajectory.json").write_bytes(trail)
        (logs / "events.jsonl").write_bytes(trail)
        with bounded():
            for found in (read_trail(logs, logs), read_trail(logs, None, "events.jsonl")):
                if found.trajectory is None:
                    assert isinstance(found.problem, str)
                    continue
                shown = found.trajectory.to_json()
                assert (shown["cost_usd"] is None) == isinstance(shown["cost_problem"], str)
                for count in ("input_tokens", "output_tokens"):
                    assert shown[count] is None or (type(shown[count]) is int and shown[count] >= 0)
                json.dumps(shown, default=str)
                assert isinstance(conversation_of({"trajectory": shown}), str)


@settings(FUZZ, max_examples=150)
@given(
    data=st.one_of(DOCUMENTS, CONTENTS),
    format=st.sampled_from([None, "junit", "pytest-json", "go-json"]),
)
def test_a_report_of_any_bytes_is_counts_or_a_report_error(data: bytes, format: str | None) -> None:
    with bounded():
        try:
            report = parse_report(data, format)
        except ReportError as error:
            assert str(error)
            return
    assert all(count >= 0 for count in attrs.astuple(report.counts))


@settings(FUZZ, max_examples=150)
@given(data=st.one_of(YAML_TEXT.map(to_bytes), DOCUMENTS, CONTENTS))
def test_yaml_of_any_bytes_is_a_document_or_a_problem(data: bytes) -> None:
    with bounded():
        document, problem = parse_untrusted_yaml(data, 4 * 1024 * 1024)
    assert problem is None or (document is None and isinstance(problem, str))
    json_text(document)


@given(number=st.integers())
def test_any_signal_number_has_a_name(number: int) -> None:
    name = signal_name(number)
    assert name.startswith("SIG") or name == f"signal {number}"


# --- the prompt: any record builds one, and its fences hold -----------------------------

TEMPLATES = (
    "Grade it.",  # the material is appended
    "Conversation: {{ conversation }}\nStdout: {{ stdout }}\nInputs: {{ inputs }}",
    "{% for path, text in outputs.files.items() %}{{ path }}: {{ text }}\n{% endfor %}",
    "{{ outputs.trajectory }} {{ outputs.tool_calls }} {{ outputs.cost_usd }}",
    "Summary: {{ outputs.files['summary.md'] }} first call: {{ outputs.tool_calls[0].name }}",
    # The LLM builtins' shipped prompts (quality/output_completeness, safety/...).
    *(found.prompt for found in all_builtins() if found.prompt is not None),
)
BUILTIN_ARGUMENTS = {"strictness": "high", "criteria": ["tests pass"], "categories": ["pii"]}


def plan(template: str, budget: int, window: int | None) -> PromptPlan:
    compiled = compile_template(template)
    return PromptPlan(
        template=compiled,
        append_material=not compiled.places_case,
        references=(Reference("ref.md", "the author's reference"),),
        scale=AnswerScale("pass_fail"),
        output_mode="json",
        max_case_chars=budget,
        context_tokens=window,
        answer_tokens=1024,
    )


def read_as_a_model_might(text: str) -> str:
    """text with compatibility forms folded (fullwidth letters and brackets), invisible
    characters dropped and Cyrillic lookalikes read as Latin."""
    folded = unicodedata.normalize("NFKC", text)
    visible = "".join(c for c in folded if unicodedata.category(c) != "Cf")
    return visible.translate(
        str.maketrans("\u0430\u0435\u043e\u0440\u0441\u0456\u0455", "aeopcis")
    ).replace("\u3008", "<")


ATTRIBUTED_TAG = re.compile(
    r"<\s*/?\s*(case.?material|task.?input|reference.?material)", re.IGNORECASE
)


def fences_hold(user: str, nonce: str) -> None:
    """Every fence opened is closed, in order, and nothing inside one reads as a tag."""
    tags = re.findall(rf"</?case-material-{nonce}>", user)
    assert tags == [f"<case-material-{nonce}>", f"</case-material-{nonce}>"] * (len(tags) // 2)
    for body in re.findall(
        rf"<case-material-{nonce}>(.*?)</case-material-{nonce}>", user, re.DOTALL
    ):
        assert not ATTRIBUTED_TAG.search(read_as_a_model_might(body)), body


@settings(FUZZ, max_examples=60)
@given(
    tree=TREES,
    stdout=st.one_of(DOCUMENTS, st.sampled_from(HOSTILE_TEXT).map(to_bytes)),
    inputs=st.one_of(st.none(), YAML_TEXT.map(to_bytes)),
    trail=st.one_of(st.none(), TRAILS),
    template=st.sampled_from(TEMPLATES),
    budget=st.sampled_from([50, 2000, 100_000]),
    window=st.sampled_from([None, 4096, 32_768]),
)
def test_any_case_builds_a_prompt_whose_fences_hold(
    tree: dict[str, bytes],
    stdout: bytes,
    inputs: bytes | None,
    trail: bytes | None,
    template: str,
    budget: int,
    window: int | None,
) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        case = Path(scratch) / "case"
        case.mkdir()
        write_tree(
            case,
            {
                **tree,
                "stdout.log": stdout,
                **({"input.yaml": inputs} if inputs else {}),
                **({"trajectory.json": trail} if trail else {}),
            },
        )
        record = read_case(check_case_dir(case), (), {}, trajectory_from=FROM_CASE).record
        with bounded():
            prompt = plan(template, budget, window).build(record, BUILTIN_ARGUMENTS)
    if prompt.case_fact is not None:  # a template lookup into what the case lacks
        assert prompt.user == "" and "does not hold" in prompt.case_fact
        return
    fences_hold(prompt.user, prompt.nonce)


@settings(FUZZ, max_examples=100)
@given(value=JSON_VALUES)
def test_any_parsed_value_shows_as_json(value: Any) -> None:
    json.loads(json_text(value, indent=2))
