"""A command's plan is a pure function of the policy, its dirs and its request: who it
runs as, what it may read and write, and an environment made from an allow-list."""

from __future__ import annotations

from pathlib import Path

import attrs

from tests.unit.sandbox.test_policy import ROOT_POLICY
from verifier.linux import JUDGE_TOKEN_ENV
from verifier.sandbox.dirs import CommandDirs
from verifier.sandbox.plan import (
    DEFAULT_PATH,
    command_path,
    leads_into,
    plan_command,
    reachable_path,
)

DIRS = CommandDirs(Path("/tmp/scratch/command-1"), returned=True, provided=True)
GRADER = {
    "PATH": "/opt/tool/bin:/usr/bin",
    "LANG": "C.UTF-8",
    "OPENAI_API_KEY": "sk-secret",
    "VERIFIER_OUT": "/logs/verifier",
    JUDGE_TOKEN_ENV: "token-1",
}


def test_the_same_request_gets_the_same_plan() -> None:
    assert plan_command(ROOT_POLICY, DIRS, {}, GRADER) == plan_command(
        ROOT_POLICY, DIRS, {}, GRADER
    )


def test_a_command_gets_the_allow_list_and_never_the_graders_secrets() -> None:
    environment = plan_command(ROOT_POLICY, DIRS, {}, GRADER).environment
    assert environment == {
        "PATH": "/opt/tool/bin:/usr/bin",
        "LANG": "C.UTF-8",
        "HOME": str(DIRS.home),
        "TMPDIR": str(DIRS.home),
        "VERIFIER_PROVIDED": str(DIRS.given),
        "VERIFIER_RESULTS": str(DIRS.results),
        JUDGE_TOKEN_ENV: "token-1",
    }


def test_the_authors_env_cannot_move_the_dirs_the_grader_reads_back() -> None:
    env = {"HOME": "/elsewhere", "VERIFIER_RESULTS": "/logs/verifier", "GOFLAGS": "-mod=vendor"}
    environment = plan_command(ROOT_POLICY, DIRS, env, GRADER).environment
    assert environment["HOME"] == "/elsewhere"  # the author's to choose
    assert environment["GOFLAGS"] == "-mod=vendor"
    assert environment["VERIFIER_RESULTS"] == str(DIRS.results)


def test_a_command_writes_only_beneath_its_own_dirs_and_reads_its_provided_files() -> None:
    plan = plan_command(ROOT_POLICY, DIRS, {}, GRADER)
    assert plan.writable == (str(DIRS.case), str(DIRS.home), str(DIRS.results))
    assert plan.readable == (*ROOT_POLICY.readable, str(DIRS.given))
    bare = CommandDirs(DIRS.root, returned=False, provided=False)
    plain = plan_command(ROOT_POLICY, bare, {}, GRADER)
    assert plain.writable == (str(DIRS.case), str(DIRS.home))
    assert plain.readable == ROOT_POLICY.readable
    assert "VERIFIER_PROVIDED" not in plain.environment
    assert "VERIFIER_RESULTS" not in plain.environment


def test_as_root_it_runs_as_its_lanes_uid_and_otherwise_as_the_grader() -> None:
    assert plan_command(ROOT_POLICY.in_lane(1), DIRS, {}, GRADER).uid == 65533
    non_root = attrs.evolve(ROOT_POLICY, as_root=False, base_uid=1000680000)
    assert plan_command(non_root, DIRS, {}, GRADER).uid is None


def test_its_path_is_the_authors_else_the_graders_else_the_default() -> None:
    assert command_path({"PATH": "/x"}, GRADER) == "/x"
    assert command_path({}, GRADER) == "/opt/tool/bin:/usr/bin"
    assert command_path({}, {}) == DEFAULT_PATH


def test_path_entries_in_the_case_or_relative_to_it_are_dropped() -> None:
    hidden = ("/app", "/srv/tests")
    path = "bin:/app/.venv/bin:/usr/local/bin:.::/app:/application/bin:/usr/bin"
    assert reachable_path(path, hidden) == "/usr/local/bin:/application/bin:/usr/bin"
    policy = attrs.evolve(ROOT_POLICY, hidden=hidden)
    environment = plan_command(policy, DIRS, {"PATH": path}, GRADER).environment
    assert environment["PATH"] == "/usr/local/bin:/application/bin:/usr/bin"
    assert (
        command_path({"PATH": path}, GRADER, hidden) == "/usr/local/bin:/application/bin:/usr/bin"
    )


def test_path_entries_whose_links_lead_into_the_case_are_dropped(tmp_path: Path) -> None:
    """/opt/tools -> /app/.venv/bin runs the agent's programs as much as /app/.venv/bin."""
    case, tools = tmp_path / "app", tmp_path / "opt"
    (case / ".venv" / "bin").mkdir(parents=True)
    tools.mkdir()
    (tools / "venv-bin").symlink_to(case / ".venv" / "bin")
    (tools / "relative").symlink_to(Path("..") / "app" / ".venv")
    (tools / "elsewhere").symlink_to("/usr")
    (tools / "loop").symlink_to(tools / "loop")
    hidden = (str(case),)
    path = ":".join(
        [
            f"{tools}/venv-bin",
            f"{tools}/relative/bin",
            f"{tools}/elsewhere/bin",
            f"{tools}/loop/bin",
            f"{tools}/../app/.venv/bin",
            "/usr/bin",
        ]
    )
    assert reachable_path(path, hidden) == f"{tools}/elsewhere/bin:/usr/bin"
    assert leads_into(f"{tools}/venv-bin/python3", hidden) == str(case)
    assert leads_into(f"{tools}/elsewhere/bin/python3", hidden) is None


def test_what_lies_inside_the_case_never_decides() -> None:
    """The walk stops at the case: a link the agent left in it is never read."""
    read: list[str] = []

    def readlink(path: str) -> str:
        read.append(path)
        if path == "/opt/tools":
            return "/app/.venv/bin"
        raise OSError(22, "not a link")

    assert leads_into("/opt/tools/python3", ("/app",), readlink) == "/app"
    assert read == ["/opt", "/opt/tools"]
