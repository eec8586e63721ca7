"""verifier.task.init_task: Harbor task packages rendered from task-templates/."""

from __future__ import annotations

import os
import re
import stat
import tomllib
from pathlib import Path

import pytest
import yaml

from verifier.errors import ConfigError, UsageError
from verifier.grading import grade, load_eval
from verifier.judges.builtins import builtin_reference_files
from verifier.task import InitRequest, init_task, referenced_files, render, templates_dir

EVAL = """\
name: demo
annotations: truth/annotations.yaml
judges:
  - name: answer
    module: judges.answer
    function: check
  - name: pkg
    module: judges.pkg
    function: check
  - name: rubric
    prompt_file: prompts/rubric.md
    context: [prompts/ref.txt, {path: prompts/more.txt}]
  - name: single
    prompt: "Rate it"
    context: prompts/single.txt
  - name: inline
    check: return True
"""


@pytest.fixture
def source(tmp_path: Path) -> Path:
    root = tmp_path / "src"
    files = {
        "eval.yaml": EVAL,
        "truth/annotations.yaml": "expected: 42\n",
        "judges/__init__.py": "",
        "judges/answer.py": "from judges.helpers import norm\nfrom . import consts\nimport json\n"
        "def check(outputs): return True\n",
        "judges/helpers.py": "from .deep import x\ndef norm(s): return s\n",
        "judges/deep.py": "x = 1\n",
        "judges/consts.py": "A = 1\n",
        "judges/unused.py": "raise SystemExit\n",
        "judges/pkg/__init__.py": "from .impl import check\n",
        "judges/pkg/impl.py": "def check(outputs): return 1\n",
        "judges/pkg/data.txt": "data\n",
        "prompts/rubric.md": "Is it right?\n",
        "prompts/ref.txt": "ref\n",
        "prompts/more.txt": "more\n",
        "prompts/single.txt": "single\n",
        "unrelated.txt": "not copied\n",
    }
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (root / "truth/annotations.yaml").chmod(0o600)
    return root


def _files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


def test_renders_a_complete_separate_mode_package(tmp_path: Path, source: Path) -> None:
    dest = init_task(
        InitRequest(
            tmp_path / "task",
            source / "eval.yaml",
            image="quay.io/o/v:1.0",
            agent_image=None,
            name="org/demo",
            workdir="/work",
        )
    )
    assert _files(dest) == {
        ".verifier-task-init.json",
        "task.toml",
        "instruction.md",
        "environment/Dockerfile",
        "solution/solve.sh",
        "tests/Dockerfile",
        "tests/eval.yaml",
        "tests/truth/annotations.yaml",
        "tests/judges/__init__.py",
        "tests/judges/answer.py",
        "tests/judges/helpers.py",
        "tests/judges/deep.py",
        "tests/judges/consts.py",
        "tests/judges/pkg/__init__.py",
        "tests/judges/pkg/impl.py",
        "tests/judges/pkg/data.txt",
        "tests/judges/unused.py",
        "tests/prompts/rubric.md",
        "tests/prompts/ref.txt",
        "tests/prompts/more.txt",
        "tests/prompts/single.txt",
        "tests/unrelated.txt",
    }
    for path in dest.rglob("*"):
        if path.is_file():
            assert "{{" not in path.read_text(), path
            assert path.stat().st_mode & stat.S_IROTH, path  # the non-root verifier reads it
    assert os.access(dest / "solution/solve.sh", os.X_OK)

    config = tomllib.loads((dest / "task.toml").read_text())
    assert config["artifacts"] == ["/work"]
    assert config["task"]["name"] == "org/demo"
    # This eval.yaml does not load (a context entry as a mapping): Harbor's timeout, no
    # deadline, and no network (no judge will run)
    assert config["verifier"]["env"] == {"VERIFIER_CASE": "/work"}
    assert config["verifier"]["timeout_sec"] == 600.0
    assert config["verifier"]["network_mode"] == "no-network"
    assert "user" not in config["verifier"]
    assert config["verifier"]["environment_mode"] == "separate"
    assert "docker_image" not in config["verifier"]["environment"]
    assert "docker_image" not in config["environment"]

    dockerfile = (dest / "tests/Dockerfile").read_text()
    assert "ARG VERIFIER_IMAGE=quay.io/o/v:1.0\nFROM ${VERIFIER_IMAGE}\nCOPY . /tests/\n" in (
        dockerfile
    )
    assert dockerfile.endswith("\nSTOPSIGNAL SIGKILL\n")  # Harbor's stop: at once, not in 10 s
    for rel in _files(source):
        assert (dest / "tests" / rel).read_bytes() == (source / rel).read_bytes(), rel
    assert "WORKDIR /work" in (dest / "environment/Dockerfile").read_text()
    assert "mkdir -p /work" in (dest / "solution/solve.sh").read_text()


