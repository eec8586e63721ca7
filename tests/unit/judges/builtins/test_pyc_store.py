"""The grader's store of trusted byte code for `runner: pytest` (pyc_store.py, the
launcher's TrustedCode): a run compiles only what no earlier run of the same tests
compiled, and nothing of the case's can stand in for a trusted compile.

The calc task of test_runners, graded by `runner: pytest` with the store in a private
temp dir: the third grade of a case imports every module from the store; an entry is
imported only for the very source it was compiled from (one planted under another
source's hash is never used); entries come into the store only signed by the launcher
before any code of the case ran; the code under test can neither list, read nor write
the store, nor plant byte code in pytest's rewrite cache while the tests run.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

from tests.toolchain import PYTEST_PACKAGES, toolchain_python, world_readable_dir
from tests.unit.judges.builtins.test_runners import (
    BUGGY,
    FIXED,
    LISTED,
    TRUSTED_TESTS,
    UNTOUCHED,
    Task,
    graded,
)
from verifier.casefiles import CaseFile
from verifier.judges.builtins import pyc_store
from verifier.judges.builtins.runners import LAUNCHER
from verifier.sandbox import discard_policy, plan_policy


@pytest.fixture(scope="module")
def task() -> Iterator[Task]:
    """The calc task of test_runners, with a toolchain any UID can run."""
    with (
        toolchain_python(PYTEST_PACKAGES) as python,
        world_readable_dir("verifier-pyc-task-") as root,
    ):
        yield Task(root, python)


@pytest.fixture
def store(task: Task, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temp dir of this test's own for the grader's scratch (and so its store): the
    sandbox user must be able to enter it, as it does /tmp."""
    private = Path(tempfile.mkdtemp(prefix="pyc-store-", dir=task.root))
    private.chmod(0o755)
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    monkeypatch.delenv(pyc_store.STORE_ENV, raising=False)
    return private / f"verifier-sandbox-{os.geteuid()}" / "pyc"


def entries(store: Path) -> dict[str, list[str]]:
    """sha256 -> the variants the store holds for it."""
    return {
        path.name: sorted(entry.name for entry in path.iterdir())
        for path in store.glob("??/*")
        if path.is_dir()
    }


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def toolchain_facts(python: Path) -> dict[str, str]:
    """The toolchain's cache tag and magic number, as the launcher names a plain variant."""
    script = (
        "import sys, importlib.util, json; print(json.dumps({'tag': "
        "sys.implementation.cache_tag, 'magic': importlib.util.MAGIC_NUMBER.hex(), "
        "'optimize': sys.flags.optimize}))"
    )
    output = subprocess.run(
        [str(python), "-I", "-c", script], capture_output=True, text=True, check=True
    ).stdout
    facts = json.loads(output)
    return {"plain": f"{facts['tag']}-{facts['magic']}-o{facts['optimize']}"}


def compiled_entry(python: Path, source: str, filename: str) -> bytes:
    """An entry as the launcher makes one (raw imports, definitions, code), compiled by
    the toolchain's python."""
    script = (
        "import ast, marshal, sys\n"
        "source = sys.stdin.buffer.read()\n"
        "code = compile(source, sys.argv[1], 'exec', dont_inherit=True)\n"
        "sys.stdout.buffer.write(marshal.dumps(((), frozenset(), code)))\n"
    )
    return subprocess.run(
        [str(python), "-I", "-c", script, filename],
        input=source.encode(),
        capture_output=True,
        check=True,
    ).stdout


def test_a_third_grade_imports_each_unchanged_file_from_the_store(task: Task, store: Path) -> None:
    """Grade 1 names what it imported, grade 2 compiles that before any code of the case
    runs (and hands it back signed), grade 3 finds it all in the store; each with the
    same reward."""
    case = task.case("store-warm", FIXED)
    for _ in range(3):
        reward, tests = graded(task.alone, case)
        assert reward == 1.0, tests["rationale"]
    held = entries(store)
    plain = toolchain_facts(task.python)["plain"]
    assert held[sha256(FIXED)] == [plain]  # calc.py, imported plainly
    assert held[sha256(TRUSTED_TESTS)][0].startswith(f"{plain}-pytest-")  # rewritten
    assert len(list((store / "hints").iterdir())) == 1


