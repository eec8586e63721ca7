"""`verifier task kube PACKAGE DEST --image IMAGE`: Kubernetes manifests that grade a
task package's cases with its own verifier image (verifier.task.kubernetes)."""

from __future__ import annotations

from verifier.console import warn_all
from verifier.errors import EXIT_OK
from verifier.options import Options
from verifier.task.kubernetes import kube_spec, write_kube
from verifier.task.record import describe_kept


def run(options: Options) -> int:
    assert options.package is not None and options.dest is not None
    assert options.task_image is not None
    spec = kube_spec(options.package, options.dest, options.task_image, options.shards)
    kept = write_kube(spec, options.force)
    warn_all(describe_kept(spec.dest, kept))
    network = "llm-egress: point its rule at your endpoint" if spec.llm_egress else "no-egress"
    print(f"wrote Kubernetes manifests for {spec.task} in {spec.dest} (network: {network})")
    print("next: build the task's verifier image and push it where the cluster pulls it:")
    print(f"  podman build -t {options.task_image} {spec.package / 'tests'}")
    print(f"  podman push {options.task_image}")
    print(f"then set VERIFIER_CASE and VERIFIER_OUT in {spec.dest / 'job' / 'job.yaml'} and")
    print(f"  kubectl apply -k {spec.dest / 'job'}    # one case")
    print(
        f"  kubectl apply -k {spec.dest / 'batch'}  # the cases under /cases, {spec.shards} shards"
    )
    return EXIT_OK
