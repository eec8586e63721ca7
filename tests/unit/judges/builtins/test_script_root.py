"""`tests/script` with `as_root`: the task's test.sh runs as root of its own user namespace,
through the real grader, as root and as an arbitrary UID.

What a test.sh written for root does works: `id -u` is 0, it writes root's HOME and
/etc (private copies: the real ones are untouched), `useradd` makes a user; as a root
grader it also switches to that user (`su`), who runs the image's setuid-root helper as
root of the namespace; the environment's ENTRYPOINT runs first (a loopback service, a
line in /etc/hosts) and is gone with the script. Code under test that, run by such a
script, tries to reach the grader (signals, ptrace, its config, the real out dir,
another namespace, the views' mounts, the real /etc) reaches nothing and gets its
honest reward, 0, leaving no process behind.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.hostile import NONROOT, give, leftovers, remove_world_dir, run_grader
from tests.toolchain import world_dir

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="switches to other UIDs: run as root")
AS = {"root": None, "non-root": NONROOT}
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
HELPER_C = r"""
#include <stdio.h>
#include <unistd.h>
int main(void) {
    if (geteuid() != 0) { printf("helper: euid %d, not root\n", (int)geteuid()); return 2; }
    printf("helper: root\n");
    return 0;
}
"""
ENTRYPOINT = """#!/bin/sh
echo "127.0.0.1 service.internal" >> /etc/hosts
python3 -c 'import http.server, sys; sys.argv[1:] = []
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"from-the-service")
    def log_message(self, *args): pass
http.server.HTTPServer(("127.0.0.1", PORT), H).serve_forever()' MARKER &
exec "$@"
"""


class Place:
    """The paths test.sh expects (outside /tmp: the script gets a private /tmp), the
    grader's config, case and out dir, and the image's programs the tests use."""

    def __init__(self, marker: str) -> None:
        self.views = Path(tempfile.mkdtemp(prefix="verifier-root-views-", dir="/var/tmp"))
        for name in ("tests", "app", "logs"):
            (self.views / name).mkdir()
        self.views.chmod(0o755)
        self.root = world_dir("verifier-script-root-")
        self.config = self.root / "config"
        (self.config / "task-tests").mkdir(parents=True)
        self.case = self.root / "case"
        self.case.mkdir()
        self.out = self.root / "out"
        self.out.mkdir()
        self.image = self.views / "image"  # the image's own programs (not under /tmp)
        self.image.mkdir()
        self.marker = marker

    @property
    def logs(self) -> Path:
        return self.views / "logs"

    def remove(self) -> None:
        remove_world_dir(self.root)
        remove_world_dir(self.views)


@pytest.fixture
def place() -> Iterator[Place]:
    made = Place(f"script-root-{secrets.token_hex(6)}")
    try:
        yield made
    finally:
        made.remove()


def grade(
    place: Place,
    who: str,
    test_sh: str,
    solution: str = "",
    landlock: bool = True,
    **arguments: Any,
) -> dict[str, Any]:
    """Grade the case with test.sh as the task's script, run as root of its namespace;
    the judge's record."""
    script = place.config / "task-tests" / "test.sh"
    script.write_text(test_sh)
    script.chmod(0o755)
    every = {
        "tests": "task-tests",
        "case_at": str(place.views / "app"),
        "tests_at": str(place.views / "tests"),
        "logs_at": str(place.logs),
        "reward_files": ["reward.txt"],
        "as_root": True,
        "home": "/etc/skel",  # the image's /root stands for root's HOME; this host's is large
        "env": {"PATH": PATH},
        "timeout": 60,
        **arguments,
    }
    judge = {"name": "tests", "builtin": "tests/script", "timeout": 90, "arguments": every}
    eval_yaml = {"judges": [judge], "reward": {"judge": "tests", "on_error": "zero"}}
    (place.config / "eval.yaml").write_text(yaml.safe_dump(eval_yaml))
    place.config.chmod(0o700)
    (place.case / "solution.py").write_text(solution)
    give(AS[who], place.config, place.out)
    if not landlock:  # the grader's files are hidden by their modes alone
        place.out.chmod(0o700)
    command = ["grade", "--config", str(place.config / "eval.yaml"), "--case", str(place.case)]
    done = run_grader(AS[who], [*command, "--out", str(place.out)], landlock=landlock)
    assert done.returncode == 0, done.stderr
    record: dict[str, Any] = json.loads((place.out / "judges.json").read_text())["per_judge"][
        "tests"
    ]
    assert record["status"] == "ok", record
    return record