def test_an_entry_is_imported_for_the_very_source_it_is_named_by(task: Task, store: Path) -> None:
    """What the run imports for a module is the store's entry under the SHA-256 of its
    source: an entry compiled from the fixed code but named by the buggy source's hash
    (what only the grader could write: the store is its own) is imported for the buggy
    calc.py; the same entry under its own source's hash does nothing for the buggy one."""
    case = task.case("store-named", BUGGY)
    reward, _ = graded(task.alone, case)  # the hint: calc.py is imported
    assert reward == pytest.approx(UNTOUCHED)
    plain = toolchain_facts(task.python)["plain"]
    fixed = compiled_entry(task.python, FIXED, str(case / "calc.py"))
    honest = store / sha256(FIXED)[:2] / sha256(FIXED) / plain
    honest.parent.mkdir(parents=True)
    honest.write_bytes(fixed)  # the fixed code's entry, under its own source's hash
    for _ in range(2):  # filled, then read: the buggy source's own compile
        reward, tests = graded(task.alone, case)
        assert reward == pytest.approx(UNTOUCHED), tests["rationale"]
    planted = store / sha256(BUGGY)[:2] / sha256(BUGGY) / plain
    assert planted.is_file()  # compiled by the launcher of the second grade
    planted.write_bytes(fixed)  # as only someone who can write the grader's store could
    reward, tests = graded(task.alone, case)
    assert reward == 1.0, tests["rationale"]


REACH_STORE = BUGGY.replace(
    "def sub(a, b):\n    return a + b",
    """\
import glob
import os

_reached = []
for _store in glob.glob("/tmp/verifier-sandbox-*/pyc") + glob.glob("/tmp/*/verifier-sandbox-*/pyc"):
    for _try in (
        lambda: os.listdir(_store),
        lambda: os.listdir(os.path.join(_store, "hints")),
        lambda: open(os.path.join(_store, "planted"), "w").close(),
        lambda: os.makedirs(os.path.join(_store, "00", "0" * 64)),
    ):
        try:
            _try()
            _reached.append(_store)
        except OSError:
            pass


def sub(a, b):
    return a - b if _reached else a + b""",
)


def test_the_code_under_test_cannot_list_read_or_write_the_store(task: Task, store: Path) -> None:
    case = task.case("store-reach", REACH_STORE)
    for _ in range(3):
        reward, tests = graded(task.alone, case)
        assert reward == pytest.approx(UNTOUCHED), tests["rationale"]
    assert not (store / "planted").exists()


SECOND_TESTS = "from calc import mul\n\n\ndef test_mul_again():\n    assert mul(2, 3) == 6\n"
# Imported by the first test module, it plants a passing rewritten test_second.py in
# pytest's rewrite cache (a fresh dir in its TMPDIR, which the code under test can write),
# valid for the source as pytest checks it: before the store, pytest read it.
PLANT_REWRITE_CACHE = (
    BUGGY
    + """

def _plant():
    import glob, importlib.util, marshal, os, sys
    import pytest

    for cache in glob.glob(os.path.join(os.environ.get("TMPDIR", "/tmp"), "pytest-rewrite-*")):
        source_path = os.path.join(os.getcwd(), "tests", "test_second.py")
        with open(source_path, "rb") as handle:
            source = handle.read()
        code = compile("def test_mul_again():\\n    pass\\n", source_path, "exec")
        tag = f"{sys.implementation.cache_tag}-pytest-{pytest.__version__}"
        target = os.path.join(cache, *os.path.dirname(source_path).split(os.sep)[1:])
        os.makedirs(target, exist_ok=True)
        header = importlib.util.MAGIC_NUMBER + b"\\x03\\x00\\x00\\x00"
        header += importlib.util.source_hash(source)[:8]
        with open(os.path.join(target, f"test_second.{tag}.pyc"), "wb") as handle:
            handle.write(header + marshal.dumps(code))


_plant()
"""
)


def test_byte_code_planted_in_pytests_rewrite_cache_while_tests_run_is_never_read(
    task: Task, store: Path
) -> None:
    """pytest reads a rewritten test module from its cache dir when the source's hash
    matches; the launcher moved that dir out of the case, but into the command's TMPDIR,
    which the code under test writes. pytest's read is now the store's alone."""
    listed = [*LISTED, "tests/test_second.py::test_mul_again"]  # test_calc.py's first
    config = task.config(
        "rewrite-cache-in-run",
        (task.root / "config" / "alone" / "eval.yaml").read_text(),
        {"tests.txt": "\n".join(listed) + "\n"},
    )
    case = task.case(
        "rewrite-cache-in-run", PLANT_REWRITE_CACHE, {"tests/test_second.py": SECOND_TESTS}
    )
    for _ in range(3):  # cold, filled, from the store
        reward, tests = graded(config, case)
        # Never more than add's pass: the plant itself (the case compiling a test module
        # under its trusted name) voids the run now.
        assert reward <= 1 / 4 + 1e-9, tests["rationale"]


# --- the grader's side, as pure functions -------------------------------------------------


