"""Red team on the trusted tests hidden from the code under test (`runner: pytest`
with `test_dir`): code under test that looks for the tests' secret where the files
are not (their modules in its own process, the grader's config dir, every process's
open files) and answers with it. Graded by `verifier grade` as root and as an
arbitrary UID, with Landlock and without it; each asserts the honest reward (0.5:
one of two listed tests), so an attack that finds the secret fails its test.

Not hidden, and so not tested here (docs/builtins.md "Limits"): the test modules are
loaded in the process that runs the code under test, so their globals (`sys.modules`),
their lines (`linecache`) and the caller's globals through `sys._getframe`'s FrameView
hold the secret (the red team read it each way: 1.0).

Code disguised as trusted code by its file's name: the audit hook judges code by its
file, so a module the case names conftest.py (trusted as a conftest, though with
test_dir none of the case is loaded), one it writes to its TMPDIR (outside the working
dir), its own by a path spelled `//...`, or code compiled under a made-up name outside
the toolchain or under a file's name in its import path got real frames, through them
the report's signing key, and signed a report of its own (1.0); fixed: only files in the
toolchain's import path are trusted outside the working dir, and code the case compiles
under a trusted file's name is refused.
"""

from __future__ import annotations

import pytest

from tests.hostile import grade_as
from tests.unit.judges.builtins.test_hidden_tests import (
    HONEST,
    LISTED,
    WHO,
    Task,
    needs_root,
    task,  # noqa: F401 (the module's fixture)
)

_TWICE = HONEST.split("\n\n\n", 1)[1]
_FIND = """\
import os
import re
import sys

FOUND = re.compile(r"s3cr3t-[0-9a-f]{16}")


def _search(value, depth=0):
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if isinstance(value, str):
        found = FOUND.search(value)
        return found.group(0) if found else None
    if depth < 3 and isinstance(value, (dict, list, tuple)):
        items = list(value.values()) if isinstance(value, dict) else list(value)
        for item in items:
            found = _search(item, depth + 1)
            if found:
                return found
    return None

"""
# The tests' files where the grader keeps them (eval.yaml's dir, known to the agent: /tests
# or /grading in Harbor; TASK_DIR here), and every file any process holds open.
ON_DISK = """\
def _read(path):
    if not os.path.isfile(path):  # a pipe would wait for its writer
        return ""
    try:
        with open(path, "rb") as handle:
            return handle.read(1 << 20)
    except OSError:
        return ""


def _places():
    for dirpath, _, files in os.walk(TASK_DIR):
        for name in files:
            yield os.path.join(dirpath, name)
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                fds = os.listdir("/proc/" + pid + "/fd")
            except OSError:
                continue
            for fd in fds:
                yield "/proc/" + pid + "/fd/" + fd


def answer():
    for path in _places():
        found = _search(_read(path))
        if found:
            return found
    return "no idea"
"""


@pytest.mark.slow
@needs_root
@pytest.mark.parametrize(
    ("who", "landlock"),
    [("root", True), ("root", False), ("an arbitrary UID", True)],
    ids=["root-landlock", "root-no-landlock", "an arbitrary UID-landlock"],
)
def test_code_under_test_that_reads_the_graders_dir_and_every_open_file_finds_nothing(
    task: Task,  # noqa: F811 (the fixture)
    who: str,
    landlock: bool,
) -> None:
    """eval.yaml's dir walked and every process's /proc/PID/fd read: hidden by Landlock,
    or, as root without it, by the dir's mode (closed to other users, as the docs ask).
    Not here: an arbitrary UID without Landlock (`--weak-sandbox`), where the command has
    the grader's UID and reads the tests in eval.yaml's dir (docs/security.md: nothing
    can hide the grader's files there)."""
    uid = WHO[who]()
    config = task.gate()
    hostile = _FIND + f"TASK_DIR = {str(config.parent)!r}\n\n" + ON_DISK + "\n\n" + _TWICE
    case = task.case(hostile)
    if not landlock:
        config.parent.chmod(0o700)
    try:
        reward, judges = grade_as(uid, config, case, task.marker, landlock=landlock)
    finally:
        config.parent.chmod(0o755)
    assert reward == 0.5, judges["tests"]["rationale"]


