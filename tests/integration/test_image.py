"""The verifier image on real engines: grading, OpenShift-style restrictions, Harbor's
way of running it, a trial through a volume, and bad inputs.

Every test runs on docker (SDK), podman (SDK on its Docker-compatible socket) and
podman's CLI; every container runs with --network none.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from tests.readme import readme_commands

from .conftest import (
    EXAMPLES,
    IMAGE,
    REPO,
    RESTRICTED_USER,
    Engine,
    Mount,
    RunOptions,
    grade_mounts,
    read_reward,
    shared_dir,
    shared_file,
    unavailable,
)

pytestmark = pytest.mark.integration

REWARD_FILES = {"reward.json", "reward.txt", "judges.json"}

# What the bundled example must give (examples/eval.yaml): the passing report
# mentions the fix and is long (length_score 5); the failing one does not mention
# it, which gates the weighted reward to 0 whatever its length_score (3).
EXPECTED = {
    "case-pass": {"reward": 1.0, "has_report": 1.0, "mentions_fix": 1.0, "length_score": 5.0},
    "case-fail": {"reward": 0.0, "has_report": 1.0, "mentions_fix": 0.0, "length_score": 3.0},
}
SUMMARY = {
    "case-pass": "reward=1.0000  [has_report=1.0, mentions_fix=1.0, length_score=5.0]",
    "case-fail": "reward=0.0000  [has_report=1.0, mentions_fix=0.0, length_score=3.0]",
}


def assert_graded(out: Path, case: str, host_rewards: dict[str, dict]) -> None:
    reward = read_reward(out)
    assert reward == host_rewards[case], "container and host grading differ"
    assert reward == EXPECTED[case]
    assert float((out / "reward.txt").read_text()) == EXPECTED[case]["reward"]
    judges = json.loads((out / "judges.json").read_text())
    assert set(judges["per_judge"]) == {"has_report", "mentions_fix", "length_score"}


def assert_no_reward(out: Path) -> None:
    left = REWARD_FILES & {p.name for p in out.iterdir()}
    assert not left, f"a failed run left {sorted(left)} in {out}"


# --- grading from bind mounts ----------------------------------------------------


@pytest.mark.parametrize("case", ["case-pass", "case-fail"])
def test_grades_example_case(engine: Engine, case: str, out_dir: Path, host_rewards) -> None:
    """No arguments: the entrypoint runs `verifier grade` with the VERIFIER_* defaults."""
    result = engine.run(mounts=grade_mounts(EXAMPLES / case, out_dir))
    assert result.exit_code == 0, str(result)
    assert SUMMARY[case] in result.stdout
    assert_graded(out_dir, case, host_rewards)


@pytest.mark.parametrize("case", ["case-pass", "case-fail"])
def test_grades_under_restricted_v2(engine: Engine, case: str, out_dir: Path, host_rewards) -> None:
    """Arbitrary UID with GID 0, read-only root, /tmp tmpfs, no capabilities."""
    result = engine.run(
        ["grade"], mounts=grade_mounts(EXAMPLES / case, out_dir), options=RunOptions.restricted()
    )
    assert result.exit_code == 0, str(result)
    assert SUMMARY[case] in result.stdout
    assert_graded(out_dir, case, host_rewards)
    if os.geteuid() == 0:  # rootful engines: the container's ids are the host's
        owners = {(p.stat().st_uid, p.stat().st_gid) for p in out_dir.iterdir()}
        assert owners == {tuple(int(n) for n in RESTRICTED_USER.split(":"))}


def test_grading_changes_nothing_in_the_container(engine: Engine, out_dir: Path) -> None:
    """Nothing is written or installed outside the mounts at run time (no .pyc either)."""
    result, changes = engine.run_with_diff(mounts=grade_mounts(EXAMPLES / "case-pass", out_dir))
    assert result.exit_code == 0, str(result)
    assert changes == [], f"the container's filesystem changed: {changes}"


# --- Harbor's way: keep alive, exec /tests/test.sh --------------------------------


@pytest.mark.parametrize("user", ["0", "1001", RESTRICTED_USER])
def test_harbor_exec_test_sh(engine: Engine, user: str, host_rewards) -> None:
    """`sh -c "sleep infinity"`, then Harbor's exec sequence; /logs/verifier is the image's."""
    container = engine.start(
        ["sh", "-c", "sleep infinity"],
        mounts=[
            Mount(str(EXAMPLES / "case-pass"), "/case", read_only=True),
            Mount(str(EXAMPLES / "eval.yaml"), "/tests/eval.yaml", read_only=True),
        ],
    )
    try:
        prep = engine.exec(
            container,
            [
                "bash",
                "-c",
                "chmod +x /tests/test.sh && "
                "rm -f /logs/verifier/reward.txt /logs/verifier/reward.json",
            ],
            user="0",
        )
        assert prep.exit_code == 0, str(prep)
        run = engine.exec(
            container,
            ["bash", "-c", "(/tests/test.sh) > /logs/verifier/test-stdout.txt 2>&1"],
            user=user,
        )
        assert run.exit_code == 0, str(run)
        reward = engine.exec(container, ["cat", "/logs/verifier/reward.json"], user="0")
        assert reward.exit_code == 0, str(reward)
        assert json.loads(reward.stdout) == host_rewards["case-pass"] == EXPECTED["case-pass"]
        stdout = engine.exec(container, ["cat", "/logs/verifier/test-stdout.txt"], user="0")
        text = stdout.stdout
        assert "config: /tests/eval.yaml\n" in text
        assert "case:   /case  (1 files)" in text
        assert SUMMARY["case-pass"] in text
        assert "verifier exit code: 0" in text
        listing = engine.exec(container, ["ls", "/logs/verifier"], user="0")
        assert set(listing.stdout.split()) >= REWARD_FILES, str(listing)
    finally:
        engine.remove(container)


def test_harbor_test_sh_reports_a_failure(engine: Engine, tmp_path: Path) -> None:
    """No case where the task said it would be: test.sh says so, exits with the
    verifier's code 3, and leaves no reward."""
    container = engine.start(
        ["sh", "-c", "sleep infinity"],
        mounts=[Mount(str(EXAMPLES / "eval.yaml"), "/tests/eval.yaml", read_only=True)],
    )
    try:
        run = engine.exec(
            container,
            [
                "bash",
                "-c",
                "export VERIFIER_CASE=/app; (/tests/test.sh) > /logs/verifier/test-stdout.txt 2>&1",
            ],
            user="1001",
        )
        assert run.exit_code == 3, str(run)
        text = engine.exec(container, ["cat", "/logs/verifier/test-stdout.txt"]).stdout
        assert "case:   /app  (missing)" in text
        assert "case directory not found" in text
        assert "verifier exit code: 3" in text
        listing = engine.exec(container, ["ls", "/logs/verifier"]).stdout.split()
        assert listing == ["test-stdout.txt"]
    finally:
        engine.remove(container)