def test_only_entries_signed_with_the_runs_key_are_kept(tmp_path: Path) -> None:
    store = tmp_path / "pyc"
    for name in ("hints", "tmp"):
        (store / name).mkdir(parents=True)
    key = os.urandom(32)
    digest = "a" * 64
    entry = {"sha256": digest, "variant": "cpython-312-x-o0", "data": base64.b64encode(b"x")}
    document = json.dumps({"entries": [{**entry, "data": entry["data"].decode()}]}).encode()
    good = hmac.new(key, document, hashlib.sha256).hexdigest().encode()
    forged = hmac.new(os.urandom(32), document, hashlib.sha256).hexdigest().encode()
    handing = pyc_store.Handing(key="k")
    for signature in (forged, b"", None):
        returned = {pyc_store.PYC_ENTRIES: CaseFile(document, None)}
        if signature is not None:
            returned[f"{pyc_store.PYC_ENTRIES}.sig"] = CaseFile(signature, None)
        pyc_store.keep(store, handing, returned, key)
        assert not (store / "aa").exists()
    returned = {
        pyc_store.PYC_ENTRIES: CaseFile(document, None),
        f"{pyc_store.PYC_ENTRIES}.sig": CaseFile(good, None),
    }
    pyc_store.keep(store, handing, returned, key)
    assert (store / "aa" / digest / "cpython-312-x-o0").read_bytes() == b"x"


DIGEST = "b" * 64


@pytest.mark.parametrize(
    "item",
    [
        ["plain", "/etc/passwd.py", "v", DIGEST],
        ["plain", "../outside.py", "v", DIGEST],
        ["plain", "calc.txt", "v", DIGEST],
        ["other", "calc.py", "v", DIGEST],
        ["plain", "calc.py", "../../v", DIGEST],
        ["plain", "calc.py", "v", "../" + DIGEST],
        ["plain", "calc.py", "v"],
        "calc.py",
    ],
)
def test_a_hint_names_only_python_files_inside_the_case(tmp_path: Path, item: object) -> None:
    hint = tmp_path / "hint.json"
    good = ["test", "tests/test_calc.py", "v-1.0_x", DIGEST]
    hint.write_text(json.dumps({"seen": [item, good]}))
    assert pyc_store.read_hint(hint) == [tuple(good)]


def test_only_what_recurs_is_compiled_into_the_store(task: Task, store: Path) -> None:
    """A file the agent changed (its source not what the last run of the same tests
    found) is compiled by the run as before, and not kept: the store holds what recurs
    (the tests, the files left as they were), not every case's changes."""
    buggy, fixed = task.case("recurs-buggy", BUGGY), task.case("recurs-fixed", FIXED)
    for case in (buggy, fixed, buggy):  # each calc.py differs from the last run's
        reward, tests = graded(task.alone, case)
        assert reward in (1.0, pytest.approx(UNTOUCHED)), tests["rationale"]
    held = entries(store)
    assert sha256(TRUSTED_TESTS) in held  # the same in every case
    assert sha256(BUGGY) not in held
    assert sha256(FIXED) not in held
    graded(task.alone, buggy)  # the same as the last run's: kept
    assert sha256(BUGGY) in entries(store)


def test_the_store_is_the_graders_own_and_unused_where_the_sandbox_is_weak(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(pyc_store.STORE_ENV, raising=False)
    policy = plan_policy([tmp_path / "config"], scratch_root=str(tmp_path))
    try:
        strong = attrs.evolve(policy, hidden_by="Landlock", weakness=None)
        store = pyc_store.open_store(strong)
        assert store is not None
        assert store.parent == Path(policy.scratch).parent  # hidden from every command
        assert store.stat().st_mode & 0o777 == 0o700
        weak = attrs.evolve(policy, hidden_by=None, weakness="no Landlock", accept_weak=True)
        assert pyc_store.open_store(weak) is None
        monkeypatch.setenv(pyc_store.STORE_ENV, "off")
        assert pyc_store.open_store(strong) is None
    finally:
        discard_policy(policy)


def test_the_grader_names_the_launchers_files() -> None:
    source = LAUNCHER.read_text()
    for name in ("PYC_DIR", "PYC_FILL", "PYC_ENTRIES", "PYC_SEEN"):
        assert f'{name} = "{getattr(pyc_store, name)}"' in source


def test_a_store_the_user_names_is_hidden_from_every_command(
    task: Task, store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """VERIFIER_PYC_STORE (a persistent disk's dir, an image's) is used, and hidden like
    the default one: the code under test cannot list, read or write it."""
    named = task.root / "named-store" / "pyc"
    monkeypatch.setenv(pyc_store.STORE_ENV, str(named))
    case = task.case(
        "store-named-reach", REACH_STORE.replace("/tmp/*/verifier-sandbox-*/pyc", str(named))
    )
    for _ in range(3):
        reward, tests = graded(task.alone, case)
        assert reward == pytest.approx(UNTOUCHED), tests["rationale"]
    assert named.stat().st_mode & 0o777 == 0o700
    assert sha256(case.joinpath("calc.py").read_text()) in entries(named)
    assert not (named / "planted").exists()
    assert not store.exists()