def test_agent_image_replaces_the_environment_dockerfile(tmp_path: Path, source: Path) -> None:
    dest = init_task(
        InitRequest(tmp_path / "task", source / "eval.yaml", agent_image="localhost/agent:1")
    )
    config = tomllib.loads((dest / "task.toml").read_text())
    assert config["environment"]["docker_image"] == "localhost/agent:1"
    assert config["artifacts"] == ["/app"]
    assert (dest / "environment").is_dir()
    assert not any((dest / "environment").iterdir())
    assert "localhost/harbor-verifier:latest" in (dest / "tests/Dockerfile").read_text()
    assert config["task"]["name"] == "local/task"


def test_instruction_file_is_used_as_is(tmp_path: Path, source: Path) -> None:
    (tmp_path / "prompt.md").write_text("Write {{answer}} to /app/answer.txt\n")
    dest = init_task(
        InitRequest(tmp_path / "task", source / "eval.yaml", instruction=tmp_path / "prompt.md")
    )
    assert (dest / "instruction.md").read_text() == "Write {{answer}} to /app/answer.txt\n"
    with pytest.raises(UsageError, match="--instruction"):
        init_task(
            InitRequest(
                tmp_path / "other", source / "eval.yaml", instruction=tmp_path / "missing.md"
            )
        )


def test_refuses_a_non_empty_dest_unless_forced(tmp_path: Path, source: Path) -> None:
    dest = tmp_path / "task"
    dest.mkdir()
    (dest / "mine.txt").write_text("keep")
    with pytest.raises(UsageError, match="not empty"):
        init_task(InitRequest(dest, source / "eval.yaml"))
    assert _files(dest) == {"mine.txt"}
    init_task(InitRequest(dest, source / "eval.yaml", force=True))
    assert (dest / "mine.txt").read_text() == "keep"
    assert (dest / "task.toml").is_file()
    # Re-rendering with an agent image drops the now-unused environment/Dockerfile.
    init_task(InitRequest(dest, source / "eval.yaml", agent_image="localhost/a", force=True))
    assert not (dest / "environment/Dockerfile").exists()
    init_task(InitRequest(tmp_path / "empty-is-fine", source / "eval.yaml"))
    (tmp_path / "file").write_text("")
    with pytest.raises(UsageError, match="not a directory"):
        init_task(InitRequest(tmp_path / "file", source / "eval.yaml", force=True))


@pytest.mark.parametrize(
    ("mutation", "key", "message"),
    [
        ("module: judges.missing", "module", "no judges/missing.py or package"),
        ("module: judges.bad-name", "module", "not a dotted module name"),
        ("prompt_file: prompts/none.md", "prompt_file", "file not found"),
        ("prompt_file: ../outside.md", "prompt_file", "relative to eval.yaml"),
        ("prompt_file: /etc/passwd", "prompt_file", "relative to eval.yaml"),
        ("context: [prompts/ref.txt, nope.txt]", "context[1]", "file not found"),
    ],
)
def test_bad_references_are_config_errors(
    tmp_path: Path, source: Path, mutation: str, key: str, message: str
) -> None:
    config = source / "bad.yaml"
    config.write_text(f"judges:\n  - name: x\n    {mutation}\n    function: f\n")
    dest = tmp_path / "task"
    with pytest.raises(ConfigError, match=re.escape(message)) as caught:
        init_task(InitRequest(dest, config))
    assert key in caught.value.key
    assert not dest.exists()  # nothing written


def test_symlink_leaving_the_config_dir_is_refused(tmp_path: Path, source: Path) -> None:
    (tmp_path / "secret.md").write_text("secret")
    (source / "prompts/link.md").symlink_to(tmp_path / "secret.md")
    config = source / "link.yaml"
    config.write_text("judges:\n  - name: x\n    prompt_file: prompts/link.md\n")
    with pytest.raises(ConfigError, match="leads outside"):
        init_task(InitRequest(tmp_path / "task", config))