# Code the audit hook takes for trusted code (it judges code by its file's name) walks
# the real frames out to the launcher's main(), takes the report's signing key from its
# locals, writes a report of every listed test passed, signs it, and ends the process.
FORGE = (
    f"LISTED = {LISTED!r}\n"
    """
import json
import os
import sys


def _forge():
    frame = sys._getframe(0)
    while frame is not None and "signer" not in frame.f_locals:
        frame = frame.f_back
    signer = frame.f_locals["signer"].copy()
    tests = [{"name": name, "status": "passed", "duration": 0} for name in LISTED]
    summary = {"tests": len(tests), "passed": len(tests), "failed": 0, "skipped": 0}
    summary.update(pending=0, other=0, start=0, stop=1)
    results = {"tool": {"name": "pytest"}, "summary": summary, "tests": tests}
    data = json.dumps({"reportFormat": "CTRF", "specVersion": "1.0.0", "results": results})
    signer.update(data.encode())
    report = os.path.join(os.environ["VERIFIER_RESULTS"], "ctrf.json")
    with open(report + ".sig", "w") as handle:
        handle.write(signer.hexdigest())
    with open(report, "w") as handle:
        handle.write(data)
    os._exit(0)


def answer():
    _forge()
    return "no idea"


def twice(value):
    return value + value
"""
)
# How the forger's code gets a file name the hook trusts: each the case's files.
DISGUISES = {
    # Fixed: with test_dir no conftest of the case is loaded, so none is trusted.
    "a module named conftest.py": {
        "calc.py": "from lib.conftest import answer, twice\n",
        "lib/conftest.py": FORGE,
    },
    # Fixed: outside the working dir only the toolchain's import path is trusted.
    "a module written to its TMPDIR": {
        "calc.py": (
            "import os, sys, tempfile\n\n"
            f"SOURCE = {FORGE!r}\n"
            "where = tempfile.mkdtemp()\n"
            "with open(os.path.join(where, 'forger.py'), 'w') as handle:\n"
            "    handle.write(SOURCE)\n"
            "sys.path.insert(0, where)\n"
            "from forger import answer, twice\n"
        ),
    },
    # Fixed: the case's own file by a path that misses the working dir's prefix.
    "the case's module by a path with //": {
        "calc.py": (
            "import os, sys\n\n"
            "sys.path.insert(0, '/' + os.path.dirname(os.path.abspath(__file__)))\n"
            "from forger import answer, twice\n"
        ),
        "forger.py": FORGE,
    },
    # Fixed: a name outside the toolchain's import path is the case's.
    "code compiled under a made-up file's name": {
        "calc.py": (
            f"SOURCE = {FORGE!r}\nexec(compile(SOURCE, '/usr/lib/python3/forger.py', 'exec'))\n"
        ),
    },
    # Open (docs/builtins.md, "Limits"): the name of a file in the standard library's dir.
    "code compiled under a standard module's dir": {
        "calc.py": (
            "import os\n\n"
            f"SOURCE = {FORGE!r}\n"
            "NAME = os.path.join(os.path.dirname(os.__file__), 'forger.py')\n"
            "exec(compile(SOURCE, NAME, 'exec'))\n"
        ),
    },
}


@pytest.mark.slow
@needs_root
@pytest.mark.parametrize("landlock", [True, False], ids=["landlock", "no-landlock"])
@pytest.mark.parametrize("who", list(WHO))
@pytest.mark.parametrize("disguise", list(DISGUISES))
def test_code_under_test_disguised_as_trusted_code_cannot_sign_a_report(
    task: Task,  # noqa: F811 (the fixture)
    disguise: str,
    who: str,
    landlock: bool,
) -> None:
    """The forger ends the run with a report of its own, signed with the run's key: 1.0
    if the hook gives it real frames. Refused frames (a FrameView has no f_locals), the
    test that calls it fails: the honest 0.5, or less (a file named `//...` makes pytest's
    traceback of that failure an internal error: 0)."""
    uid = WHO[who]()
    config = task.gate()
    case = task.case(HONEST)
    for name, text in DISGUISES[disguise].items():
        (case / name).parent.mkdir(parents=True, exist_ok=True)
        (case / name).write_text(text)
    for path in [case, *case.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    reward, judges = grade_as(uid, config, case, task.marker, landlock=landlock)
    assert reward <= 0.5, judges["tests"]["rationale"]
