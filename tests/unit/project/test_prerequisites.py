"""`make demo` and `make test` on a machine without what they need: where they cannot set
it up (not root, or no apt-get), they stop within a second, printing the exact commands.

Real make, the real Makefile and scripts/prerequisites.sh (copied where `nobody` can read
them), on a PATH that holds the basic tools but no engine and no apt-get (so nothing is
installed by these tests); the non-root runs drop to `nobody` with setpriv when the
tests run as root.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.paths import REPO

TOOLS = (
    "bash",
    "sh",
    "env",
    "make",
    "python3",
    "git",
    "sed",
    "head",
    "id",
    "timeout",
    "grep",
    "tail",
    "sort",
    "paste",
    "dirname",
    "mktemp",
    "rm",
    "cat",
    "tr",
)
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
NOBODY = 65534
PODMAN_PACKAGES = "ca-certificates catatonit fuse-overlayfs podman runc slirp4netns uidmap"


@pytest.fixture
def bare() -> Iterator[tuple[Path, str]]:
    """(a copy of what make reads, a PATH of symlinks to the basic tools: no podman,
    docker, dockerd or apt-get), where `nobody` can read them: pytest's tmp dirs and
    a checkout under /root are private."""
    with tempfile.TemporaryDirectory(prefix="bare-machine-") as directory:
        top = Path(directory)
        top.chmod(0o755)
        checkout = top / "checkout"
        for name in ("Makefile", "pyproject.toml", "scripts/prerequisites.sh"):
            (checkout / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(REPO / name, checkout / name)
        bin_dir = top / "bin"
        bin_dir.mkdir()
        for tool in TOOLS:
            found = shutil.which(tool, path=SYSTEM_PATH)
            assert found is not None, tool
            (bin_dir / tool).symlink_to(found)
        for path in [checkout, *checkout.rglob("*"), bin_dir]:
            path.chmod(path.stat().st_mode | 0o555 if path.is_dir() else 0o644)
        yield checkout, str(bin_dir)


def stopped_at_once(target: str, bare: tuple[Path, str], *, as_nobody: bool) -> tuple[str, str]:
    """`make TARGET` must fail within a second; its (stdout, stderr)."""
    checkout, path = bare
    command = [
        "make",
        "--no-print-directory",
        "-C",
        str(checkout),
        target,
        "IMAGE=localhost/harbor-verifier:prerequisites-test",
    ]
    if as_nobody and os.getuid() == 0:
        setpriv = shutil.which("setpriv") or "setpriv"
        command = [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *command]
    environ = {"PATH": path, "HOME": "/nonexistent", "LANG": "C.UTF-8"}
    started = time.monotonic()
    completed = subprocess.run(command, capture_output=True, text=True, env=environ, timeout=30)
    assert time.monotonic() - started < 1.0
    assert completed.returncode != 0, completed.stdout
    return completed.stdout, completed.stderr


def test_make_demo_without_an_engine_or_root_prints_the_commands(bare: tuple[Path, str]) -> None:
    output, message = stopped_at_once("demo", bare, as_nobody=True)
    assert "  podman: not installed\n" in message
    assert "Only root can set them up. Run the same make command as root (sudo)" in message
    assert "  bash scripts/prerequisites.sh podman\n" in message
    assert (
        f"  apt-get update && apt-get install -y --no-install-recommends {PODMAN_PACKAGES}\n"
        in message
    )
    assert "cat >/etc/containers/containers.conf <<'EOF'\n[containers]\n" in message
    assert 'runtime = "runc"\ncgroup_manager = "cgroupfs"\nevents_logger = "file"\nEOF\n' in message
    assert "image:" not in output  # nothing was built


def test_make_test_without_engines_stops_before_anything_else(bare: tuple[Path, str]) -> None:
    output, message = stopped_at_once("test", bare, as_nobody=True)
    assert "  podman: not installed\n  docker: not installed\n" in message
    assert "  bash scripts/prerequisites.sh podman docker" in message
    (install,) = [line for line in message.splitlines() if "apt-get install" in line]
    assert {*PODMAN_PACKAGES.split(), "docker.io"} <= set(install.split())
    assert "  nohup dockerd --exec-opt native.cgroupdriver=cgroupfs" in message
    assert "ruff" not in output  # lint did not start


def test_as_root_without_apt_get_it_says_so(bare: tuple[Path, str]) -> None:
    if os.getuid() != 0:
        pytest.skip("needs root: the non-root message is tested above")
    _, message = stopped_at_once("demo", bare, as_nobody=False)
    assert "There is no apt-get here to set them up" in message
    assert "  bash scripts/prerequisites.sh podman\n" in message
