"""verifier.task.test_script: what `task import` reads in a task's test.sh: the
installs it does at test time (moved to build time), what still fetches, and which
reward files and CTRF report its tests write."""

from __future__ import annotations

from pathlib import Path

import pytest

from verifier.task.test_script import logical_lines, plan_script

# The shape of Harbor's own templates and of most published tasks (written here).
UV_SCRIPT = """\
#!/bin/bash
apt-get update
apt-get install -y curl
curl -LsSf https://astral.sh/uv/0.9.5/install.sh | sh
source $HOME/.local/bin/env

if [ "$PWD" = "/" ]; then
    echo "Error: No working directory set."
    exit 1
fi

uvx \\
  -p 3.13 \\
  -w pytest==8.4.1 \\
  -w pytest-json-ctrf==0.3.5 \\
  pytest --ctrf /logs/verifier/ctrf.json /tests/test_outputs.py -rA

if [ $? -eq 0 ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"""


def plan(tmp_path: Path, text: str, *others: tuple[str, str]):  # type: ignore[no-untyped-def]
    script = tmp_path / "test.sh"
    script.write_text(text)
    paths = []
    for name, body in others:
        (tmp_path / name).write_text(body)
        paths.append(tmp_path / name)
    return plan_script(script, paths)


def test_the_usual_uv_script(tmp_path: Path) -> None:
    result = plan(tmp_path, UV_SCRIPT)
    assert result.build_time == (
        "apt-get update",
        "apt-get install -y curl",
        "curl -LsSf https://astral.sh/uv/0.9.5/install.sh | sh",
        "source $HOME/.local/bin/env",
        "uvx -p 3.13 -w pytest==8.4.1 -w pytest-json-ctrf==0.3.5 pytest --version",
    )
    assert [line.number for line in result.moved] == [2, 3, 4, 12]
    assert result.fetches == ()
    assert result.reward_files == ("reward.txt",)
    assert result.ctrf == "ctrf.json"
    assert result.uses_home and result.uses_uv


@pytest.mark.parametrize(
    ("line", "build"),
    [
        ("sudo apt-get install -y jq", "sudo apt-get install -y jq"),
        ("DEBIAN_FRONTEND=noninteractive apt install -y jq", None),
        ("apk add --no-cache bash", None),
        ("pip install pytest==8.3.5", None),
        ("python3 -m pip install -q pytest", None),
        ("uv pip install --system pytest", None),
        ("uv tool install ruff", None),
        ("wget -qO- https://example.com/install.sh | bash", None),
        ("curl -fsSL https://example.com/i.sh | sudo sh", None),
        (
            "UV_PYTHON=3.12 uvx --with requests pytest -q /tests",
            "UV_PYTHON=3.12 uvx --with requests pytest --version",
        ),
        ("uv tool run --from ruff ruff check /app", "uvx --from ruff ruff --version"),
        (
            "uv run --with pytest pytest /tests",
            "uv run --no-project --with pytest pytest --version",
        ),
    ],
)
def test_installers_move_to_build_time(tmp_path: Path, line: str, build: str | None) -> None:
    result = plan(tmp_path, f"#!/bin/bash\n{line}\n")
    assert result.build_time == (build or line,)
    assert result.fetches == ()


@pytest.mark.parametrize(
    "line",
    [
        "curl -fsSL -o /tmp/data.csv https://example.com/data.csv",
        "wget https://example.com/golden.txt",
        "git clone https://example.com/repo.git /tmp/repo",
        "cd /tmp && git fetch origin",
    ],
)
def test_what_still_fetches_at_test_time(tmp_path: Path, line: str) -> None:
    result = plan(tmp_path, f"#!/bin/bash\n{line}\n")
    assert [fetch.number for fetch in result.fetches] == [2]
    assert result.build_time == ()


@pytest.mark.parametrize(
    "line",
    [
        "python3 -m pytest /tests -rA",
        "git config --global --add safe.directory '*'",
        "go test ./...",
        "echo 'apt-get install -y curl' > notes.txt",  # an argument, not the command
        'echo "unbalanced',
        "cp /tests/x_test.go /app/",
    ],
)
def test_the_rest_runs_at_test_time_as_written(tmp_path: Path, line: str) -> None:
    result = plan(tmp_path, f"#!/bin/bash\n{line}\n")
    assert result.build_time == () and result.fetches == () and result.moved == ()


def test_heredoc_bodies_are_data(tmp_path: Path) -> None:
    script = (
        "#!/bin/bash\npython3 - <<'PY'\nimport subprocess\npip install nothing\nPY\n"
        "cat <<-EOF > x\n\tapt-get install -y y\n\tEOF\napt-get install -y z\n"
    )
    result = plan(tmp_path, script)
    assert result.build_time == ("apt-get install -y z",)
    assert [line.text for line in logical_lines(script)] == [
        "python3 - <<'PY'",
        "cat <<-EOF > x",
        "apt-get install -y z",
    ]


def test_reward_files_named_by_the_tests_own_files(tmp_path: Path) -> None:
    writer = ("write.py", "json.dump(r, open('/logs/verifier/reward.json', 'w'))\n")
    assert plan(tmp_path, "python3 /tests/write.py\n", writer).reward_files == ("reward.json",)
    # Nothing names one: both are read, as Harbor reads them.
    assert plan(tmp_path, "/tests/run\n").reward_files == ("reward.json", "reward.txt")
    assert plan(tmp_path, "/tests/run\n").ctrf is None


def test_lines_that_need_root_at_test_time_are_named(tmp_path: Path) -> None:
    result = plan(tmp_path, "#!/bin/bash\nuseradd tester\nservice nginx start\nls /\n")
    assert [line.number for line in result.as_root] == [2, 3]