def test_unreadable_or_invalid_config(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="file not found"):
        init_task(InitRequest(tmp_path / "t", tmp_path / "missing.yaml"))
    bad = tmp_path / "bad.yaml"
    bad.write_text("judges: [\n")
    with pytest.raises(ConfigError, match="invalid YAML"):
        init_task(InitRequest(tmp_path / "t", bad))
    bad.write_text("- a list\n")
    with pytest.raises(ConfigError, match="mapping"):
        init_task(InitRequest(tmp_path / "t", bad))


def test_semantically_invalid_config_is_copied_for_the_verifier_to_report(
    tmp_path: Path,
) -> None:
    config = tmp_path / "eval.yaml"
    config.write_text("judges:\n  - name: x\n    chek: return True\n")
    dest = init_task(InitRequest(tmp_path / "t", config))
    assert (dest / "tests/eval.yaml").read_text() == config.read_text()


def test_config_under_another_name_becomes_eval_yaml(tmp_path: Path, source: Path) -> None:
    config = source / "my-eval.yml"
    config.write_text("judges:\n  - name: x\n    prompt_file: prompts/rubric.md\n")
    dest = init_task(InitRequest(tmp_path / "t", config))
    assert (dest / "tests/eval.yaml").read_text() == config.read_text()
    assert not (dest / "tests/my-eval.yml").exists()


@pytest.mark.parametrize("name", ["Dockerfile", "test.sh", "eval.yaml"])
def test_reserved_names_in_tests_dir_are_refused(tmp_path: Path, name: str) -> None:
    (tmp_path / name).write_text("x")
    config = tmp_path / "config.yaml"
    config.write_text(f"judges:\n  - name: x\n    prompt_file: {name}\n")
    with pytest.raises(ConfigError, match="reserves"):
        init_task(InitRequest(tmp_path / "t", config))


@pytest.mark.parametrize(
    "workdir", ["app", "/", "/a b", "/app/../etc", "/tests", "/logs/x", "/opt", "/case"]
)
def test_bad_workdir(tmp_path: Path, source: Path, workdir: str) -> None:
    with pytest.raises(UsageError, match="--workdir"):
        init_task(InitRequest(tmp_path / "t", source / "eval.yaml", workdir=workdir))


@pytest.mark.parametrize("name", ["noslash", "a/b/c", "/x", "a/../b", "a/b c"])
def test_bad_name(tmp_path: Path, source: Path, name: str) -> None:
    with pytest.raises(UsageError, match="--name"):
        init_task(InitRequest(tmp_path / "t", source / "eval.yaml", name=name))


def test_bad_image(tmp_path: Path, source: Path) -> None:
    with pytest.raises(UsageError, match="--agent-image"):
        init_task(InitRequest(tmp_path / "t", source / "eval.yaml", agent_image="x\nRUN evil"))


def test_referenced_files_are_relative_and_sorted(source: Path) -> None:
    files = [str(p) for p in referenced_files(source / "eval.yaml", builtin_reference_files)]
    assert files == sorted(files)
    assert "judges/pkg" in files and "judges/pkg/impl.py" not in files
    assert "judges/unused.py" not in files and "unrelated.txt" not in files


def test_templates_have_only_known_placeholders() -> None:
    root = templates_dir()
    assert (root / "task.toml").is_file()
    names = set()
    for path in root.rglob("*"):
        if path.is_file():
            names |= set(re.findall(r"\{\{\s*([a-z_]+)\s*\}\}", path.read_text()))
    assert names == {
        "name",
        "name_toml",
        "workdir",
        "workdir_toml",
        "image",
        "environment_toml",
        "verifier_env_toml",
        "metadata_toml",
        "agent_timeout",
        "root_toml",
        "steps_toml",
        "environment_copy",
        "verifier_timeout",
        "verifier_toml",
        "verifier_image_note",
    }
    with pytest.raises(KeyError):
        render("{{nope}}", {})


def test_the_package_bakes_in_a_trusted_task_input(tmp_path: Path, source: Path) -> None:
    """The instruction becomes the input's prompt, unless --input or eval.yaml gives one."""
    instruction = tmp_path / "instruction.md"
    instruction.write_text("Fix the parser.\n")
    dest = init_task(InitRequest(tmp_path / "a", source / "eval.yaml", instruction=instruction))
    assert yaml.safe_load((dest / "tests/input.yaml").read_text()) == {
        "prompt": "Fix the parser.\n"
    }
    given = tmp_path / "given.yaml"
    given.write_text("prompt: Fix it\nrepo: parser\n")
    dest = init_task(InitRequest(tmp_path / "b", source / "eval.yaml", task_input=given))
    assert (dest / "tests/input.yaml").read_text() == given.read_text()
    (source / "input.yaml").write_text("prompt: from beside eval.yaml\n")
    with pytest.raises(UsageError, match="already has its task input"):
        init_task(InitRequest(tmp_path / "c", source / "eval.yaml", task_input=given))
    dest = init_task(InitRequest(tmp_path / "d", source / "eval.yaml"))
    assert (dest / "tests/input.yaml").read_text() == "prompt: from beside eval.yaml\n"


