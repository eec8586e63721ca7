"""Running real Harbor jobs from the tests: what they need, one job, its trials, cleanup.

Needs: Harbor in its own venv ($HARBOR_VENV, default /opt/harbor-venv: see
.ci/harbor-venv.sh), podman with podman-compose, and the verifier image
($VERIFIER_IMAGE, default localhost/harbor-verifier:latest: `make image`). The agent's
image is $HARBOR_AGENT_IMAGE, else debian:bookworm-slim when present (the verifier
image's base: `make image` bootstraps it where no registry is reachable), else the
verifier image itself, run as root.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, NamedTuple

import pytest

REPO = Path(__file__).resolve().parents[2]
HARBOR_VENV = Path(os.environ.get("HARBOR_VENV", "/opt/harbor-venv"))
HARBOR = HARBOR_VENV / "bin" / "harbor"
VERIFIER_IMAGE = os.environ.get("VERIFIER_IMAGE", "localhost/harbor-verifier:latest")
LOCAL_BASE = "docker.io/library/debian:bookworm-slim"
WORKDIR = "/app"
JOB_TIMEOUT_S = 1800
# Harbor enforces a verifier's `no-network` or `allowlist` with its egress-control
# sidecar, whose images come from a registry: where none is reachable (these machines)
# such a trial fails at start ("network_mode='no-network' is not supported by
# EnvironmentType.PODMAN environment"). The packages under test are made with
# --verifier-network public for that reason alone; task.toml's derived modes are
# checked in tests/unit/task/test_settings.py.
VERIFIER_NETWORK = "public"


class Trial(NamedTuple):
    directory: Path
    result: dict[str, Any]  # result.json

    @property
    def rewards(self) -> dict[str, float] | None:
        verifier = self.result.get("verifier_result")
        return verifier["rewards"] if verifier else None


def require(condition: bool, why: str) -> None:
    """Skip when a prerequisite is missing, but fail under CI, where it must be there."""
    if condition:
        return
    if os.environ.get("CI"):
        pytest.fail(why)
    pytest.skip(why)


def require_harbor() -> None:
    require(HARBOR.is_file(), f"{HARBOR} missing: run .ci/harbor-venv.sh")
    require(shutil.which("podman") is not None, "podman is not installed")
    require(image_exists(VERIFIER_IMAGE), f"{VERIFIER_IMAGE} missing: run `make image`")


def podman(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["podman", *args], capture_output=True, text=True, check=check)


def image_exists(image: str) -> bool:
    return podman("image", "exists", image, check=False).returncode == 0


def agent_image() -> tuple[str, bool]:
    """(image, needs root): the agent's container image, from local storage."""
    if os.environ.get("HARBOR_AGENT_IMAGE"):
        return os.environ["HARBOR_AGENT_IMAGE"], False
    if image_exists(LOCAL_BASE):
        return LOCAL_BASE, False
    return VERIFIER_IMAGE, True  # runs as a non-root USER: the agent needs root


def run_as_root(task: Path) -> None:
    """The agent runs as root (an image whose USER is not)."""
    toml = task / "task.toml"
    toml.write_text(toml.read_text().replace("[agent]\n", '[agent]\nuser = "root"\n', 1))


def harbor(
    *args: str, cwd: Path | None = None, timeout: float = 120
) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PATH": f"{HARBOR_VENV / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    }
    return subprocess.run(
        [str(HARBOR), *args], env=env, capture_output=True, text=True, timeout=timeout, cwd=cwd
    )


def run_job(
    path: Path,
    jobs: Path,
    job_name: str,
    concurrent: int = 2,
    attempts: int = 1,
    agent: str = "oracle",
) -> dict[str, Trial]:
    """`harbor run -p PATH --agent AGENT -e podman --no-delete [-k N]`: {task dir name:
    trial} (with attempts, one of each task's trials); the oracle agent runs each task's
    solution, `nop` does nothing."""
    run = harbor(
        "run",
        "-p",
        str(path),
        "--agent",
        agent,
        "-e",
        "podman",
        "--no-delete",
        "-n",
        str(concurrent),
        "-k",
        str(attempts),
        "-o",
        str(jobs),
        "--job-name",
        job_name,
        cwd=jobs.parent,
        timeout=JOB_TIMEOUT_S,
    )
    assert run.returncode == 0, f"harbor run failed:\n{run.stdout[-4000:]}\n{run.stderr[-4000:]}"
    trials = {}
    for trial in sorted((jobs / job_name).iterdir()):
        if trial.is_dir() and (trial / "result.json").is_file():
            result = json.loads((trial / "result.json").read_text())
            task = Path(json.loads((trial / "config.json").read_text())["task"]["path"]).name
            trials[task] = Trial(trial, result)
    assert trials, f"no trials in {jobs / job_name}:\n{run.stdout[-4000:]}"
    return trials


def remove_trial_images(jobs: Path) -> None:
    """--no-delete keeps the images Harbor built for these trials; remove just those."""
    if not jobs.is_dir():
        return
    trials = {p.name.lower() for p in jobs.glob("*/*") if p.is_dir()}
    listed = podman("images", "--format", "{{.Repository}}:{{.Tag}}", check=False).stdout
    for image in listed.split():
        repository = image.rsplit(":", 1)[0].rsplit("/", 1)[-1]
        if any(repository.startswith((f"{trial}__", f"{trial}_")) for trial in trials):
            podman("rmi", "--force", image, check=False)


def host_grade(
    config: Path, case: Path, out: Path, *args: str, env: dict[str, str] | None = None
) -> dict[str, float]:
    """What `verifier grade` gives on the host: reward.json."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "verifier",
            "grade",
            "--config",
            str(config),
            "--case",
            str(case),
            "--out",
            str(out),
            *args,
        ],
        check=True,
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, **(env or {})},
    )
    return json.loads((out / "reward.json").read_text())


def warm_cache(context: Path, tag: str) -> None:
    """Build context (e.g. a package's tests/) with the host's network, as `tag`, which the
    caller removes: the layers that install the environment's toolchain (apt-get) stay in
    podman's cache for the builds Harbor and `task test` run on their own network."""
    built = podman(
        "build", "--pull=never", "--network", "host", "-q", "-t", tag, str(context), check=False
    )
    assert built.returncode == 0, built.stderr[-3000:]


def agent_image_with_workdir(root: Path, tag: str) -> tuple[str, bool]:
    """(image, needs root): the agent's image with WORKDIR, built as `tag`: Harbor execs
    the agent in [environment].workdir, which a package sets when Harbor uploads
    environment/ there. The caller removes the image (podman rmi)."""
    base, as_root = agent_image()
    context = root / "agent-image"
    context.mkdir()
    (context / "Containerfile").write_text(
        f"FROM {base}\nUSER root\nRUN mkdir -p {WORKDIR} && chmod 0777 {WORKDIR}\n"
        # Its PID 1 is Harbor's `sleep infinity`, deaf to SIGTERM: stop it at once, not
        # after the engine's 10 s stop timeout.
        "STOPSIGNAL SIGKILL\n"
    )
    built = podman("build", "--pull=never", "-t", tag, str(context), check=False)
    assert built.returncode == 0, built.stderr
    return tag, as_root
