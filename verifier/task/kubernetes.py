"""`verifier task kube PACKAGE DEST --image IMAGE`: a task package graded on Kubernetes.

A package's verifier image (built from PACKAGE/tests: the task's environment with its
toolchain, the verifier layer on top, and eval.yaml with everything it references
under /tests, its protected files and test lists included) is all a grading pod
needs: eval.yaml is $VERIFIER_CONFIG's default in it. So the manifests are the
generic ones of deploy/kubernetes (shipped with the package as verifier/kubernetes):
job/ (one case) and batch/ (an Indexed Job over a dir of cases, in shards) copied as
they are, with a common/ Component of the task's own in place of the generic one's
ConfigMap: the labels, and the image as the cluster pulls it. Nothing of eval.yaml
has to fit a ConfigMap (a flat dir of at most 1 MiB), and the pods run the same
image, non-root, as Harbor's trials of the task do.

What differs by task is decided here, from the package: the network component
(no-egress, or llm-egress when eval.yaml has an LLM judge) and the shard count.
DEST is written through a PackageWriter: run again with another image, the files
its author edited (job.yaml's case, the egress rule) are kept.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath
from typing import Any

import attrs
import yaml

from verifier.config import load_config
from verifier.errors import UsageError
from verifier.judges.kinds import KINDS
from verifier.task.package import check_dest, data_dir
from verifier.task.record import Kept, PackageWriter
from verifier.task.testing import read_package

# What DEST gets from the generic manifests as they are (relative to deploy/kubernetes).
COPIED = (
    "job/job.yaml",
    "job/kustomization.yaml",
    "batch/indexed-job.yaml",
    "batch/kustomization.yaml",
    "network/no-egress/kustomization.yaml",
    "network/no-egress/networkpolicy.yaml",
    "network/llm-egress/kustomization.yaml",
    "network/llm-egress/networkpolicy.yaml",
    "volumes.example.yaml",
)
COMMON = "common/kustomization.yaml"
GENERIC_IMAGE = "harbor-verifier"  # the name the Jobs' manifests give the image
MAX_SHARDS = 10_000
_SHARDS = re.compile(r"^(  completions: )\d+(?=\s)", re.MULTILINE)
# A reference as `podman push` and the kubelet take it: [registry[:port]/]path[:tag][@digest].
_IMAGE = re.compile(
    r"(?P<name>[a-z0-9]+(?:[._-][a-z0-9]+)*(?::[0-9]+)?(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*)"
    r"(?::(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}))?"
    r"(?:@(?P<digest>sha256:[a-f0-9]{64}))?"
)


@attrs.frozen
class ImageRef:
    """The task's image as kustomize's `images:` entry takes it."""

    name: str
    tag: str | None = None
    digest: str | None = None

    def kustomize(self) -> dict[str, str]:
        entry = {"name": GENERIC_IMAGE, "newName": self.name}
        if self.digest is not None:
            entry["digest"] = self.digest
        elif self.tag is not None:
            entry["newTag"] = self.tag
        return entry


@attrs.frozen
class KubeSpec:
    package: Path
    dest: Path
    task: str  # [task].name
    image: ImageRef
    shards: int
    llm_egress: bool  # eval.yaml has an LLM judge: its pods reach the endpoint (and DNS)


def parse_image(text: str) -> ImageRef:
    """`registry/path[:tag][@digest]` (UsageError naming --image otherwise)."""
    match = _IMAGE.fullmatch(text.strip())
    if match is None:
        raise UsageError(
            f"--image {text!r}: not an image reference; give it as the cluster pulls it, "
            "e.g. quay.io/org/calc-verifier:1"
        )
    return ImageRef(match["name"], match["tag"], match["digest"])


def kube_spec(package: Path, dest: Path, image: str, shards: int) -> KubeSpec:
    """What to write for PACKAGE; UsageError when it is no package the image can be
    built from, ConfigError (exit 2) when its eval.yaml does not load."""
    package = Path(package)
    read = read_package(package)
    for needed in ("Dockerfile", "eval.yaml"):
        if not (package / "tests" / needed).is_file():
            raise UsageError(
                f"{package}: no tests/{needed}: its verifier image is built from tests/ "
                "(make the package with `verifier task init`)"
            )
    if not 1 <= shards <= MAX_SHARDS:
        raise UsageError(f"--shards {shards}: give 1 to {MAX_SHARDS}")
    config = load_config(package / "tests" / "eval.yaml", KINDS)
    return KubeSpec(
        package=package,
        dest=Path(dest),
        task=read.name,
        image=parse_image(image),
        shards=shards,
        llm_egress=any(judge.kind == "llm" for judge in config.judges),
    )


def write_kube(spec: KubeSpec, force: bool) -> list[Kept]:
    """DEST's manifests (module docstring); the files kept because their author edited
    them."""
    check_dest(spec.dest, force)
    source = deploy_dir()
    writer = PackageWriter(spec.dest)
    for relative in COPIED:
        text = (source / relative).read_text(encoding="utf-8")
        if relative == "batch/indexed-job.yaml":
            text = _with_shards(text, spec.shards)
        elif relative.endswith("/kustomization.yaml") and spec.llm_egress:
            text = _with_llm_egress(text, relative)
        writer.write_text(PurePosixPath(relative), text)
    generic = yaml.safe_load((source / COMMON).read_text(encoding="utf-8"))
    writer.write_text(PurePosixPath(COMMON), task_component(generic, spec))
    return writer.finish()


def task_component(generic: dict[str, Any], spec: KubeSpec) -> str:
    """common/kustomization.yaml for the task: the generic Component's labels, the
    task's image, and no ConfigMap (eval.yaml is in the image)."""
    component = {
        "apiVersion": generic["apiVersion"],
        "kind": generic["kind"],
        "labels": generic["labels"],
        "images": [spec.image.kustomize()],
    }
    header = [
        f"# The Component of {spec.task}'s Jobs (job/ and batch/), written by",
        "# `verifier task kube`: the labels, and the task's verifier image as the cluster",
        f"# pulls it, built from {spec.package}/tests and pushed there:",
        f"#   podman build -t IMAGE {spec.package}/tests && podman push IMAGE",
        "# The image holds eval.yaml, the files it references and the task's toolchain",
        "# (/tests, $VERIFIER_CONFIG's default there): no ConfigMap. Run `verifier task",
        "# kube` again for a new image; what you edited here is kept.",
    ]
    return "\n".join(header) + "\n" + yaml.safe_dump(component, sort_keys=False)


def _with_shards(text: str, shards: int) -> str:
    replaced, count = _SHARDS.subn(rf"\g<1>{shards}", text)
    if count != 1:  # the shipped manifest changed: the count must stay written once
        raise RuntimeError("batch/indexed-job.yaml: `completions:` not found once")
    return replaced


def _with_llm_egress(text: str, relative: str) -> str:
    """An overlay's network component: llm-egress instead of no-egress."""
    if not relative.startswith(("job/", "batch/")):
        return text
    if text.count("../network/no-egress") != 1:
        raise RuntimeError(f"{relative}: the network component not found once")
    return text.replace("../network/no-egress", "../network/llm-egress")


def deploy_dir() -> Path:
    """deploy/kubernetes: package data when installed (verifier/kubernetes)."""
    return data_dir("kubernetes", "deploy/kubernetes", COMMON)
