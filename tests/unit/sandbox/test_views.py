"""A command's views (verifier.sandbox.views): its own dirs at the paths it expects, in
a mount namespace of its own. It finds its copy of the case, the trusted files
(read-only), the dir it hands files back in and a private /tmp where a task's test.sh
looks for them; what it writes there reaches nothing of the grader's; everything else
stays as the sandbox makes it (no write outside its own dirs, hidden paths hidden)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from verifier.sandbox import Command, Sandbox, discard_policy, plan_policy
from verifier.sandbox.views import View, views_refused

SCRIPT = """
set -u
echo "whoami: $(id -u)"
echo "case: $(cat "$APP/input.txt")"
echo "tests: $(cat "$TESTS/check.sh")"
echo changed > "$APP/input.txt" && echo "case writable"
{ echo planted > "$TESTS/check.sh"; } 2>/dev/null || echo "tests read-only"
echo 0.5 > "$LOGS/reward.txt" && echo "logs writable"
echo mine > /tmp/verifier-view-test && echo "tmp writable"
ls "$HIDDEN" >/dev/null 2>&1 || echo "config hidden"
{ echo x > "$OUTSIDE/x"; } 2>/dev/null || echo "outside not writable"
echo "pwd: $(pwd)"
"""


@pytest.fixture
def places() -> Iterator[Path]:
    """The paths a command will see its views at: outside /tmp, which one of them covers."""
    root = Path(tempfile.mkdtemp(prefix="views-", dir="/var/tmp"))
    root.chmod(0o755)  # as /app is: the sandbox's user reaches what lies beneath
    for name in ("app", "tests", "logs", "outside"):
        (root / name).mkdir()
        (root / name).chmod(0o777)
    (root / "app" / "real-case-marker").write_text("the grader's\n")
    yield root
    import shutil

    shutil.rmtree(root, ignore_errors=True)


def test_a_command_sees_its_own_dirs_at_its_view_paths(places: Path, tmp_path: Path) -> None:
    if views_refused(65534 if os.geteuid() == 0 else None):
        pytest.skip("user namespaces are refused on this machine")  # CI runs as root
    case = tmp_path / "case"
    case.mkdir()
    (case / "input.txt").write_text("from the case\n")
    config = tmp_path / "config"
    config.mkdir()
    (config / "check.sh").write_text("echo trusted\n")
    policy = plan_policy([config], case_dirs=[case])
    try:
        command = Command(
            ["bash", "-c", SCRIPT],
            30,
            env={
                "APP": str(places / "app"),
                "TESTS": str(places / "tests"),
                "LOGS": str(places / "logs"),
                "HIDDEN": str(config),
                "OUTSIDE": str(places / "outside"),
            },
            provided={"tests/check.sh": config / "check.sh"},
            returned=("reward.txt",),
            views=(
                View(str(places / "app"), "case"),
                View(str(places / "tests"), "provided/tests"),
                View(str(places / "logs"), "results"),
                View("/tmp", "tmp"),
            ),
            start_at=str(places / "app"),
        )
        run = Sandbox(policy).run(command, case)
    finally:
        discard_policy(policy)
    lines = run.tail.splitlines()
    assert lines == [
        f"whoami: {policy.uid}",
        "case: from the case",
        "tests: echo trusted",
        "case writable",
        "tests read-only",
        "logs writable",
        "tmp writable",
        "config hidden",
        "outside not writable",
        f"pwd: {places / 'app'}",
    ], run.tail
    assert run.returned["reward.txt"].data == b"0.5\n"
    # Nothing of it reached the real paths: the case, the grader's dirs, the host's /tmp.
    assert (case / "input.txt").read_text() == "from the case\n"
    assert os.listdir(places / "app") == ["real-case-marker"]
    assert os.listdir(places / "logs") == [] and os.listdir(places / "tests") == []
    assert not Path("/tmp/verifier-view-test").exists()


def test_a_view_at_a_path_the_image_lacks_is_no_run(tmp_path: Path) -> None:
    case = tmp_path / "case"
    case.mkdir()
    policy = plan_policy()
    try:
        command = Command(["true"], 10, views=(View("/no/such/dir", "case"),))
        run = Sandbox(policy).run(command, case)
    finally:
        discard_policy(policy)
    assert run.start_error == (
        "its view /no/such/dir is not a directory of this image (nothing to show it at)"
    )


@pytest.mark.parametrize(
    ("at", "of"), [("relative", "case"), ("/", "case"), ("/a/../b", "case"), ("/x", "nothing")]
)
def test_a_view_is_an_absolute_path_showing_one_of_its_dirs(at: str, of: str) -> None:
    with pytest.raises(ValueError, match="view"):
        View(at, of)


# Waits for the script to end (its parent changes), then rewrites the reward.
LEFT_BEHIND = """
( read -r _ _ _ parent _ < /proc/self/stat; : > "$LOGS/ready"
  while read -r _ _ _ now _ < /proc/self/stat && [ "$now" = "$parent" ]; do sleep 0.002; done
  echo 1 > "$LOGS/reward.txt"; echo 1 > "$LOGS/late.txt" ) &
while [ ! -e "$LOGS/ready" ]; do sleep 0.01; done
echo 0 > "$LOGS/reward.txt"
"""


def test_nothing_it_left_running_writes_after_it_ends(places: Path, tmp_path: Path) -> None:
    """A process the code under test leaves behind waits for the script to end, then
    rewrites its reward: it dies with the script (PID 1 of its namespace), first."""
    if views_refused(65534 if os.geteuid() == 0 else None):
        pytest.skip("user namespaces are refused on this machine")
    case = tmp_path / "case"
    case.mkdir()
    policy = plan_policy([], case_dirs=[case])
    try:
        for _ in range(3):
            command = Command(
                ["bash", "-c", LEFT_BEHIND],
                30,
                env={"LOGS": str(places / "logs")},
                returned=("reward.txt", "late.txt"),
                views=(View(str(places / "app"), "case"), View(str(places / "logs"), "results")),
                start_at=str(places / "app"),
            )
            run = Sandbox(policy).run(command, case)
            assert run.returned["reward.txt"].data == b"0\n", run.tail
            assert run.returned["late.txt"].problem == "does not exist"
    finally:
        discard_policy(policy)
