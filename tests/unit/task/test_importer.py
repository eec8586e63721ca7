"""`verifier task import`: what the package it writes holds, for Harbor tasks of every
environment shape (a Dockerfile, a compose file whose context is the task's root, an
image alone, a task that already had its own verifier image), and what it refuses.
The packages built and graded for real: tests/integration and tests/harbor."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from verifier.errors import UsageError
from verifier.grading import check_reward_keys, load_eval
from verifier.parsers import NATIVE_REWARD_KEYS, parse_reward_keys
from verifier.task.importer import (
    CONFIG_DIR,
    ImportOptions,
    import_many,
    import_task,
    import_times,
    summary_lines,
)

VERIFIER = str(Path(sys.executable).with_name("verifier"))

TASK_TOML = """\
schema_version = "1.1"
artifacts = []

[task]
name = "me/primes"
description = "Primes"
keywords = ["python"]
[[task.authors]]
name = "An Author"

[metadata]
difficulty = "easy"
expert_time_estimate_min = 5.0

[verifier]
timeout_sec = 300.0

[verifier.env]
GRADER_MODE = "strict"

[agent]
timeout_sec = 1800.0

[environment]
build_timeout_sec = 900.0
cpus = 2
memory_mb = 4096
storage_mb = 10240
allow_internet = true

[environment.env]
DATA_URL = "${DATA_URL:-none}"

[solution.env]
"""
DOCKERFILE = """\
FROM debian:bookworm-slim
ARG SECRET_BUILD_ARG=x
ENV GOFLAGS=-mod=vendor
WORKDIR /app/repo
COPY data.txt /app/repo/data.txt
"""
TEST_SH = """\
#!/bin/bash
apt-get update
apt-get install -y python3-pytest

