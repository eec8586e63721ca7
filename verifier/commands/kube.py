"""`verifier task kube PACKAGE DEST --image IMAGE`: Kubernetes manifests that grade a
task package's cases with its own verifier image (verifier.task.kubernetes)."""

from __future__ import annotations

from pathlib import Path

import attrs

from verifier.console import warn_all
from verifier.errors import EXIT_OK
from verifier.task.kubernetes import kube_spec, write_kube
from verifier.task.record import describe_kept


@attrs.frozen
class KubeArgs:
    """What `verifier task kube` was given (verifier.cli.options)."""

    package: Path
    dest: Path
    task_image: str
    shards: int
    force: bool


def run(args: KubeArgs) -> int:
    spec = kube_spec(args.package, args.dest, args.task_image, args.shards)
    kept = write_kube(spec, args.force)
    warn_all(describe_kept(spec.dest, kept))
    network = "llm-egress: point its rule at your endpoint" if spec.llm_egress else "no-egress"
    print(f"wrote Kubernetes manifests for {spec.task} in {spec.dest} (network: {network})")
    print("next: build the task's verifier image and push it where the cluster pulls it:")
    print(f"  podman build -t {args.task_image} {spec.package / 'tests'}")
    print(f"  podman push {args.task_image}")
    print(f"then set VERIFIER_CASE and VERIFIER_OUT in {spec.dest / 'job' / 'job.yaml'} and")
    print(f"  kubectl apply -k {spec.dest / 'job'}    # one case")
    print(
        f"  kubectl apply -k {spec.dest / 'batch'}  # the cases under /cases, {spec.shards} shards"
    )
    return EXIT_OK
