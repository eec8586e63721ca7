"""Hostile agents against the recommended coding gate from inside the test run.

The calc task of test_test_runner (honest reward 1/3: `add` right, `sub` and `mul`
wrong), graded by the README's recommended gate unchanged (both guards, `runner:
pytest`, the test list), with a `calc.py` each attack leaves in the case
(tests/fixtures/hostile/launcher): the code under test, imported by the trusted tests,
runs in pytest's process and tries to turn its failures into passes from there. A
trace or profile function, frames, every live object, ctypes, a function's code
swapped, a native module planted, pytest's config reached and a plugin or the reports
changed through it, a record of the launcher's forged: the run counts nothing (exit 7,
reward 0). Values that compare
equal to anything, an int that does, one equal to any number, `unittest.mock.ANY`, one
that claims to be an int: the honest reward, 1/3. Each graded by `verifier grade` as
root and as an arbitrary UID, with Landlock and without it (tests/no_landlock.py, and
`--weak-sandbox`), and no process of the run is left.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.hostile import NONROOT, REPO, grade_as, remove_world_dir, run_grader
from tests.toolchain import PYTEST_PACKAGES, toolchain_python, world_dir
from tests.unit.judges.builtins.test_runners import (
    BUGGY,
    HELPERS,
    LISTED,
    TRUSTED_TESTS,
    UNTOUCHED,
    recommended_gate,
)

ATTACKS = REPO / "tests" / "fixtures" / "hostile" / "launcher"
AS = {"root": None, "non-root": NONROOT}
# The attacks that tamper with the run, and the fact the launcher names for each.
TAMPERING = {
    "trace_flip": "installed a trace or profile function (sys.settrace)",
    "trace_flip_removed": "installed a trace or profile function (sys.settrace)",
    "profile_flip": "installed a trace or profile function (sys.setprofile)",
    "thread_tracer": "installed a trace or profile function (sys.settrace, threads)",
    "current_frames": "reached a frame (sys._current_frames)",
    "traceback_frames": "reached a frame (tb_frame)",
    "generator_frame": "reached a frame (gi_frame)",
    "gc_objects": "reached every live object (gc.get_objects)",
    "gc_referrers": "reached live objects (gc.get_referrers)",
    "ctypes_trace": "ctypes",
    "code_swap": "replaced a function's code (__code__)",
    "native_module": "the native module fastcalc/_json",
    "plugin_via_config": "passed, but its test body failed",
    "report_flip_later": "changed after it was made",
    "forged_record": "an event of the launcher's records was forged",
}
# The attacks that get no more than the honest reward: values that claim equality, and
# the signed forgery, which finds no key to sign with.
HONEST = ("always_equal", "equal_int", "equal_to_numbers", "mock_any", "class_spoof")
HONEST += ("signed_forgery",)

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="switches to other UIDs: run as root")


class Arena:
    """The task's trusted side (the recommended gate, its protected tests) and a
    toolchain any UID can run, under a dir any UID can read."""

    def __init__(self, root: Path, python: Path) -> None:
        self.root = root
        self.python = python
        self.marker = f"launcher-arena-{secrets.token_hex(6)}"
        gate = yaml.safe_load(recommended_gate(python))
        tests = next(judge for judge in gate["judges"] if judge["name"] == "tests")
        tests["arguments"]["args"] = ["-k", f"not {self.marker}"]  # names the run in ps
        config = root / "config"
        files = {
            "eval.yaml": yaml.safe_dump(gate),
            "tests.txt": "\n".join(LISTED) + "\n",
            "protected/tests/test_calc.py": TRUSTED_TESTS,
            "protected/tests/helpers.py": HELPERS,
        }
        for name, text in files.items():
            (config / name).parent.mkdir(parents=True, exist_ok=True)
            (config / name).write_text(text)
        self.config = config / "eval.yaml"
        self.native = Path(
            subprocess.run(
                [str(python), "-c", "import _json; print(_json.__file__)"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
        )

    def case(self, name: str, calc: str) -> Path:
        """A read-only case (not the grader's) holding calc.py and the trusted tests."""
        case = self.root / "cases" / f"{name}-{secrets.token_hex(4)}"
        (case / "tests").mkdir(parents=True)
        (case / "calc.py").write_text(calc)
        (case / "tests" / "test_calc.py").write_text(TRUSTED_TESTS)
        (case / "tests" / "helpers.py").write_text(HELPERS)
        if name == "native_module":  # the module it imports, planted beside it
            (case / "fastcalc").mkdir()
            (case / "fastcalc" / "__init__.py").write_text("")
            shutil.copy(self.native, case / "fastcalc" / self.native.name)
        for path in [case, *case.rglob("*")]:
            path.chmod(0o555 if path.is_dir() else 0o444)
        return case

    def grade(self, case: Path, uid: int | None, landlock: bool) -> tuple[float, dict[str, str]]:
        """(reward, the tests judge's judges.json entry) of `verifier grade` as uid."""
        reward, judges = grade_as(uid, self.config, case, self.marker, landlock=landlock)
        return reward, judges["tests"]


@pytest.fixture(scope="module")
def arena() -> Iterator[Arena]:
    root = world_dir("verifier-launcher-")
    try:
        with toolchain_python(PYTEST_PACKAGES) as python:
            yield Arena(root, python)
    finally:
        remove_world_dir(root)


def calc_of(attack: str) -> str:
    """The attack's calc.py: a preamble before the buggy functions, its own `add` before
    the buggy `sub` and `mul`, or whole."""
    text = (ATTACKS / f"{attack}.py").read_text()
    if "def add(" not in text:
        return text + "\n\n" + BUGGY
    return text if "def sub(" in text else text + "\n\n" + BUGGY.split("\n\n\n", 1)[1]


MATRIX = [
    pytest.param(who, landlock, id=f"{who}-{'landlock' if landlock else 'no-landlock'}")
    for who in AS
    for landlock in (True, False)
]


@pytest.mark.slow
@needs_root
@pytest.mark.parametrize(("who", "landlock"), MATRIX)
@pytest.mark.parametrize("attack", sorted(TAMPERING))
def test_code_under_test_that_tampers_from_inside_voids_the_run(
    arena: Arena, attack: str, who: str, landlock: bool
) -> None:
    """Without the launcher's audit and report checks each of these scores 2/3 or 1.0."""
    reward, tests = arena.grade(arena.case(attack, calc_of(attack)), AS[who], landlock)
    assert reward == 0.0, tests["rationale"]
    assert tests["rationale"].startswith(
        "the code under test tampered with the verifier's pytest run, so no test counts (exit 7)"
    ), tests["rationale"]
    assert TAMPERING[attack] in tests["rationale"], tests["rationale"]


@pytest.mark.slow
@needs_root
@pytest.mark.parametrize(("who", "landlock"), MATRIX)
@pytest.mark.parametrize("attack", HONEST)
def test_values_that_claim_equality_get_the_honest_reward(
    arena: Arena, attack: str, who: str, landlock: bool
) -> None:
    """Each makes `sub` and `mul` pass plain pytest (1.0); the runner passes only `add`
    (the gate's no_tamper may fail the plainest of them first: 0)."""
    reward, tests = arena.grade(arena.case(attack, calc_of(attack)), AS[who], landlock)
    assert tests["value"] == pytest.approx(UNTOUCHED), tests["rationale"]
    assert tests["rationale"].startswith("1 of 3 listed tests passed"), tests["rationale"]
    assert reward in (0.0, pytest.approx(UNTOUCHED))


# Each raises plain pytest's count: the attacks are real (the others work only against
# the launcher itself, or by chance, or only plant their means).
REAL = [
    "always_equal",
    "class_spoof",
    "code_swap",
    "ctypes_trace",
    "current_frames",
    "equal_int",
    "equal_to_numbers",
    "gc_objects",
    "gc_referrers",
    "generator_frame",
    "mock_any",
    "plugin_via_config",
    "profile_flip",
    "trace_flip",
    "trace_flip_removed",
    "traceback_frames",
]


@pytest.mark.slow
@pytest.mark.parametrize("attack", REAL)
def test_the_attack_raises_the_reward_of_plain_pytest(arena: Arena, attack: str) -> None:
    """The same case, its tests run by `python -m pytest` (the test list still applied):
    more than the honest reward, so the tests above can fail."""
    command = [str(arena.python), "-m", "pytest", "-p", "no:cacheprovider"]
    command += ["--junitxml=report.xml", "tests/test_calc.py"]
    arguments = {"command": command, "report": "report.xml", "tests": LISTED, "timeout": 120}
    config = arena.root / "plain" / "eval.yaml"
    config.parent.mkdir(exist_ok=True)
    config.write_text(
        "judges:\n  - name: tests\n    builtin: tests/pass_rate\n"
        f"    timeout: 180\n    arguments: {json.dumps(arguments)}\n"
        "reward: {judge: tests, on_error: zero}\n"
    )
    case = arena.case(attack, calc_of(attack))
    out = Path(str(case) + "-out")
    completed = run_grader(
        None, ["grade", "--config", str(config), "--case", str(case), "--out", str(out)]
    )
    assert completed.returncode == 0, completed.stderr
    assert json.loads((out / "reward.json").read_text())["reward"] > UNTOUCHED + 0.3


@pytest.mark.slow
def test_a_native_module_the_author_names_loads(arena: Arena) -> None:
    """An extension module built in place, named in `native_modules`: the runner gives the
    honest pass rate (the gate's no_tamper fails a native module the agent added)."""
    gate = yaml.safe_load(arena.config.read_text())
    tests = next(judge for judge in gate["judges"] if judge["name"] == "tests")
    tests["arguments"]["native_modules"] = ["fastcalc"]
    named = arena.config.with_name("native.yaml")
    named.write_text(yaml.safe_dump(gate))
    case = arena.case("native_module", calc_of("native_module"))
    out = Path(str(case) + "-out")
    completed = run_grader(
        None, ["grade", "--config", str(named), "--case", str(case), "--out", str(out)]
    )
    assert completed.returncode == 0, completed.stderr
    tests = json.loads((out / "judges.json").read_text())["per_judge"]["tests"]
    assert tests["value"] == pytest.approx(UNTOUCHED), tests["rationale"]


# Honest code whose values compare with the tests' own on purpose, and code reaching
# frames the ways libraries do: every test passes (1.0). The same tests against values
# that claim every comparison: every test fails (0.0).
KINDS = """\
import collections
import dataclasses
import enum
import logging
import sys
import traceback


class Version:
    def __init__(self, *parts):
        self.parts = parts

    def __eq__(self, other):
        if isinstance(other, Version):
            other = other.parts
        return self.parts == other if isinstance(other, tuple) else NotImplemented

    def __lt__(self, other):
        return self.parts < other if isinstance(other, tuple) else NotImplemented

    def __hash__(self):
        return hash(self.parts)


class Bag:
    def __init__(self, *items):
        self.items = list(items)

    def __contains__(self, item):
        return item in self.items


Point = collections.namedtuple("Point", "x y")


@dataclasses.dataclass
class Pair:
    a: int
    b: int


class Color(enum.IntEnum):
    RED = 1


class Meters(float):
    pass


def version():
    return Version(1, 2)


def module_of_caller():
    return sys._getframe(1).f_globals["__name__"]


def logged(value):
    logging.getLogger("kinds").warning("value %s", value)
    return value


def described_error():
    try:
        raise ValueError("described")
    except ValueError:
        return traceback.format_exc()
"""
LIAR = """\
class _Liar:
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __lt__ = __le__ = __gt__ = __ge__ = __eq__

    def __hash__(self):
        return hash((1, 2))


def version():
    return _Liar()
"""
KIND_TESTS = """\
from unittest.mock import ANY

import pytest

import kinds


def test_order():
    assert kinds.version() < (1, 3)
    assert not kinds.version() < (1, 1)


def test_equal():
    assert kinds.version() == (1, 2)
    assert kinds.version() != (2, 1)


def test_in_list():
    assert kinds.version() in [(0, 1), (1, 2)]
    assert kinds.version() not in [(0, 1), (2, 1)]


def test_dict_key():
    assert {kinds.version(): "v"} == {(1, 2): "v"}
    assert {kinds.version(): "v"} != {(2, 1): "v"}


def test_nested():
    assert [kinds.version(), {"n": 2}] == [(1, 2), {"n": 2}]
    assert [kinds.version(), 3] != [(2, 1), 3]


def test_set():
    assert {kinds.version()} == {(1, 2)}
    assert {kinds.version()} != {(2, 1)}
"""
HONEST_KIND_TESTS = """\

def test_records():
    assert kinds.Point(1, 2) == (1, 2)
    assert kinds.Pair(1, 2) == kinds.Pair(1, 2)
    assert kinds.Color.RED == 1
    assert kinds.Meters(2.5) == 2.5
    assert {kinds.Color.RED: "r"} == {1: "r"}
    assert 2 in kinds.Bag(1, 2) and 3 not in kinds.Bag(1, 2)


def test_matchers_the_tests_name():
    assert {"id": kinds.version(), "n": 2} == {"id": ANY, "n": 2}
    assert kinds.logged(0.1 + 0.2) == pytest.approx(0.3)


def test_frames_as_libraries_reach_them():
    assert kinds.module_of_caller() == __name__
    assert "ValueError: described" in kinds.described_error()
"""


@pytest.mark.slow
@pytest.mark.parametrize(("kinds", "reward"), [(KINDS, 1.0), (KINDS + LIAR, 0.0)])
def test_comparisons_by_the_trusted_sides_rules_only_for_values_that_claim_anything(
    arena: Arena, kinds: str, reward: float
) -> None:
    tests = KIND_TESTS + (HONEST_KIND_TESTS if kinds == KINDS else "")
    config = arena.root / f"kinds-{reward}" / "eval.yaml"
    config.parent.mkdir()
    arguments = {"runner": "pytest", "executable": str(arena.python), "timeout": 120}
    config.write_text(
        "judges:\n  - name: tests\n    builtin: tests/pass_rate\n"
        f"    timeout: 180\n    arguments: {json.dumps(arguments)}\n"
        "reward: {judge: tests, on_error: zero}\n"
    )
    case = arena.root / f"kinds-case-{reward}"
    (case / "tests").mkdir(parents=True)
    (case / "kinds.py").write_text(kinds)
    (case / "tests" / "test_kinds.py").write_text(tests)
    for path in [case, *case.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    out = arena.root / f"kinds-out-{reward}"
    completed = run_grader(
        None, ["grade", "--config", str(config), "--case", str(case), "--out", str(out)]
    )
    assert completed.returncode == 0, completed.stderr
    judged = json.loads((out / "judges.json").read_text())["per_judge"]["tests"]
    assert json.loads((out / "reward.json").read_text())["reward"] == reward, judged