def _helper(place: Place) -> Path:
    source = place.image / "helper.c"
    source.write_text(HELPER_C)
    program = place.image / "helper"
    subprocess.run(["gcc", "-o", str(program), str(source)], check=True)
    program.chmod(0o4755)  # setuid root
    listing = place.image / "setuid.list"
    listing.write_text(f"{program}\n")
    listing.chmod(0o644)
    return program


def _digests(*paths: str) -> Mapping[str, str]:
    return {path: hashlib.sha256(Path(path).read_bytes()).hexdigest() for path in paths}


@pytest.mark.slow
@needs_root
@pytest.mark.parametrize("who", AS)
def test_a_script_written_for_root_runs_as_root_of_its_own_namespace(
    place: Place, who: str
) -> None:
    logs = place.logs
    before = _digests("/etc/passwd", "/etc/hosts")
    test_sh = (
        "#!/bin/bash\n"
        "reward=1\n"
        'check() { if "$@"; then echo "ok: $*"; else echo "FAILED: $*"; reward=0; fi; }\n'
        'check test "$(id -u)" = 0\n'
        'check test "$HOME" = /root\n'
        "check sh -c 'echo mine > /root/mark && test \"$(cat /root/mark)\" = mine'\n"
        "check sh -c 'echo \"10.9.9.9 tests.internal\" >> /etc/hosts'\n"
        "check getent hosts tests.internal\n"
        "check useradd --create-home tester\n"
        "check getent passwd tester\n"
        "check test -d /home/tester\n"
        "check sh -c 'grep -q \"^root:[!*]\" /etc/shadow || ! test -e /etc/shadow'\n"
        f"echo $reward > {logs}/reward.txt\n"
    )
    record = grade(place, who, test_sh)
    assert record["value"] == 1.0, record["rationale"]
    assert _digests("/etc/passwd", "/etc/hosts") == before  # its /etc was a private copy
    assert "tester" not in Path("/etc/passwd").read_text()
    assert not Path("/home/tester").exists()


@pytest.mark.slow
@needs_root
def test_as_root_the_users_the_tests_create_exist_and_run_setuid_helpers_as_root(
    place: Place,
) -> None:
    """A root grader maps a range of UIDs of the script's own: `su` to a user its tests
    created works, and that user runs the image's setuid-root helper as root there."""
    helper = _helper(place)
    test_sh = (
        "#!/bin/bash\n"
        "useradd --create-home tester || exit 1\n"
        f"out=$(su tester -c 'id -u; {helper}')\n"
        'echo "$out"\n'
        'if [ "$out" = "$(id -u tester; echo helper: root)" ]; then r=1; else r=0; fi\n'
        f"echo $r > {place.logs}/reward.txt\n"
    )
    record = grade(place, "root", test_sh, setuid=str(place.image / "setuid.list"))
    assert record["value"] == 1.0, record["rationale"]
    sandbox = record["sandbox"]
    assert "root of its own user namespace (UID 0 inside; UIDs 1-65535 inside are" in sandbox