# --- tests/ is eval.yaml's whole directory ---------------------------------------------


def test_a_data_file_a_judge_module_reads_comes_along(tmp_path: Path) -> None:
    """No scan of eval.yaml names data/words.txt: copying the directory is what makes the
    package load and grade as it does beside the original eval.yaml."""
    source = tmp_path / "src"
    (source / "judges").mkdir(parents=True)
    (source / "data").mkdir()
    (source / "eval.yaml").write_text(
        "judges:\n  - name: known\n    module: judges.known\n    function: check\n"
    )
    (source / "judges" / "known.py").write_text(
        "from pathlib import Path\n"
        "WORDS = (Path(__file__).parent.parent / 'data' / 'words.txt').read_text().split()\n"
        "def check(outputs):\n"
        "    return outputs['files'].get('answer.txt', '').strip() in WORDS\n"
    )
    (source / "data" / "words.txt").write_text("alpha beta\n")
    dest = init_task(InitRequest(tmp_path / "task", source / "eval.yaml"))
    assert (dest / "tests/data/words.txt").read_text() == "alpha beta\n"
    case = tmp_path / "case"
    case.mkdir()
    (case / "answer.txt").write_text("beta\n")
    graded = grade(load_eval(dest / "tests/eval.yaml"), case)
    assert graded.reward == 1.0


# What nothing grading reads: VCS, caches, environments, editor leftovers, Harbor's rules.
LEFTOVERS = (
    ".git/HEAD",
    "judges/__pycache__/answer.cpython-311.pyc",
    "notes.md~",
    ".harborignore",
    "node_modules/x/index.js",
    ".venv/bin/python",
    "prompts/x.swp",
)


def test_vcs_caches_leftovers_and_the_package_itself_stay_out(
    tmp_path: Path, source: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for rel in LEFTOVERS:
        (source / rel).parent.mkdir(parents=True, exist_ok=True)
        (source / rel).write_text("x")
    (source / "Dockerfile").write_text("FROM scratch\n")  # the package's own name in tests/
    (source / "test.sh").write_text("exit 0\n")
    (source / "inside.md").symlink_to(source / "prompts/ref.txt")
    (tmp_path / "secret.txt").write_text("secret")
    (source / "outside.md").symlink_to(tmp_path / "secret.txt")
    (source / "linked-dir").symlink_to(source / "prompts")
    os.mkfifo(source / "pipe")
    dest = init_task(InitRequest(source / "tasks" / "one", source / "eval.yaml"))  # inside the dir
    copied = _files(dest / "tests")
    assert "inside.md" in copied and (dest / "tests/inside.md").read_text() == "ref\n"
    assert not (dest / "tests/inside.md").is_symlink()
    for left_out in (
        *LEFTOVERS,
        "test.sh",
        "outside.md",
        "pipe",
    ):
        assert left_out not in copied, left_out
    assert not any(rel.startswith(("tasks/", "linked-dir/")) for rel in copied)
    assert (dest / "tests/Dockerfile").read_text().startswith("# The verifier's image")
    warnings = capsys.readouterr().err
    for name in ("Dockerfile", "test.sh", "outside.md", "linked-dir", "pipe"):
        assert f"{source / name}: " in warnings, name
    assert "secret" not in "".join(p.read_text() for p in (dest / "tests").rglob("*.md"))


def test_a_big_directory_is_worth_a_warning(
    tmp_path: Path,
    source: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("verifier.task.tests_dir.TESTS_SIZE_WARNING", 100)
    init_task(InitRequest(tmp_path / "task", source / "eval.yaml"))
    assert "every verifier image of the task carries it" in capsys.readouterr().err


def test_a_reference_outside_the_directory_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "shared.md").write_text("shared rubric")
    (tmp_path / "suite").mkdir()
    config = tmp_path / "suite" / "eval.yaml"
    config.write_text("judges:\n  - name: x\n    prompt_file: ../shared.md\n")
    with pytest.raises(ConfigError, match=r"prompt_file: '../shared.md' must be a path relative"):
        init_task(InitRequest(tmp_path / "task", config))
    assert not (tmp_path / "task").exists()