# --- a trial: agent container -> volume -> verifier container ---------------------


def test_trial_through_a_volume(engine: Engine, out_dir: Path, host_rewards) -> None:
    volume = engine.volume_create()
    try:
        agent = engine.run(
            ["sh", "-c", "cp -R /src/. /work/ && ls -l /work"],
            mounts=[
                Mount(str(EXAMPLES / "case-pass"), "/src", read_only=True),
                Mount(volume, "/work"),
            ],
            options=RunOptions(user="0:0"),
        )
        assert agent.exit_code == 0, str(agent)
        assert "report.md" in agent.stdout
        verifier = engine.run(
            mounts=[
                Mount(volume, "/case", read_only=True),
                Mount(str(EXAMPLES / "eval.yaml"), "/tests/eval.yaml", read_only=True),
                Mount(str(out_dir), "/logs/verifier"),
            ],
            options=RunOptions.restricted(),
        )
        assert verifier.exit_code == 0, str(verifier)
        assert_graded(out_dir, "case-pass", host_rewards)
    finally:
        engine.volume_remove(volume)


# --- bad inputs -----------------------------------------------------------------------


def test_missing_eval_yaml(engine: Engine, out_dir: Path) -> None:
    result = engine.run(mounts=grade_mounts(EXAMPLES / "case-pass", out_dir, config=None))
    assert result.exit_code == 2, str(result)
    assert (
        "verifier: error: /tests/eval.yaml: file not found; pass --config or set VERIFIER_CONFIG"
        in result.stderr
    )
    assert_no_reward(out_dir)


def test_invalid_eval_yaml(engine: Engine, out_dir: Path, tmp_path: Path) -> None:
    config = shared_file(tmp_path / "eval.yaml", "name: broken\njudges: [\n")
    result = engine.run(mounts=grade_mounts(EXAMPLES / "case-pass", out_dir, config=config))
    assert result.exit_code == 2, str(result)
    assert "verifier: error: /tests/eval.yaml: line 3, column 1: invalid YAML" in result.stderr
    assert_no_reward(out_dir)


def test_eval_yaml_with_unknown_builtin(engine: Engine, out_dir: Path, tmp_path: Path) -> None:
    config = shared_file(
        tmp_path / "eval.yaml",
        "name: broken\njudges:\n  - name: a\n    builtin: no_such_builtin\n",
    )
    result = engine.run(mounts=grade_mounts(EXAMPLES / "case-pass", out_dir, config=config))
    assert result.exit_code == 2, str(result)
    assert "unknown builtin 'no_such_builtin'" in result.stderr
    assert_no_reward(out_dir)


