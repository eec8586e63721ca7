"""verifier.task.dockerfile: an environment's Dockerfile with its context reads moved, and
where its context files land in the image."""

from __future__ import annotations

import pytest

from verifier.errors import UsageError
from verifier.task.dockerfile import (
    final_workdir,
    image_paths,
    parse_dockerfile,
    parse_dockerignore,
    relocate,
)


def moved(text: str) -> str:
    return relocate(parse_dockerfile(text, "Dockerfile"), "environment")


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("COPY . .", "COPY environment ."),
        ("COPY ./ /app/", "COPY environment /app/"),
        ("COPY src/ /app/src/", "COPY environment/src/ /app/src/"),
        ("COPY /abs/x.txt ../y /app/", "COPY environment/abs/x.txt environment/y /app/"),
        (
            "COPY --chown=1000:1000 --chmod=644 a b /dst/",
            "COPY --chown=1000:1000 --chmod=644 environment/a environment/b /dst/",
        ),
        (
            'COPY ["my file.txt", "/app/my file.txt"]',
            'COPY ["environment/my file.txt", "/app/my file.txt"]',
        ),
        ("COPY ${SRC} /app", "COPY environment/${SRC} /app"),
        ("ADD requirements.txt /r.txt", "ADD environment/requirements.txt /r.txt"),
        ("add lower.txt /x", "ADD environment/lower.txt /x"),
        (
            "RUN --mount=type=bind,source=req.txt,target=/r.txt pip install -r /r.txt",
            "RUN --mount=type=bind,source=environment/req.txt,target=/r.txt pip install -r /r.txt",
        ),
        (
            "RUN --mount=target=/src make -C /src",
            "RUN --mount=target=/src,source=environment make -C /src",
        ),
    ],
)
def test_context_reads_move_under_the_prefix(line: str, expected: str) -> None:
    assert moved(f"FROM debian\n{line}\n") == f"FROM debian\n{expected}\n"


@pytest.mark.parametrize(
    "line",
    [
        "COPY --from=builder /out/app /usr/local/bin/app",
        "COPY --from=docker.io/library/busybox /bin/busybox /bin/",
        "ADD https://example.com/a.tar.gz /opt/",
        "ADD git@github.com:o/r.git /src",
        "RUN --mount=type=cache,target=/root/.cache pip install x",
        "RUN --mount=type=bind,from=builder,source=/out,target=/in cp -r /in /out",
        "RUN echo COPY . .",
        "WORKDIR /app",
    ],
)
def test_what_reads_no_context_stays_as_written(line: str) -> None:
    assert moved(f"FROM debian\n{line}\n") == f"FROM debian\n{line}\n"


def test_comments_continuations_directives_and_heredocs_are_kept() -> None:
    text = (
        "# syntax=docker/dockerfile:1\n"
        "# a comment\n"
        "FROM debian:bookworm-slim AS base\n"
        "RUN apt-get update \\\n"
        "    # a comment inside\n"
        "    && apt-get install -y python3\n"
        "COPY <<EOF /etc/motd\n"
        "COPY . .\n"
        "EOF\n"
        "COPY a \\\n"
        "     b /dst/\n"
    )
    assert moved(text) == text.replace(
        "COPY a \\\n     b /dst/", "COPY environment/a environment/b /dst/"
    )


def test_a_heredoc_copy_keeps_its_body_after_the_moved_line() -> None:
    text = "FROM debian\nCOPY <<EOF notes.txt /dst/\nsecret\nEOF\n"
    assert moved(text) == "FROM debian\nCOPY <<EOF environment/notes.txt /dst/\nsecret\nEOF\n"


def test_the_backtick_escape_directive() -> None:
    text = "# escape=`\nFROM debian\nCOPY a `\n  b /dst/\n"
    assert moved(text) == "# escape=`\nFROM debian\nCOPY environment/a environment/b /dst/\n"


