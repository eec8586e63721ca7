"""The image grading with an LLM judge against a local endpoint on the host network.

A server of tests/llm_servers.py listens on 127.0.0.1 in the test process; the
container runs with --network host (and OpenShift-style restrictions), so the
endpoint is the same 127.0.0.1 URL a sidecar or an in-cluster vLLM would give.
API keys are passed by name (`-e OPENAI_API_KEY`), as a Kubernetes Secret's
secretKeyRef does, and must not appear in anything the container prints or writes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.llm_servers import FakeLLM, serve

from .conftest import RESTRICTED_USER, read_reward, shared_dir, shared_file, unavailable

pytestmark = pytest.mark.integration

KEYS = {
    "OPENAI_API_KEY": "sk-container-openai-0123456789abcdefghij",
    "ANTHROPIC_API_KEY": "sk-ant-container-0123456789abcdefghijkl",
}
EVAL = textwrap.dedent("""
    name: llm-container
    outputs:
      - path: report.md
    judges:
      - name: quality
        llm_rubric: Does the report say what was broken and how it was fixed?
        score_range: [1, 5]
        model: {model}
        timeout: 30
""")
# Which VERIFIER_REQUIRE_ENGINES name makes a missing engine an error.
REQUIRED_AS = {"podman": "podman-cli", "docker": "docker"}


@pytest.fixture(params=["openai", "anthropic"])
def endpoint(request: pytest.FixtureRequest) -> Iterator[FakeLLM]:
    yield from serve(request.param)


@pytest.fixture(params=["podman", "docker"])
def cli(request: pytest.FixtureRequest, built_image: str) -> str:
    """An engine's command line that has the image (the Makefile copies it to both)."""
    name = request.param
    binary = shutil.which(name)
    if binary is None:
        unavailable(REQUIRED_AS[name], f"{name} is not installed")
    probe = subprocess.run(
        [binary, "image", "inspect", built_image], capture_output=True, timeout=60, check=False
    )
    if probe.returncode != 0:
        unavailable(REQUIRED_AS[name], f"image {built_image} is not in {name}'s storage")
    return binary


def test_image_grades_an_llm_rubric_through_the_host_network(
    cli: str, endpoint: FakeLLM, built_image: str, tmp_path: Path
) -> None:
    config_dir = shared_dir(tmp_path / "tests")
    shared_file(config_dir / "eval.yaml", EVAL.format(model=f"{endpoint.style}/grader"))
    case = shared_dir(tmp_path / "case")
    shared_file(case / "report.md", "The parser crashed on empty input; fixed with a guard.\n")
    out = shared_dir(tmp_path / "out")
    out.chmod(0o777)
    endpoint.queue(endpoint.grade(score=4, rationale="Clear cause and fix."))

    variable = "OPENAI_BASE_URL" if endpoint.style == "openai" else "ANTHROPIC_BASE_URL"
    command = [
        cli, "run", "--rm", "--network", "host",
        "--user", RESTRICTED_USER, "--read-only", "--tmpfs", "/tmp",
        "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
        "-v", f"{config_dir}:/tests:ro", "-v", f"{case}:/case:ro", "-v", f"{out}:/logs/verifier",
        "-e", f"{variable}={endpoint.url}",
        "-e", "OPENAI_API_KEY", "-e", "ANTHROPIC_API_KEY",  # by name, from the environment
        built_image,
    ]  # fmt: skip
    completed = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, **KEYS},
    )
    assert completed.returncode == 0, f"{completed.stdout}\n{completed.stderr}"
    assert completed.stdout.splitlines()[0] == "reward=0.7500  [quality=4.0]"
    assert read_reward(out) == {"reward": 0.75, "quality": 4.0}
    quality = json.loads((out / "judges.json").read_text())["per_judge"]["quality"]
    assert quality["status"] == "ok" and quality["rationale"] == "Clear cause and fix."
    assert quality["model"] == "grader" and quality["provider"] == endpoint.style

    (request,) = endpoint.received
    sent = request.headers.get("authorization", "") + request.headers.get("x-api-key", "")
    expected_key = KEYS["OPENAI_API_KEY" if endpoint.style == "openai" else "ANTHROPIC_API_KEY"]
    assert expected_key in sent
    outputs = {"stdout": completed.stdout, "stderr": completed.stderr}
    outputs.update({path.name: path.read_text() for path in out.iterdir()})
    for where, text in outputs.items():
        for key in KEYS.values():
            assert key not in text, f"an API key leaked into {where}"