def test_an_empty_case_is_graded(engine: Engine, out_dir: Path, tmp_path: Path) -> None:
    """An agent that left nothing gets the reward its judges give nothing: 0.0 here."""
    empty = shared_dir(tmp_path / "empty")
    result = engine.run(mounts=grade_mounts(empty, out_dir))
    assert result.exit_code == 0, str(result)
    assert "warning: the case dir is empty: the agent left nothing" in result.stderr
    assert read_reward(out_dir)["reward"] == 0.0


def test_unwritable_out_dir(engine: Engine, out_dir: Path) -> None:
    mounts = [
        Mount(str(EXAMPLES / "case-pass"), "/case", read_only=True),
        Mount(str(EXAMPLES / "eval.yaml"), "/tests/eval.yaml", read_only=True),
        Mount(str(out_dir), "/logs/verifier", read_only=True),
    ]
    result = engine.run(mounts=mounts)
    assert result.exit_code == 4, str(result)
    assert "verifier: error: /logs/verifier: output directory is not writable by UID 1001" in (
        result.stderr
    )
    assert_no_reward(out_dir)


def readme_command(cli: str, case: Path, out: Path, *, fixed: bool) -> list[str]:
    """The README's `podman run` (out dir mounted with :U) or `docker run` (--user
    "$(id -u):0"), read from the README, on `case` and `out`; without the fix when
    `fixed` is false."""
    (written,) = [command.argv for command in readme_commands() if command.argv[:2] == (cli, "run")]
    places = {
        "./examples/case-pass": str(case),
        "./examples/eval.yaml": str(EXAMPLES / "eval.yaml"),
        "./out": str(out),
    }
    argv: list[str] = []
    words = iter(written)
    for word in words:
        if word == "--user":
            user = next(words)
            assert user == "$(id -u):0", user
            argv += ["--user", f"{os.getuid()}:0"] if fixed else []
        elif word.startswith("./"):
            source, target = word.split(":", 1)
            if not fixed:
                target = target.removesuffix(":U")
            argv.append(f"{places[source]}:{target}")
        elif word == "localhost/harbor-verifier:latest":
            argv.append(IMAGE)
        else:
            argv.append(word)
    return argv


@pytest.mark.parametrize("cli", ["podman", "docker"])
def test_the_readme_commands_grade_into_a_dir_made_by_mkdir(
    cli: str, built_image: str, tmp_path: Path, host_rewards
) -> None:
    """`mkdir out` leaves a dir the image's UID 1001 cannot write: without the README's
    fix grading says which UID needs access and how; with it, grading works."""
    if shutil.which(cli) is None:
        unavailable("podman-cli" if cli == "podman" else cli, f"{cli} is not installed")
    case = shared_dir(tmp_path / "case")
    shared_file(case / "report.md", (EXAMPLES / "case-pass" / "report.md").read_text())
    out = tmp_path / "out"
    out.mkdir(mode=0o755)
    if os.getuid() != 1001:
        refused = subprocess.run(
            readme_command(cli, case, out, fixed=False), capture_output=True, text=True, timeout=120
        )
        assert refused.returncode == 4, refused.stderr
        assert (
            "verifier: error: /logs/verifier: output directory is not writable by UID 1001 "
            "(Permission denied); mount it read-write and writable by UID 1001 (podman: "
            '-v DIR:/logs/verifier:U; docker: --user "$(id -u):0"; or chown/chmod DIR) '
            "or pass --out"
        ) in refused.stderr
    graded = subprocess.run(
        readme_command(cli, case, out, fixed=True), capture_output=True, text=True, timeout=120
    )
    assert graded.returncode == 0, graded.stderr
    assert read_reward(out) == host_rewards["case-pass"]


# --- the entrypoint and the image -------------------------------------------------


def test_entrypoint_runs_verifier_commands(engine: Engine) -> None:
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    for command in (["version"], ["--version"], ["-V"]):
        result = engine.run(command)
        assert (result.exit_code, result.stdout.strip()) == (0, version), str(result)
    result = engine.run(["schema"])
    assert result.exit_code == 0, str(result)
    assert json.loads(result.stdout)["title"] == "eval.yaml (harbor-verifier)"
    result = engine.run(["--help"])
    assert result.exit_code == 0, str(result)
    assert "grade" in result.stdout and "check" in result.stdout
    result = engine.run(
        ["check", "/tests/eval.yaml"],
        mounts=[Mount(str(EXAMPLES / "eval.yaml"), "/tests/eval.yaml", read_only=True)],
    )
    assert result.exit_code == 0, str(result)
    assert "/tests/eval.yaml: valid" in result.stdout


