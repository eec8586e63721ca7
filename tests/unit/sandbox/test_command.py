"""What the sandbox hands a command and takes back from it (`provided`, `returned`,
`stdin`: what the hardened test runners rest on) under the sandbox's own rules: the
Landlock read rules that hide the grader's files, the private copy, and, as a
non-root grader, the seccomp supervisor of chmod and its family. As root and as an
arbitrary non-root UID, each through a grader process of that UID."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.hostile import NONROOT, give, world_verifier
from verifier.grading import grade, load_eval
from verifier.results import Status
from verifier.sandbox import confine

AS = {"root": None, "non-root": NONROOT}
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="switches to other UIDs: run as root")

# The grader's side: one policy hiding the config dir, one command run under it.
DRIVER = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from verifier.sandbox import Command, Sandbox, discard_policy, plan_policy

    config, case = Path(sys.argv[1]), Path(sys.argv[2])
    policy = plan_policy([config])
    try:
        command = Command(
            ["sh", "handover.sh", str(config / "eval.yaml")], 30,
            provided={"conf/key.txt": config / "key.txt"},
            returned=("report.txt", "absent.txt"), stdin=b"the launcher's secret\\n",
        )
        run = Sandbox(policy).run(command, case)
    finally:
        discard_policy(policy)
    print(json.dumps({
        "exit_code": run.exit_code, "tail": run.tail, "confinement": run.confinement,
        "returned": {name: [None if file.data is None else file.data.decode(), file.problem]
                     for name, file in run.returned.items()},
    }))
""")

# The command's side: read stdin and the provided file, hand a report back, change its
# mode and size (the supervisor must allow that in $VERIFIER_RESULTS, one of the
# command's own dirs), and try what it must not do.
HANDOVER = textwrap.dedent("""
    read -r secret
    report="$VERIFIER_RESULTS/report.txt"
    { cat "$VERIFIER_PROVIDED/conf/key.txt"; echo "$secret"; echo padding; } > "$report"
    chmod 0600 "$report" || echo "chmod refused"
    truncate -s -8 "$report" || echo "truncate refused"
    chmod 0400 "$report" || echo "chmod refused"
    echo forged 2>/dev/null > "$VERIFIER_PROVIDED/conf/key.txt" && echo "provided is writable"
    cat "$1" 2>/dev/null && echo "the config is readable"
    case "$VERIFIER_RESULTS" in "$PWD"/*) echo "results inside the case";; esac
    echo done
""")


@needs_root
@pytest.mark.parametrize("who", AS)
def test_a_command_gets_its_provided_files_and_stdin_and_hands_back_its_report(
    root_dir: Path, who: str
) -> None:
    uid = AS[who]
    config, case = root_dir / "tests", root_dir / "case"
    config.mkdir()
    case.mkdir()
    (config / "eval.yaml").write_text("the answer key\n")
    (config / "key.txt").write_text("trusted\n")
    (case / "handover.sh").write_text(HANDOVER)
    for path in (config / "eval.yaml", config / "key.txt", case / "handover.sh"):
        path.chmod(0o644)
    give(uid, config, case)
    python, environment = world_verifier()
    command = [python, "-c", DRIVER, str(config), str(case)]
    if uid is not None:
        command = ["setpriv", f"--reuid={uid}", "--regid=0", "--clear-groups", *command]
    completed = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=root_dir,
        env={"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", **environment},
    )
    assert completed.returncode == 0, completed.stderr
    run = json.loads(completed.stdout)
    assert "Landlock" in run["confinement"], run["confinement"]
    if uid is not None:
        assert "chmod, chown, ACLs and truncate only beneath its dirs" in run["confinement"]
    assert (run["exit_code"], run["tail"]) == (0, "done\n")
    report, problem = run["returned"]["report.txt"]
    assert (report, problem) == ("trusted\nthe launcher's secret\n", None)
    missing, why = run["returned"]["absent.txt"]
    assert missing is None and why, why
    assert (config / "key.txt").read_text() == "trusted\n"
    assert sorted(path.name for path in case.iterdir()) == ["handover.sh"]


def _confinement_fails(*_: object) -> None:
    raise OSError(errno.EPERM, "landlock_restrict_self")


@pytest.mark.parametrize("command", ["./run.sh", "sh run.sh"])
def test_a_command_that_cannot_be_confined_is_an_error_never_a_failure(
    write_config: Callable[[str], Path],
    make_case: Callable[[dict[str, str]], Path],
    monkeypatch: pytest.MonkeyPatch,
    command: str,
) -> None:
    """The confinement failing in the command's process (before exec) is the grader's
    fault whatever the command is, even a path into the case: the judge errors."""
    config = write_config(
        f"judges:\n  - name: tests\n    builtin: command_succeeds\n    arguments: {{cmd: '{command}'}}\n"
    )
    case = make_case({"run.sh": "#!/bin/sh\nexit 0\n"})
    (case / "run.sh").chmod(0o755)
    monkeypatch.setattr(confine, "confine", _confinement_fails)
    result = grade(load_eval(config), case).results[0]
    assert result.status is Status.ERROR, result
    assert "the command could not be confined" in (result.error or "")