@pytest.mark.slow
@needs_root
@pytest.mark.parametrize("who", AS)
def test_the_environments_entrypoint_runs_first_and_goes_with_the_script(
    place: Place, who: str
) -> None:
    port = 20000 + secrets.randbelow(20000)
    entrypoint = place.image / "entrypoint.sh"
    entrypoint.write_text(ENTRYPOINT.replace("PORT", str(port)).replace("MARKER", place.marker))
    entrypoint.chmod(0o755)
    fetch = f"python3 -c \"import urllib.request; print(urllib.request.urlopen('http://service.internal:{port}/').read().decode())\""
    test_sh = (
        "#!/bin/bash\n"
        f'if [ "$({fetch})" = from-the-service ]; then r=1; else r=0; fi\n'
        f"echo $r > {place.logs}/reward.txt\n"
    )
    record = grade(place, who, test_sh, entrypoint=[str(entrypoint)])
    assert record["value"] == 1.0, record["rationale"]
    assert leftovers(place.marker) == []  # the service went with the script's namespace
    assert "service.internal" not in Path("/etc/hosts").read_text()


# What the code under test does at import, run by the script as root of its namespace:
# it prints ESCAPED when it reached anything outside. GRADER: the grader's pids; CONFIG,
# OUT, TESTS, LOGS: the real paths; MARKER: the /etc file it plants.
ATTACKS = {
    "signals the grader": (
        "for pid in GRADER:\n"
        "    for sig in (signal.SIGKILL, signal.SIGSTOP):\n"
        "        try:\n"
        "            os.kill(pid, sig); print('ESCAPED: signalled', pid)\n"
        "        except OSError:\n"
        "            pass\n"
        "try:\n"
        "    os.kill(-1, signal.SIGKILL)\n"
        "except OSError:\n"
        "    pass\n"
    ),
    "ptraces the grader": (
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "for pid in GRADER:\n"
        "    if libc.ptrace(16, pid, 0, 0) == 0: print('ESCAPED: attached', pid)\n"
        "    for name in ('environ', 'mem', 'fd'):\n"
        "        try:\n"
        "            open(f'/proc/{pid}/{name}', 'rb').read(1) if name != 'fd' else os.listdir(f'/proc/{pid}/fd')\n"
        "            print('ESCAPED: read', pid, name)\n"
        "        except OSError:\n"
        "            pass\n"
    ),
    "reads the grading config": (
        "for path in (CONFIG + '/eval.yaml', CONFIG + '/task-tests/test.sh'):\n"
        "    try:\n"
        "        open(path).read(); print('ESCAPED: read', path)\n"
        "    except OSError:\n"
        "        pass\n"
    ),
    "writes the real out dir": (
        "for path in (OUT + '/reward.json', OUT + '/judges.json'):\n"
        "    try:\n"
        "        open(path, 'w').write('{\"reward\": 1}'); print('ESCAPED: wrote', path)\n"
        "    except OSError:\n"
        "        pass\n"
        "try:\n"
        "    os.chmod(OUT, 0o777); print('ESCAPED: chmod', OUT)\n"
        "except OSError:\n"
        "    pass\n"
    ),
    "escapes its namespaces": (
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "for pid in (1, *GRADER):\n"
        "    for kind in ('user', 'mnt', 'pid'):\n"
        "        try:\n"
        "            fd = os.open(f'/proc/{pid}/ns/{kind}', os.O_RDONLY)\n"
        "        except OSError:\n"
        "            continue\n"
        "        if libc.setns(fd, 0) == 0: print('ESCAPED: setns', pid, kind)\n"
        "    try:\n"
        "        os.listdir(f'/proc/{pid}/root/'); print('ESCAPED: listed the root of', pid)\n"
        "    except OSError:\n"
        "        pass\n"
        "if os.fork() == 0:\n"
        "    os.unshare(os.CLONE_NEWUSER | os.CLONE_NEWNS)\n"
        "    try:\n"
        "        open('/etc/passwd', 'a').write('x:x:0:0::/:/bin/sh\\n')\n"
        "    except OSError:\n"
        "        pass\n"
        "    os._exit(0)\n"
        "os.wait()\n"
    ),
    "remounts the views": (
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "for path in (TESTS, LOGS, '/etc', '/tmp'):\n"
        "    if libc.umount2(path.encode(), 2) == 0: print('umounted', path)\n"
        "libc.mount(None, TESTS.encode(), None, 32 | 4096, None)\n"
        "libc.mount(b'none', LOGS.encode(), b'tmpfs', 0, None)\n"
        "for path in (TESTS + '/test.sh', LOGS + '/reward.txt'):\n"
        "    try:\n"
        "        open(path, 'w').write('echo 1\\n'); print('wrote', path)\n"
        "    except OSError:\n"
        "        pass\n"
    ),
    "writes the real /etc": (
        "for path in ('/etc/passwd', '/etc/MARKER'):\n"
        "    try:\n"
        "        open(path, 'a').write('evil:x:0:0::/:/bin/sh\\n')\n"
        "    except OSError:\n"
        "        pass\n"
        "try:\n"
        "    os.setuid(65533); os.kill(-1, signal.SIGKILL)\n"
        "except OSError:\n"
        "    pass\n"
    ),
}