def test_entrypoint_execs_other_commands(engine: Engine) -> None:
    """Anything else is exec'd: it is PID 1, so signals reach it."""
    result = engine.run(["sh", "-c", 'echo "pid=$$ user=$(id -u):$(id -g) home=$HOME"'])
    assert result.exit_code == 0, str(result)
    assert result.stdout.strip() == "pid=1 user=1001:0 home=/home/verifier"
    assert engine.run(["false"]).exit_code == 1
    tools = "bash sh mkdir rm chmod find tar gzip base64"
    result = engine.run(["bash", "-c", f"for t in {tools}; do command -v $t || exit 1; done"])
    assert result.exit_code == 0, str(result)
    assert len(result.stdout.split()) == len(tools.split())


def test_tests_dir_is_read_only_to_the_grader_uids(engine: Engine) -> None:
    """Code from the case may run as the grader's UID: it must not rewrite test.sh (which
    bash reads while it runs it) nor the grading config."""
    script = "touch /tests/probe; echo x >> /tests/test.sh; stat -c '%U %A' /tests /tests/test.sh"
    for user in ("1001:0", RESTRICTED_USER):
        result = engine.run(["sh", "-c", script], options=RunOptions(user=user))
        assert "Permission denied" in result.stderr, str(result)
        assert result.stdout.split() == ["root", "drwxr-xr-x", "root", "-rwxr-xr-x"], str(result)


def test_working_dirs_writable_by_any_uid_in_group_0(engine: Engine) -> None:
    """OpenShift runs the image as an arbitrary UID with GID 0."""
    dirs = "/case /logs/verifier /home/verifier"
    script = f'stat -c "%n %g %A" {dirs} && for d in {dirs}; do touch "$d/probe" || exit 1; done'
    result = engine.run(["sh", "-c", script], options=RunOptions(user=RESTRICTED_USER))
    assert result.exit_code == 0, str(result)
    lines = result.stdout.splitlines()
    assert [line.split()[0] for line in lines] == dirs.split()
    for line in lines:
        _, gid, mode = line.split()
        assert gid == "0" and mode[5] == "w", line


def test_no_python_and_no_installer_in_the_image(engine: Engine) -> None:
    """The base has no Python; the verifier's own is outside PATH and has no pip."""
    result = engine.run(
        ["sh", "-c", "command -v python3 python pip pip3; ls /opt/verifier/bin"],
        options=RunOptions.restricted(),
    )
    assert result.stdout.split() == ["verifier"], str(result)
    result = engine.run(
        ["/opt/verifier/python/python3.11", "-c", "import pip"], options=RunOptions.restricted()
    )
    assert result.exit_code == 1 and "No module named 'pip'" in result.stderr, str(result)


def test_image_metadata(engine: Engine) -> None:
    config = engine.image_inspect()["Config"]
    assert config["User"] == "1001:0"
    assert config["Entrypoint"] == ["entrypoint.sh"]
    assert not config.get("Cmd")
    env = dict(item.split("=", 1) for item in config["Env"])
    assert env["VERIFIER_CONFIG"] == "/tests/eval.yaml"
    assert env["VERIFIER_CASE"] == "/case"
    assert env["VERIFIER_OUT"] == "/logs/verifier"
    assert env["PATH"].startswith("/opt/verifier/bin:")
    labels = config["Labels"]
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert labels["org.opencontainers.image.title"] == "harbor-verifier"
    assert labels["org.opencontainers.image.version"] == version
    for key in ("revision", "created", "base.name", "licenses", "description"):
        assert labels.get(f"org.opencontainers.image.{key}"), key
    assert labels["io.k8s.display-name"] == "harbor-verifier"
    assert labels["io.k8s.description"] == labels["org.opencontainers.image.description"]
    assert "harbor" in labels["io.openshift.tags"].split(",")
    assert labels.get("org.opencontainers.image.source") == (source_url() or None)
    # The digest a public base was pulled by; a base bootstrapped by `make base-image`
    # (labelled so, and the label carries over) was never in a registry.
    digest = labels.get("org.opencontainers.image.base.digest")
    if labels.get("io.github.harbor-verifier.bootstrapped"):
        assert digest is None
    else:
        assert re.fullmatch(r"sha256:[0-9a-f]{64}", digest or ""), digest


def source_url() -> str:
    """What the Makefile labels as the source: $SOURCE_URL, else the git remote `origin`
    as an https URL (none for a local path)."""
    if os.environ.get("SOURCE_URL"):
        return os.environ["SOURCE_URL"]
    remote = subprocess.run(
        ["git", "-C", str(REPO), "remote", "get-url", "origin"], capture_output=True, text=True
    ).stdout.strip()
    url = re.sub(r"\.git$", "", re.sub(r"^git@([^:]*):", r"https://\1/", remote))
    return url if url.startswith("https://") else ""
