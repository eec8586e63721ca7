"""`verifier task kube PACKAGE DEST --image IMAGE` from the command line: what it writes
from deploy/kubernetes for a package, what it decides from the package (network, shard
count, image), and a one-line error for each package or argument it cannot use. The
manifests' schemas, restricted-v2 and pods on podman: tests/integration/test_kubernetes.py.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.paths import REPO
from verifier.task import InitRequest, init_task

VERIFIER = str(Path(sys.executable).with_name("verifier"))
DEPLOY = REPO / "deploy" / "kubernetes"
EXAMPLE = REPO / "examples" / "eval.yaml"
LLM_EVAL = """\
name: review
judges:
  - {name: quality, llm_rubric: Is the report clear?, model: openai/gpt-4o}
"""


def kube(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [VERIFIER, "task", "kube", *args], capture_output=True, text=True, timeout=60
    )


def package(root: Path, config: Path = EXAMPLE) -> Path:
    return init_task(InitRequest(root / "pkg", config, name="org/report"))


def component(dest: Path) -> dict:
    return yaml.safe_load((dest / "common" / "kustomization.yaml").read_text())


def test_it_writes_the_generic_jobs_with_the_tasks_image_and_no_config_map(
    tmp_path: Path,
) -> None:
    dest = tmp_path / "kube"
    done = kube(str(package(tmp_path)), str(dest), "--image", "quay.io/org/report-verifier:1")
    assert done.returncode == 0, done.stderr
    assert "wrote Kubernetes manifests for org/report" in done.stdout
    assert f"podman build -t quay.io/org/report-verifier:1 {tmp_path / 'pkg' / 'tests'}" in (
        done.stdout
    )
    for relative in (
        "job/job.yaml",
        "job/kustomization.yaml",
        "network/no-egress/networkpolicy.yaml",
    ):
        assert (dest / relative).read_text() == (DEPLOY / relative).read_text()
    generic = yaml.safe_load((DEPLOY / "common" / "kustomization.yaml").read_text())
    written = component(dest)
    assert written["labels"] == generic["labels"]
    assert written["images"] == [
        {"name": "harbor-verifier", "newName": "quay.io/org/report-verifier", "newTag": "1"}
    ]
    assert "configMapGenerator" not in written and "patches" not in written
    assert not (dest / "common" / "eval.yaml").exists()


@pytest.mark.parametrize(
    ("image", "entry"),
    [
        (
            "registry.local:5000/team/calc@sha256:" + "a" * 64,
            {"newName": "registry.local:5000/team/calc", "digest": "sha256:" + "a" * 64},
        ),
        ("calc-verifier", {"newName": "calc-verifier"}),
    ],
)
def test_an_image_by_digest_or_without_a_tag(tmp_path: Path, image: str, entry: dict) -> None:
    dest = tmp_path / "kube"
    assert kube(str(package(tmp_path)), str(dest), "--image", image).returncode == 0
    assert component(dest)["images"] == [{"name": "harbor-verifier", **entry}]


def test_llm_judges_get_the_llm_egress_component_and_the_shard_count_is_set(
    tmp_path: Path,
) -> None:
    config = tmp_path / "eval.yaml"
    config.write_text(LLM_EVAL)
    dest = tmp_path / "kube"
    done = kube(str(package(tmp_path, config)), str(dest), "--image", "r/x:1", "--shards", "7")
    assert done.returncode == 0, done.stderr
    assert "network: llm-egress" in done.stdout
    for overlay in ("job", "batch"):
        kustomization = yaml.safe_load((dest / overlay / "kustomization.yaml").read_text())
        assert kustomization["components"] == ["../network/llm-egress", "../common"]
    job = yaml.safe_load((dest / "batch" / "indexed-job.yaml").read_text())
    assert job["spec"]["completions"] == 7


def test_written_again_it_keeps_what_its_author_edited(tmp_path: Path) -> None:
    pkg, dest = package(tmp_path), tmp_path / "kube"
    assert kube(str(pkg), str(dest), "--image", "r/x:1").returncode == 0
    job = dest / "job" / "job.yaml"
    edited = job.read_text().replace("/cases/case-0001", "/cases/run-42")
    job.write_text(edited)
    refused = kube(str(pkg), str(dest), "--image", "r/x:2")
    assert refused.returncode == 2
    assert (
        refused.stderr.strip()
        == f"verifier: error: {dest} is not empty: pass --force to overwrite the task's files"
    )
    again = kube(str(pkg), str(dest), "--image", "r/x:2", "--force")
    assert again.returncode == 0, again.stderr
    assert job.read_text() == edited
    assert "job/job.yaml" in again.stderr  # reported as kept
    assert component(dest)["images"][0]["newTag"] == "2"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--image", "Quay.io/Org/X"], "--image 'Quay.io/Org/X': not an image reference"),
        (["--image", "r/x:1", "--shards", "0"], "--shards"),
        ([], "task kube: missing --image"),
    ],
)
def test_bad_arguments_are_one_line_errors(tmp_path: Path, args: list[str], message: str) -> None:
    done = kube(str(package(tmp_path)), str(tmp_path / "kube"), *args)
    assert done.returncode == 2
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "kube").exists()


def test_a_dir_that_is_no_package_is_a_one_line_error(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    done = kube(str(tmp_path / "pkg"), str(tmp_path / "kube"), "--image", "r/x:1")
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"verifier: error: {tmp_path / 'pkg'}: no task.toml (make the package with `verifier task init`)"
    )
    pkg = package(tmp_path / "other")
    (pkg / "tests" / "Dockerfile").unlink()
    done = kube(str(pkg), str(tmp_path / "kube"), "--image", "r/x:1")
    assert done.returncode == 2
    assert "no tests/Dockerfile: its verifier image is built from tests/" in done.stderr


def test_a_package_whose_eval_yaml_does_not_load_is_a_config_error(tmp_path: Path) -> None:
    pkg = package(tmp_path)
    (pkg / "tests" / "eval.yaml").write_text("judges:\n  - {name: a, chek: 'return True'}\n")
    done = kube(str(pkg), str(tmp_path / "kube"), "--image", "r/x:1")
    assert done.returncode == 2
    assert "chek: unknown judge key (did you mean 'check'?)" in done.stderr
    assert not (tmp_path / "kube").exists()