def test_a_file_without_from_is_no_dockerfile() -> None:
    with pytest.raises(UsageError, match="env/Dockerfile: no FROM instruction"):
        parse_dockerfile("RUN true\n", "env/Dockerfile")


FILES = ["calc.py", "tests/test_calc.py", "tests/data/x.json", "README.md", "build.tar.gz"]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("WORKDIR /app\nCOPY . .", {f"/app/{f}": f for f in FILES}),
        ("COPY . /app", {f"/app/{f}": f for f in FILES}),
        (
            "WORKDIR /app\nCOPY tests/ tests/",
            {
                "/app/tests/test_calc.py": "tests/test_calc.py",
                "/app/tests/data/x.json": "tests/data/x.json",
            },
        ),
        ("WORKDIR /srv\nWORKDIR app\nCOPY calc.py .", {"/srv/app/calc.py": "calc.py"}),
        ("COPY calc.py /app/main.py", {"/app/main.py": "calc.py"}),
        ("COPY calc.py README.md /app", {"/app/calc.py": "calc.py", "/app/README.md": "README.md"}),
        ("COPY *.py /app/", {"/app/calc.py": "calc.py"}),
        (
            "COPY test? /app/",
            {
                "/app/test_calc.py": "tests/test_calc.py",  # a dir: its contents
                "/app/data/x.json": "tests/data/x.json",
            },
        ),
        ("COPY tests/*/x.json /app/", {"/app/x.json": "tests/data/x.json"}),
        ("ADD build.tar.gz /app/", {}),
        ("COPY --from=0 /x /app/", {}),
        ("COPY . $DEST", {}),
    ],
)
def test_where_the_context_files_land(body: str, expected: dict[str, str]) -> None:
    assert image_paths(parse_dockerfile(f"FROM debian\n{body}\n", "D"), FILES) == expected


def test_the_final_stage_is_what_counts_and_inherits_its_base_stage() -> None:
    text = (
        "FROM debian AS deps\nCOPY calc.py /app/\n"
        "FROM debian AS other\nCOPY README.md /app/\n"
        "FROM deps\nWORKDIR /app\nCOPY tests tests\n"
    )
    dockerfile = parse_dockerfile(text, "D")
    assert image_paths(dockerfile, FILES) == {
        "/app/calc.py": "calc.py",
        "/app/tests/test_calc.py": "tests/test_calc.py",
        "/app/tests/data/x.json": "tests/data/x.json",
    }
    assert final_workdir(dockerfile) == "/app"


@pytest.mark.parametrize(
    ("rules", "path", "excluded"),
    [
        ("*.pyc", "a.pyc", True),
        ("*.pyc", "pkg/a.pyc", False),  # anchored at the root, as Docker reads it
        ("**/*.pyc", "pkg/deep/a.pyc", True),
        ("**/*.pyc\n!keep.pyc", "keep.pyc", False),
        ("node_modules", "node_modules/x/index.js", True),  # a dir: everything in it
        ("/build/", "build/out.o", True),
        ("# comment\n\n.git", "src/.git", False),
        ("t?st", "test", True),
        ("[!a]bc", "xbc", True),
        ("[!a]bc", "abc", False),
        ("docs/**", "docs/a/b.md", True),
    ],
)
def test_dockerignore_is_read_as_docker_reads_it(rules: str, path: str, excluded: bool) -> None:
    assert parse_dockerignore(rules).excludes(path) is excluded


def test_dockerignore_relocated_keeps_its_meaning_under_the_prefix() -> None:
    rules = parse_dockerignore("Dockerfile\n/build/\n**/__pycache__\n!keep/**\n")
    assert rules.relocated("environment") == (
        "environment/Dockerfile\nenvironment/build\nenvironment/**/__pycache__\n"
        "!environment/keep/**\n"
    )
    moved_rules = parse_dockerignore(rules.relocated("environment"))
    for path in ("Dockerfile", "build/x", "a/__pycache__/b.pyc", "keep/x", "src/x.py"):
        assert moved_rules.excludes(f"environment/{path}") is rules.excludes(path), path