python3 -m pytest /tests/test_outputs.py -rA
if [ $? -eq 0 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
"""


def harbor_task(root: Path, *, test_sh: str = TEST_SH, task_toml: str = TASK_TOML) -> Path:
    (root / "environment").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "solution").mkdir()
    (root / "task.toml").write_text(task_toml)
    (root / "instruction.md").write_text("Write the primes.\n")
    (root / "environment" / "Dockerfile").write_text(DOCKERFILE)
    (root / "environment" / "data.txt").write_text("1 2 3\n")
    (root / "tests" / "test.sh").write_text(test_sh)
    (root / "tests" / "test.sh").chmod(0o755)
    (root / "tests" / "test_outputs.py").write_text("def test_it():\n    assert True\n")
    (root / "solution" / "solve.sh").write_text("#!/bin/bash\necho 2 3 > /app/repo/primes.txt\n")
    (root / "README.md").write_text("notes\n")
    return root


def test_every_key_of_task_toml_is_kept_and_separate_mode_added(tmp_path: Path) -> None:
    source = harbor_task(tmp_path / "src")
    imported = import_task(source, tmp_path / "pkg")
    original = tomllib.loads(TASK_TOML)
    config = tomllib.loads((tmp_path / "pkg" / "task.toml").read_text())
    for table in ("task", "agent", "environment", "solution"):
        assert config[table] == original[table]
    assert config["metadata"] == {**original["metadata"], "verifier": "harbor-verifier"}
    assert config["schema_version"] == "1.1"
    assert config["artifacts"] == ["/app/repo"]
    verifier = config["verifier"]
    assert verifier["timeout_sec"] == 300.0
    assert verifier["environment_mode"] == "separate" and verifier["user"] == "root"
    assert verifier["network_mode"] == "no-network"
    assert verifier["env"] == {
        "GRADER_MODE": "strict",
        "VERIFIER_CASE": "/app/repo",
        "VERIFIER_DEADLINE": "240",
        "VERIFIER_REWARD_JSON": "native",
    }
    assert verifier["environment"] == {
        "cpus": 2,
        "memory_mb": 4096,
        "storage_mb": 10240,
        "env": {"DATA_URL": "${DATA_URL:-none}"},
        "build_timeout_sec": 900.0,
    }
    assert imported.name == "me/primes" and imported.notes == ()


def test_reward_json_has_the_keys_the_tasks_own_script_wrote(tmp_path: Path) -> None:
    """Harbor-native by default: `native` (reward.json: `reward`, and the keys a multi-key
    test.sh writes), which the package's eval.yaml, with its one tests/script judge, takes
    when it loads."""
    import_task(harbor_task(tmp_path / "src"), tmp_path / "pkg")
    env = tomllib.loads((tmp_path / "pkg" / "task.toml").read_text())["verifier"]["env"]
    keys = parse_reward_keys(env["VERIFIER_REWARD_JSON"])
    assert keys == NATIVE_REWARD_KEYS
    check_reward_keys(load_eval(tmp_path / "pkg" / "tests" / "eval.yaml").config, keys)


def test_the_package_carries_the_task_over_and_its_tests_as_they_were(tmp_path: Path) -> None:
    source = harbor_task(tmp_path / "src")
    dest = tmp_path / "pkg"
    import_task(source, dest)
    for relative in ("instruction.md", "README.md", "solution/solve.sh", "environment/Dockerfile"):
        assert (dest / relative).read_bytes() == (source / relative).read_bytes(), relative
    assert (dest / "tests/task-tests/test.sh").read_text() == TEST_SH
    assert os.access(dest / "tests/task-tests/test.sh", os.X_OK)
    assert (dest / "tests/environment/data.txt").read_text() == "1 2 3\n"
    assert not (dest / "tests/test.sh").exists()  # the image's own entry is /tests/test.sh


def test_eval_yaml_runs_the_tasks_own_script_with_what_it_ran_with(tmp_path: Path) -> None:
    source = harbor_task(tmp_path / "src")
    import_task(source, tmp_path / "pkg")
    document = yaml.safe_load((tmp_path / "pkg/tests/eval.yaml").read_text())
    [judge] = document["judges"]
    assert judge["builtin"] == "tests/script"
    assert judge["arguments"] == {
        "tests": "task-tests",
        "script": "test.sh",
        "case_at": "/app/repo",
        "cwd": "/app/repo",
        "reward_files": ["reward.txt"],
        "home": "/root",
        "image_env": f"{CONFIG_DIR}/image.env",
        "pass_env": ["DATA_URL", "GRADER_MODE"],
        "as_root": True,  # as Harbor runs test.sh: root (of the script's own user namespace)
        "setuid": f"{CONFIG_DIR}/setuid.list",
        "timeout": 200.0,
    }
    assert judge["timeout"] == 210.0
    assert document["reward"] == {"judge": "tests", "on_error": "fail"}


def test_the_verifier_image_does_the_test_time_installs_once(tmp_path: Path) -> None:
    source = harbor_task(tmp_path / "src")
    import_task(source, tmp_path / "pkg")
    installs = (tmp_path / "pkg/tests/test-time-installs.sh").read_text()
    assert installs.splitlines()[-2:] == ["apt-get update", "apt-get install -y python3-pytest"]
    dockerfile = (tmp_path / "pkg/tests/Dockerfile").read_text()
    lines = dockerfile.splitlines()
    assert "COPY environment/data.txt /app/repo/data.txt" in lines
    installs_at = lines.index(
        "RUN bash /tmp/verifier-test-time-installs.sh && rm -f /tmp/verifier-test-time-installs.sh"
    )
    verifier_at = lines.index("# --- the verifier ---")
    assert lines.index("WORKDIR /app/repo") < installs_at < verifier_at
    # The case's dir is emptied and the working dir set again (Harbor runs there).
    assert (
        lines[lines.index("RUN rm -rf /app/repo && mkdir -p /app/repo") + 1] == "WORKDIR /app/repo"
    )
    # The image's root-only files (an answer key) become readable to the script's user.
    readable = next(line for line in lines if line.startswith("RUN find / -xdev"))
    assert "-exec chmod o+rX {} +" in readable and "-path /etc/shadow" in readable
    assert lines.index(readable) < verifier_at
    capture = next(line for line in lines if "image.env" in line)
    assert "SECRET_BUILD_ARG" in capture  # a build ARG is not the image's variable
    # The image's setuid-root programs, listed for the script (run as its root).
    setuid = lines[lines.index(capture) + 1]
    assert "-perm -4000 -user root -print > /grading/setuid.list" in setuid
    assert 'COPY ["task-tests", "/grading/task-tests"]' in lines


def test_timeouts_share_out_the_tasks_own() -> None:
    for total in (30.0, 60.0, 120.0, 300.0, 600.0, 3600.0):
        times = import_times(total)
        assert 0 < times.script_s < times.judge_s < times.deadline_s < times.timeout_s == total
    assert import_times(600.0).deadline_s == 540.0


def test_a_compose_environment_whose_context_is_the_task_root(tmp_path: Path) -> None:
    source = harbor_task(tmp_path / "src")
    (source / "environment" / "Dockerfile").unlink()
    (source / "environment" / "docker-compose.yaml").write_text(
        "services:\n  main:\n    build:\n      context: ..\n"
        "      dockerfile: environment/agent.Dockerfile\n  db:\n    image: postgres\n"
    )
    (source / "environment" / "agent.Dockerfile").write_text(
        "FROM debian:bookworm-slim\nWORKDIR /app\nCOPY environment/data.txt /app/\n"
    )
    imported = import_task(source, tmp_path / "pkg")
    dockerfile = (tmp_path / "pkg/tests/Dockerfile").read_text()
    assert "COPY environment/environment/data.txt /app/" in dockerfile
    assert (tmp_path / "pkg/tests/environment/environment/data.txt").is_file()
    assert (tmp_path / "pkg/tests/environment/tests/test.sh").is_file()  # the root, all of it
    [note] = imported.notes
    assert "the services db run beside the agent" in note
    config = tomllib.loads((tmp_path / "pkg/task.toml").read_text())
    assert config["artifacts"] == ["/app"]


def test_an_image_alone_is_built_from(tmp_path: Path) -> None:
    source = harbor_task(
        tmp_path / "src",
        task_toml=TASK_TOML.replace(
            "cpus = 2", 'cpus = 2\ndocker_image = "org/img:1"\nworkdir = "/work"'
        ),
    )
    (source / "environment" / "Dockerfile").unlink()
    import_task(source, tmp_path / "pkg")
    dockerfile = (tmp_path / "pkg/tests/Dockerfile").read_text()
    assert "\nFROM org/img:1\n" in dockerfile
    config = tomllib.loads((tmp_path / "pkg/task.toml").read_text())
    assert config["environment"]["docker_image"] == "org/img:1"  # the agent's, kept
    assert "docker_image" not in config["verifier"]["environment"]
    assert config["artifacts"] == ["/work"]


def test_a_task_with_its_own_verifier_image_keeps_it_as_the_toolchain(tmp_path: Path) -> None:
    source = harbor_task(
        tmp_path / "src",
        task_toml=TASK_TOML.replace("artifacts = []", 'artifacts = ["/app/repo", "/logs/x.json"]'),
    )
    (source / "tests" / "Dockerfile").write_text(
        "FROM debian:bookworm-slim\nRUN echo verifier-toolchain\nCOPY . /tests/\n"
    )
    import_task(source, tmp_path / "pkg")
    dockerfile = (tmp_path / "pkg/tests/Dockerfile").read_text()
    assert "# --- tests/Dockerfile, reading its context from environment/ ---" in dockerfile
    assert "RUN echo verifier-toolchain\nCOPY environment /tests/" in dockerfile
    config = tomllib.loads((tmp_path / "pkg/task.toml").read_text())
    assert config["artifacts"] == ["/app/repo", "/logs/x.json"]
    # A separate task's own [verifier.environment] is what the tests had, not the agent's.
    assert "cpus" not in config["verifier"]["environment"]


def test_a_test_time_download_import_cannot_move_stops_it(tmp_path: Path) -> None:
    script = TEST_SH + "curl -fsSL -o /tmp/golden.txt https://example.com/golden.txt\n"
    source = harbor_task(tmp_path / "src", test_sh=script)
    with pytest.raises(UsageError, match=r"test.sh:7: `curl -fsSL -o /tmp/golden.txt .*` fetches"):
        import_task(source, tmp_path / "pkg")
    assert not (tmp_path / "pkg").exists()
    imported = import_task(source, tmp_path / "pkg", ImportOptions(verifier_network="public"))
    assert any("fetches at test time" in note for note in imported.notes)
    config = tomllib.loads((tmp_path / "pkg/task.toml").read_text())
    assert config["verifier"]["network_mode"] == "public"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda root: (root / "tests/test.sh").unlink(), "no test.sh"),
        (lambda root: (root / "task.toml").write_text("[[steps]]\nname = 'a'\n"), "multi-step"),
        (lambda root: (root / "task.toml").write_text("[environment\n"), "cannot be read"),
        (lambda root: (root / "environment/Dockerfile").unlink(), "no environment"),
        (
            lambda root: (root / "task.toml").write_text(
                '[metadata]\nverifier = "harbor-verifier"\n'
            ),
            "already graded by this image",
        ),
        (
            lambda root: (root / "environment/Dockerfile").write_text(
                "FROM debian\nWORKDIR /tests\n"
            ),
            "overlaps /tests",
        ),
    ],
)
def test_what_cannot_be_imported_is_a_clear_error(tmp_path: Path, change, message: str) -> None:  # type: ignore[no-untyped-def]
    source = harbor_task(tmp_path / "src")
    change(source)
    with pytest.raises(UsageError, match=message):
        import_task(source, tmp_path / "pkg")


def test_a_line_that_needs_root_runs_as_root_of_the_scripts_namespace(tmp_path: Path) -> None:
    source = harbor_task(tmp_path / "src", test_sh=TEST_SH + "useradd tester\n")
    imported = import_task(source, tmp_path / "pkg")
    assert imported.notes == ()
    document = yaml.safe_load((tmp_path / "pkg/tests/eval.yaml").read_text())
    assert document["judges"][0]["arguments"]["as_root"] is True


def test_a_task_whose_tests_ran_as_another_user_runs_them_unprivileged(tmp_path: Path) -> None:
    """`[verifier] user = "agent"`: not root, so not as_root, and a line that needs root
    is a note (it failed natively too)."""
    task_toml = TASK_TOML.replace("[verifier]\n", '[verifier]\nuser = "agent"\n', 1)
    assert task_toml != TASK_TOML
    source = harbor_task(
        tmp_path / "src", test_sh=TEST_SH + "useradd tester\n", task_toml=task_toml
    )
    imported = import_task(source, tmp_path / "pkg")
    assert [note.split(": ", 1)[1] for note in imported.notes] == [
        "`useradd tester` needs root, and the script runs as the task's [verifier] user, not "
        "root: that line fails at test time"
    ]
    eval_path = tmp_path / "pkg/tests/eval.yaml"
    arguments = yaml.safe_load(eval_path.read_text())["judges"][0]["arguments"]
    assert "as_root" not in arguments and "user" not in arguments
    load_eval(eval_path)  # it loads: no argument the builtin does not take


@pytest.mark.parametrize(
    ("dockerfile", "entrypoint"),
    [
        (
            'ENTRYPOINT ["/usr/local/bin/start.sh", "--quiet"]\n',
            ["/usr/local/bin/start.sh", "--quiet"],
        ),
        (
            'ENTRYPOINT service nginx start && exec "$@"\n',
            ["/bin/sh", "-c", 'service nginx start && exec "$@"'],
        ),
        ('ENTRYPOINT ["/start.sh"]\nENTRYPOINT []\n', None),
        ("", None),
    ],
)
def test_the_environments_entrypoint_runs_before_the_tests(
    tmp_path: Path, dockerfile: str, entrypoint: list[str] | None
) -> None:
    source = harbor_task(tmp_path / "src")
    path = source / "environment" / "Dockerfile"
    path.write_text(path.read_text() + dockerfile)
    import_task(source, tmp_path / "pkg")
    arguments = yaml.safe_load((tmp_path / "pkg/tests/eval.yaml").read_text())["judges"][0][
        "arguments"
    ]
    assert arguments.get("entrypoint") == entrypoint


def test_importing_again_keeps_what_the_author_changed(tmp_path: Path) -> None:
    source = harbor_task(tmp_path / "src")
    dest = tmp_path / "pkg"
    import_task(source, dest)
    with pytest.raises(UsageError, match="not empty"):
        import_task(source, dest)
    (dest / "tests/eval.yaml").write_text("# mine\n")
    (source / "tests/test_outputs.py").write_text("def test_it():\n    assert 1\n")
    import_task(source, dest, ImportOptions(force=True))
    assert (dest / "tests/eval.yaml").read_text() == "# mine\n"
    assert (dest / "tests/task-tests/test_outputs.py").read_text().endswith("assert 1\n")


def test_a_dir_of_tasks_imports_each_and_says_which_need_the_author(tmp_path: Path) -> None:
    tasks = tmp_path / "dataset"
    harbor_task(tasks / "good")
    harbor_task(tasks / "noted", test_sh=TEST_SH + "git clone https://example.com/x\n")
    broken = harbor_task(tasks / "broken")
    (broken / "tests/test.sh").unlink()
    (tasks / "dataset.toml").write_text('[dataset]\nname = "me/set"\ndescription = "three"\n')
    outcomes = import_many(tasks, tmp_path / "out", ImportOptions(verifier_network="public"))
    lines = summary_lines(outcomes)
    assert lines[0] == "imported 2 of 3 tasks: 1 cleanly, 1 with notes; 1 need the author"
    assert "  ok     good" in lines and "  notes  noted:" in lines
    assert any(line.startswith("  FAILED broken: ") and "no test.sh" in line for line in lines)
    assert {p.name for p in (tmp_path / "out").iterdir()} >= {"good", "noted", "dataset.toml"}
    manifest = tomllib.loads((tmp_path / "out/dataset.toml").read_text())
    assert manifest["dataset"]["name"] == "me/set" and len(manifest["tasks"]) == 2


def test_the_command_imports_and_a_dataset_with_a_failure_exits_2(tmp_path: Path) -> None:
    source = harbor_task(tmp_path / "set" / "one")
    done = subprocess.run(
        [VERIFIER, "task", "import", str(source), str(tmp_path / "pkg")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == f"imported Harbor task me/primes into {tmp_path / 'pkg'}"
    (harbor_task(tmp_path / "set" / "two") / "tests/test.sh").unlink()
    done = subprocess.run(
        [VERIFIER, "task", "import", str(tmp_path / "set"), str(tmp_path / "many")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "FAILED two" in done.stdout and "Traceback" not in done.stderr
    assert json.loads((tmp_path / "many/one/.verifier-task-init.json").read_text())["files"]