def _grader_pids() -> list[int]:
    """The processes of the grade running now: the grader is this test's child."""
    listing = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return [
        int(line.split()[0])
        for line in listing.splitlines()[1:]
        if "-m verifier grade" in line and "ps -eo" not in line
    ]


def _solution(place: Place, attack: str) -> str:
    """Plants a reward of 1, leaves a process behind, attacks (its grader pids found once
    it runs), and answers wrongly: the script writes 0."""
    real = {
        "CONFIG": repr(str(place.config)),
        "OUT": repr(str(place.out)),
        "TESTS": repr(str(place.views / "tests")),
        "LOGS": repr(str(place.logs)),
    }
    body = ATTACKS[attack].replace("MARKER", place.marker)
    for name, value in real.items():
        body = body.replace(name, value)
    return (
        "import ctypes, os, signal, subprocess, sys\n"
        "GRADER = [int(line.split()[0]) for line in subprocess.run(['ps', '-eo', 'pid,args'],"
        " capture_output=True, text=True).stdout.splitlines()[1:] if '-m verifier grade' in line]\n"
        f"open({str(place.logs / 'reward.txt')!r}, 'w').write('1\\n')\n"
        f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)', {place.marker!r}],"
        " start_new_session=True)\n"
        f"{body}\n"
        "def answer():\n"
        "    return 0\n"
    )


@pytest.mark.slow
@needs_root
@pytest.mark.parametrize(("who", "landlock"), [("root", True), ("non-root", True), ("root", False)])
@pytest.mark.parametrize("attack", ATTACKS)
def test_code_under_a_root_script_reaches_nothing_of_the_grader(
    place: Place, attack: str, who: str, landlock: bool
) -> None:
    logs = place.logs
    test_sh = (
        "#!/bin/bash\n"
        f"cd {place.views / 'app'}\n"
        'python3 -c "import solution; assert solution.answer() == 42"\n'
        f"if [ $? -eq 0 ]; then echo 1 > {logs}/reward.txt; else echo 0 > {logs}/reward.txt; fi\n"
    )
    etc = _digests("/etc/passwd", "/etc/hosts")
    tests_listing = sorted(os.listdir(place.views / "tests"))
    record = grade(place, who, test_sh, _solution(place, attack), landlock=landlock)
    assert record["value"] == 0.0, record["rationale"]
    assert "ESCAPED" not in record["rationale"], record["rationale"]
    assert json.loads((place.out / "reward.json").read_text())["reward"] == 0.0
    assert _digests("/etc/passwd", "/etc/hosts") == etc
    assert not Path(f"/etc/{place.marker}").exists()
    assert sorted(os.listdir(place.views / "tests")) == tests_listing
    assert not (place.logs / "reward.txt").exists()  # the real dir the view stood for
    assert leftovers(place.marker) == []
    assert shutil.disk_usage(place.out)  # the out dir is still there, and the grader's
