"""deploy/kubernetes, and what `verifier task kube` writes from it for a task package:
the manifests kustomize renders, checked three ways.

1. Offline against the Kubernetes API schemas (kubernetes-validate ships them), strict:
   an unknown or misplaced field fails; against the oldest release the manifests
   support (1.29: OpenShift 4.16) and the newest schema, whose rules differ (before
   1.35 a pod-condition rule needs its `status`).
2. The fields OpenShift's restricted-v2 SCC demands, and the Job settings the
   issue asks for (backoffLimit, activeDeadlineSeconds, termination message).
3. On a real engine: the Job's pod template, with its security context, volumes and
   generated ConfigMap, becomes a Pod run by `podman kube play` (PVCs swapped for
   hostPath volumes, the termination log bind-mounted the way the kubelet does) and
   must write the reward. The Indexed Job's pod gets JOB_COMPLETION_INDEX the way the
   Job controller adds it, and `$(VAR)` in its args expanded the way the kubelet does
   (podman does not), and must grade exactly its shard. The same for a coding task
   (the README walkthrough's calc): `task kube`'s Job and Indexed Job with the task's
   own verifier image, built from its package, must grade the solution 1.0 and the
   untouched repo 0.3333, as the image's user and as an OpenShift UID.

Rendering needs `kubectl` (its built-in kustomize); the podman tests also need
catatonit, which podman uses to build its pod infra image where none can be pulled.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import yaml

from verifier.batch import Shard, summary_paths
from verifier.cli.parser import run as run_cli
from verifier.errors import (
    EXIT_BUDGET,
    EXIT_CASE,
    EXIT_CONFIG,
    EXIT_DISAGREES,
    EXIT_OUTPUT,
    EXIT_SANDBOX,
)
from verifier.task import InitRequest, init_task

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy" / "kubernetes"
OVERLAYS = ("job", "batch")
CALC = REPO / "tests" / "harbor" / "tasks" / "calc"
TASK_IMAGE = "quay.io/example/calc-verifier:1"  # what the static checks' manifests name
# The oldest Kubernetes the manifests support (backoffLimitPerIndex is beta from 1.29;
# OpenShift 4.16) and the newest schema kubernetes-validate ships.
KUBERNETES_VERSIONS = ("1.29", "1.37")
IMAGE = os.environ.get("VERIFIER_IMAGE", "localhost/harbor-verifier:latest")
SECRET = "harbor-verifier-judge-keys"
OPENSHIFT_UID = 1000680000  # what restricted-v2 picks from a project's UID range
JOB_UID_LABEL = "batch.kubernetes.io/controller-uid"  # the Job controller's, on its pods


def render(overlay: str, deploy: Path = DEPLOY) -> list[dict[str, Any]]:
    if shutil.which("kubectl") is None:
        missing = "kubectl (for its built-in kustomize) is not installed"
        pytest.fail(missing) if os.environ.get("CI") else pytest.skip(missing)
    completed = subprocess.run(
        ["kubectl", "kustomize", str(deploy / overlay)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    return [doc for doc in yaml.safe_load_all(completed.stdout) if doc]


def calc_package(dest: Path, image: str) -> Path:
    """The README walkthrough's task as `verifier task init` packages it (its eval.yaml,
    tests.txt and protected tests: tests/harbor/tasks/calc, held equal to the README's
    by tests/harbor/test_readme_walkthrough.py)."""
    instruction = dest.parent / "instruction.md"
    instruction.write_text("Fix the bugs in calc.py so that the tests in tests/ pass.\n")
    return init_task(
        InitRequest(
            dest,
            CALC / "eval.yaml",
            environment=CALC / "environment",
            image=image,
            name="me/calc",
            instruction=instruction,
            protect=("tests/**",),
            verifier_network="public",
        )
    )


def task_kube(package: Path, dest: Path, image: str, shards: int = 4) -> Path:
    """`verifier task kube PACKAGE DEST --image IMAGE --shards N`, as the CLI runs it."""
    argv = [str(package), str(dest), "--image", image, "--shards", str(shards)]
    completed = subprocess.run(
        [sys.executable, "-m", "verifier", "task", "kube", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    return dest


@pytest.fixture(scope="module")
def calc_kube(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`task kube`'s manifests of the calc package (no image is built for them)."""
    root = tmp_path_factory.mktemp("calc-kube")
    package = calc_package(root / "calc-pkg", IMAGE)
    return task_kube(package, root / "calc-kube", TASK_IMAGE)


@pytest.fixture(scope="module", params=OVERLAYS)
def generic(request: pytest.FixtureRequest) -> list[dict[str, Any]]:
    """deploy/kubernetes's overlays: eval.yaml from a ConfigMap, the generic image."""
    return render(request.param)


@pytest.fixture(scope="module", params=[*OVERLAYS, *(f"task-{o}" for o in OVERLAYS)])
def rendered(request: pytest.FixtureRequest, calc_kube: Path) -> list[dict[str, Any]]:
    """Every overlay: deploy/kubernetes's, and `task kube`'s of the calc package."""
    overlay = str(request.param)
    if overlay.startswith("task-"):
        return render(overlay.removeprefix("task-"), calc_kube)
    return render(overlay)


def the(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (found,) = [doc for doc in docs if doc["kind"] == kind]
    return found


def container_of(job: dict[str, Any]) -> dict[str, Any]:
    (container,) = job["spec"]["template"]["spec"]["containers"]
    return container


# --- 1. the API schemas ---------------------------------------------------------------


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_manifests_validate_against_the_kubernetes_schemas(rendered, version: str) -> None:
    import kubernetes_validate

    examples = list(yaml.safe_load_all((DEPLOY / "volumes.example.yaml").read_text()))
    for doc in [*rendered, *examples]:
        kubernetes_validate.validate(doc, version, strict=True)


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_the_validator_rejects_a_misplaced_field(rendered, version: str) -> None:
    """The check above can fail: a pod-level field on the container is an error."""
    import kubernetes_validate

    job = copy.deepcopy(the(rendered, "Job"))
    container_of(job)["securityContext"]["fsGroup"] = 1000
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(job, version, strict=True)


def test_the_oldest_schema_rejects_a_pod_condition_rule_without_its_status(rendered) -> None:
    """What the API server of 1.29-1.34 (OpenShift 4.16-4.20) refuses, and the newest
    schema allows: so validating against the newest alone would not have caught it."""
    import kubernetes_validate

    job = copy.deepcopy(the(rendered, "Job"))
    (rule,) = [
        rule for rule in job["spec"]["podFailurePolicy"]["rules"] if "onPodConditions" in rule
    ]
    del rule["onPodConditions"][0]["status"]
    with pytest.raises(kubernetes_validate.ValidationError, match="'status' is a required"):
        kubernetes_validate.validate(job, KUBERNETES_VERSIONS[0], strict=True)
    kubernetes_validate.validate(job, KUBERNETES_VERSIONS[-1], strict=True)


# --- 2. restricted-v2 and the Job settings ------------------------------------------------


def all_keys(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield key
            yield from all_keys(value)
    elif isinstance(node, list):
        for item in node:
            yield from all_keys(item)


def test_restricted_v2(rendered) -> None:
    job = the(rendered, "Job")
    pod = job["spec"]["template"]["spec"]
    container = container_of(job)
    keys = set(all_keys(job))
    assert not keys & {"runAsUser", "runAsGroup", "fsGroup", "supplementalGroups"}
    assert not keys & {"hostPath", "hostNetwork", "hostPID", "hostIPC", "privileged"}
    assert pod["securityContext"] == {
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    volumes = {volume["name"]: volume for volume in pod["volumes"]}
    mounts = {mount["mountPath"]: mount for mount in container["volumeMounts"]}
    assert "emptyDir" in volumes[mounts["/tmp"]["name"]]
    assert pod["automountServiceAccountToken"] is False


def test_job_settings(rendered) -> None:
    job = the(rendered, "Job")
    spec = job["spec"]
    if spec.get("completionMode") == "Indexed":  # retries counted per shard
        assert "backoffLimit" not in spec
        assert spec["backoffLimitPerIndex"] >= 1
        assert 0 <= spec["maxFailedIndexes"] < spec["completions"]
    else:
        assert spec["backoffLimit"] >= 1
    assert spec["activeDeadlineSeconds"] > 0
    assert spec["template"]["spec"]["restartPolicy"] == "Never"
    rules = [rule for rule in spec["podFailurePolicy"]["rules"] if "onExitCodes" in rule]
    action_of = {code: rule["action"] for rule in rules for code in rule["onExitCodes"]["values"]}
    final = {EXIT_CONFIG, EXIT_CASE, EXIT_OUTPUT, EXIT_SANDBOX}
    expected = dict.fromkeys(final, "FailJob")
    if spec.get("completionMode") == "Indexed":  # one shard's budget or agreement
        expected |= dict.fromkeys((EXIT_DISAGREES, EXIT_BUDGET), "FailIndex")
    assert action_of == expected  # 1, 5, 11, 143: retried, counted
    container = container_of(job)
    assert {rule["onExitCodes"]["containerName"] for rule in rules} == {container["name"]}
    assert all(rule["onExitCodes"]["operator"] == "In" for rule in rules)
    assert container["terminationMessagePath"] == "/dev/termination-log"
    assert container["terminationMessagePolicy"] == "FallbackToLogsOnError"
    env = {item["name"]: item for item in container["env"]}
    assert env["VERIFIER_TERMINATION_LOG"]["value"] == "/dev/termination-log"
    # The verifier itself: a task's image has Harbor's test.sh as its command.
    assert container["command"] == ["/opt/verifier/bin/verifier"]


def test_judge_keys_come_from_an_optional_secret(rendered) -> None:
    env = {item["name"]: item for item in container_of(the(rendered, "Job"))["env"]}
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        assert env[name]["valueFrom"]["secretKeyRef"] == {
            "name": SECRET,
            "key": name,
            "optional": True,
        }


def test_volumes_config_read_only_case_writable_results(generic) -> None:
    job = the(generic, "Job")
    config_map = the(generic, "ConfigMap")
    env = {item["name"]: item.get("value") for item in container_of(job)["env"]}
    assert env["VERIFIER_CONFIG"] == "/config/eval.yaml"
    pod = job["spec"]["template"]["spec"]
    volumes = {volume["name"]: volume for volume in pod["volumes"]}
    mounts = {mount["mountPath"]: mount for mount in container_of(job)["volumeMounts"]}
    assert volumes[mounts["/config"]["name"]]["configMap"]["name"] == config_map["metadata"]["name"]
    assert config_map["metadata"]["name"].startswith("harbor-verifier-eval-")  # content hash
    assert config_map["data"]["eval.yaml"] == (DEPLOY / "common" / "eval.yaml").read_text()
    assert mounts["/config"]["readOnly"] and mounts["/cases"]["readOnly"]
    assert volumes[mounts["/cases"]["name"]]["persistentVolumeClaim"]["readOnly"] is True
    assert not mounts["/results"].get("readOnly", False)


def shard_argument(job: dict[str, Any]) -> tuple[str, int]:
    """The pod's --shard=I/N as the kubelet expands it: (I unexpanded, N)."""
    container = container_of(job)
    plain = {item["name"]: item["value"] for item in container["env"] if "value" in item}
    (shard,) = [arg for arg in container["args"] if arg.startswith("--shard=")]
    index, count = kubelet_expand(shard.removeprefix("--shard="), plain).split("/")
    return index, int(count)


def test_the_indexed_job_shards_by_completion_index() -> None:
    job = the(render("batch"), "Job")
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed"
    assert container_of(job)["args"][0] == "batch"
    index, count = shard_argument(job)
    assert index == "$(JOB_COMPLETION_INDEX)"
    assert count == spec["completions"] == spec["parallelism"]
    # With --max-cost-usd the shards share one budget, this Job's (docs/kubernetes.md).
    env = {item["name"]: item for item in container_of(job)["env"]}
    assert env["VERIFIER_BUDGET_ID"]["valueFrom"]["fieldRef"] == {
        "fieldPath": f"metadata.labels['{JOB_UID_LABEL}']"
    }


def test_the_shard_count_is_written_once(tmp_path: Path) -> None:
    """Changing `completions` alone changes the pods at once and every pod's --shard N."""
    deploy = tmp_path / "kubernetes"
    shutil.copytree(DEPLOY, deploy)
    manifest = deploy / "batch" / "indexed-job.yaml"
    text = manifest.read_text()
    assert text.count("completions: 4") == 1 and "/4" not in text and "parallelism: 4" not in text
    manifest.write_text(text.replace("completions: 4", "completions: 7"))
    job = the(render("batch", deploy), "Job")
    assert job["spec"]["completions"] == job["spec"]["parallelism"] == 7
    assert shard_argument(job) == ("$(JOB_COMPLETION_INDEX)", 7)


RECOMMENDED_LABELS = ("name", "instance", "version", "component", "part-of", "managed-by")


def test_recommended_labels_on_every_resource_and_pod(rendered) -> None:
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    job = the(rendered, "Job")
    instance = job["metadata"]["labels"]["app.kubernetes.io/instance"]
    assert instance == job["metadata"]["name"]  # one instance per overlay
    expected = {
        "app.kubernetes.io/name": "harbor-verifier",
        "app.kubernetes.io/instance": instance,
        "app.kubernetes.io/version": version,
        "app.kubernetes.io/component": "grading",
        "app.kubernetes.io/part-of": "harbor",
        "app.kubernetes.io/managed-by": "kustomize",
    }
    assert sorted(expected) == sorted(f"app.kubernetes.io/{key}" for key in RECOMMENDED_LABELS)
    for doc in [*rendered, job["spec"]["template"]]:
        labels = doc["metadata"]["labels"]
        assert {key: labels.get(key) for key in expected} == expected, doc["metadata"]


def test_the_generic_image_is_the_version_labelled(generic) -> None:
    assert container_of(the(generic, "Job"))["image"] == "quay.io/your-org/harbor-verifier:0.1.0"


def test_a_task_needs_no_config_map_its_image_holds_eval_yaml(calc_kube: Path) -> None:
    """No ConfigMap, no /config volume, no VERIFIER_CONFIG: the image's default
    (/tests/eval.yaml, where the task's tests/Dockerfile puts it) is the config."""
    for overlay in OVERLAYS:
        docs = render(overlay, calc_kube)
        job = the(docs, "Job")
        container = container_of(job)
        assert not [doc for doc in docs if doc["kind"] == "ConfigMap"]
        assert container["image"] == TASK_IMAGE
        env = {item["name"] for item in container["env"]}
        assert "VERIFIER_CONFIG" not in env
        assert not any(arg.startswith("--config") for arg in container["args"])
        volumes = {volume["name"] for volume in job["spec"]["template"]["spec"]["volumes"]}
        assert volumes == {"cases", "results", "tmp"}
    dockerfile = (calc_kube.parent / "calc-pkg" / "tests" / "Dockerfile").read_text()
    assert "ENV VERIFIER_CONFIG=/tests/eval.yaml " in dockerfile


def test_the_example_volumes_carry_the_recommended_labels() -> None:
    for doc in yaml.safe_load_all((DEPLOY / "volumes.example.yaml").read_text()):
        labels = doc["metadata"]["labels"]
        assert labels["app.kubernetes.io/name"] == "harbor-verifier"
        assert labels["app.kubernetes.io/part-of"] == "harbor"
        assert labels["app.kubernetes.io/component"] == "storage"


def selected_pods_of(policy: dict[str, Any], job: dict[str, Any]) -> bool:
    wanted = policy["spec"]["podSelector"]["matchLabels"]
    labels = job["spec"]["template"]["metadata"]["labels"]
    return bool(wanted) and wanted.items() <= labels.items()


def test_the_grading_pods_get_no_network(rendered) -> None:
    """common/eval.yaml has no LLM judges: the overlays' pods may reach nothing."""
    policy = the(rendered, "NetworkPolicy")
    assert selected_pods_of(policy, the(rendered, "Job"))
    assert policy["spec"]["policyTypes"] == ["Ingress", "Egress"]
    assert "egress" not in policy["spec"] and "ingress" not in policy["spec"]


def test_with_llm_judges_the_pods_reach_only_the_endpoint_and_dns(tmp_path: Path) -> None:
    """What docs/kubernetes.md says to do for LLM judges: swap the overlay's network component."""
    import kubernetes_validate

    deploy = tmp_path / "kubernetes"
    shutil.copytree(DEPLOY, deploy)
    kustomization = deploy / "job" / "kustomization.yaml"
    text = kustomization.read_text()
    assert "  - ../network/no-egress\n" in text
    kustomization.write_text(text.replace("../network/no-egress", "../network/llm-egress"))
    docs = render("job", deploy)
    for doc in docs:
        for version in KUBERNETES_VERSIONS:
            kubernetes_validate.validate(doc, version, strict=True)
    policy = the(docs, "NetworkPolicy")
    assert policy["metadata"]["labels"]["app.kubernetes.io/instance"] == "harbor-verifier-grade"
    assert selected_pods_of(policy, the(docs, "Job"))
    spec = policy["spec"]
    assert spec["policyTypes"] == ["Ingress", "Egress"] and "ingress" not in spec
    endpoint, dns = spec["egress"]
    assert endpoint["ports"] == [{"protocol": "TCP", "port": 8000}]
    assert endpoint["to"] == [
        {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "models"}},
            "podSelector": {"matchLabels": {"app": "vllm"}},
        }
    ]
    assert {port["port"] for port in dns["ports"]} == {53, 5353}
    assert all("ipBlock" not in peer for peer in dns["to"])  # DNS pods only, no addresses


def test_the_example_eval_yaml_loads() -> None:
    from verifier.grading import load_eval

    assert load_eval(DEPLOY / "common" / "eval.yaml").config.name == "example-report"


# --- 3. podman kube play -------------------------------------------------------------------


def kubelet_expand(text: str, env: dict[str, str]) -> str:
    """The kubelet's `$(VAR)` expansion in command and args (`$$` escapes a `$`)."""
    return re.sub(
        r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
        lambda match: "$" if match.group(0) == "$$" else env.get(match[1], match[0]),
        text,
    )


def as_podman_pod(
    docs: list[dict[str, Any]],
    name: str,
    host: dict[str, Path],
    *,
    run_as_user: int | None = None,
    completion_index: int | None = None,
    job_uid: str = "",
    extra_args: tuple[str, ...] = (),
    image: str = IMAGE,
) -> str:
    """The Job's pod template as a Pod + its ConfigMap (a task's has none), in one YAML
    for `podman kube play`.

    The cluster-side parts are emulated: PVCs become hostPath volumes, the kubelet's
    bind mount of the termination log is a hostPath File volume, an Indexed Job's
    index is injected and `$(VAR)` expanded, its pod labelled with the Job's uid as the
    Job controller labels it, OpenShift's UID is set when asked.
    """
    job = copy.deepcopy(the(docs, "Job"))
    spec = job["spec"]["template"]["spec"]
    container = container_of(job)
    container["image"] = image
    container["imagePullPolicy"] = "Never"
    for volume in spec["volumes"]:
        if "persistentVolumeClaim" in volume:
            del volume["persistentVolumeClaim"]
            volume["hostPath"] = {"path": str(host[volume["name"]]), "type": "Directory"}
    spec["volumes"].append(
        {
            "name": "termination-log",
            "hostPath": {"path": str(host["termination-log"]), "type": "File"},
        }
    )
    container["volumeMounts"].append(
        {
            "name": "termination-log",
            "mountPath": container["terminationMessagePath"],
        }
    )
    if completion_index is not None:
        container["env"].append({"name": "JOB_COMPLETION_INDEX", "value": str(completion_index)})
        plain = {item["name"]: item["value"] for item in container["env"] if "value" in item}
        container["args"] = [kubelet_expand(arg, plain) for arg in container["args"]]
    container["args"] = [*container["args"], *extra_args]
    if run_as_user is not None:
        spec["securityContext"]["runAsUser"] = run_as_user
    labels = dict(job["spec"]["template"]["metadata"]["labels"])
    if completion_index is not None:
        labels[JOB_UID_LABEL] = job_uid or str(uuid.uuid4())
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
    }
    config_maps = [doc for doc in docs if doc["kind"] == "ConfigMap"]
    return yaml.safe_dump_all([*config_maps, pod], sort_keys=False)


def podman(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["podman", *args], capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.fixture
def kube_play(built_image: str, tmp_path: Path) -> Iterator[Any]:
    """Play a pod YAML, wait for its verifier container, yield (exit code, logs); clean up."""
    if shutil.which("podman") is None:
        pytest.skip("podman is not installed")
    played: list[Path] = []

    def play(text: str, name: str) -> tuple[int, str]:
        path = tmp_path / f"{name}.yaml"
        path.write_text(text)
        played.append(path)
        started = podman("kube", "play", "--network", "none", str(path))
        if "catatonit" in started.stderr:
            pytest.fail("podman needs catatonit for its pod infra image: apt-get install catatonit")
        assert started.returncode == 0, started.stderr
        waited = podman("wait", f"{name}-verifier")
        assert waited.returncode == 0, waited.stderr
        logs = podman("logs", f"{name}-verifier")
        return int(waited.stdout.strip()), logs.stdout + logs.stderr

    yield play
    for path in played:
        podman("kube", "down", str(path))
        for doc in yaml.safe_load_all(path.read_text()):
            if doc["kind"] == "ConfigMap":  # podman keeps it as a named volume
                podman("volume", "rm", "--force", doc["metadata"]["name"])


def host_dirs(tmp_path: Path) -> dict[str, Path]:
    """Cases readable by anyone; results writable by group 0, as the pod's GID is 0."""
    host = {"cases": tmp_path / "cases", "results": tmp_path / "results"}
    for path in host.values():
        path.mkdir()
    host["results"].chmod(0o770)
    host["termination-log"] = tmp_path / "termination-log"
    host["termination-log"].write_text("")
    host["termination-log"].chmod(0o666)
    return host


def copy_case(source: Path, target: Path) -> None:
    shutil.copytree(source, target)
    for path in [target, *target.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)


@pytest.mark.integration
@pytest.mark.parametrize("run_as_user", [None, OPENSHIFT_UID], ids=["image-user", "openshift-uid"])
def test_the_job_pod_runs_on_podman_and_writes_the_reward(
    kube_play, tmp_path: Path, run_as_user: int | None
) -> None:
    docs = render("job")
    host = host_dirs(tmp_path)
    env = {item["name"]: item.get("value") for item in container_of(the(docs, "Job"))["env"]}
    case_name = Path(env["VERIFIER_CASE"]).name
    copy_case(REPO / "examples" / "case-pass", host["cases"] / case_name)
    name = f"hv-job-{uuid.uuid4().hex[:8]}"
    code, logs = kube_play(as_podman_pod(docs, name, host, run_as_user=run_as_user), name)
    assert code == 0, logs
    out = host["results"] / Path(env["VERIFIER_OUT"]).name
    expected = tmp_path / "expected"
    config = DEPLOY / "common" / "eval.yaml"
    case = host["cases"] / case_name
    assert (
        run_cli(["grade", "--config", str(config), "--case", str(case), "--out", str(expected)])
        == 0
    )
    reward = json.loads((out / "reward.json").read_text())
    assert reward == json.loads((expected / "reward.json").read_text())
    assert reward["reward"] == 1.0
    owner = (out / "reward.json").stat().st_uid
    assert owner == (run_as_user or 1001) and owner != 0
    message = host["termination-log"].read_text().strip()
    assert message.startswith("reward=1.0000  [")


@pytest.mark.integration
def test_a_case_error_fails_the_job_pod_with_exit_3(kube_play, tmp_path: Path) -> None:
    docs = render("job")
    host = host_dirs(tmp_path)  # the case dir is missing
    name = f"hv-job-{uuid.uuid4().hex[:8]}"
    code, logs = kube_play(as_podman_pod(docs, name, host), name)
    assert code == 3, logs
    assert "case directory not found" in logs
    assert not list(host["results"].rglob("reward.json"))


@pytest.mark.integration
def test_the_indexed_job_pod_grades_its_shard_on_podman(kube_play, tmp_path: Path) -> None:
    docs = render("batch")
    host = host_dirs(tmp_path)
    for index in range(24):
        source = "case-pass" if index % 2 else "case-fail"
        copy_case(REPO / "examples" / source, host["cases"] / f"case-{index:03d}")
    (host["cases"] / "case-empty").mkdir()
    job = the(docs, "Job")
    count = job["spec"]["completions"]
    index = 1
    name = f"hv-batch-{uuid.uuid4().hex[:8]}"
    uid = str(uuid.uuid4())
    pod = as_podman_pod(
        docs,
        name,
        host,
        run_as_user=OPENSHIFT_UID,
        completion_index=index,
        job_uid=uid,
        extra_args=("--max-cost-usd=1",),
    )
    code, logs = kube_play(pod, name)
    assert code == 0, logs
    shard = Shard(index, count)
    summary = json.loads(summary_paths(host["results"], shard)[0].read_text())
    owned = sorted(path.name for path in host["cases"].iterdir() if shard.owns(path.name))
    assert len(owned) >= 3
    assert [row["case"] for row in summary["cases"]] == owned
    assert summary["shard"] == f"{index}/{count}"
    # The shards' budget is the Job's own: its ledger is named by the Job's uid.
    assert summary["budget"]["shared"]["budget_id"] == uid
    assert (host["results"] / ".batch" / f"budget.{uid}.json").is_file()
    graded = sorted(path.parent.name for path in host["results"].glob("*/reward.json"))
    assert graded == owned  # an empty case dir is graded too
    message = host["termination-log"].read_text().strip()
    assert message.startswith(f"cases={len(owned)} ") and f"shard={index}/{count}" in message


# --- 4. a coding task's own image: `task kube`'s Jobs on podman ----------------------------

# The README walkthrough's cases and the rewards it shows for them (`task test`).
WALKTHROUGH = {"solution": 1.0, "untouched": 1 / 3}


def walkthrough_fix() -> str:
    """The commands of the walkthrough's solution/solve.sh that change the repo (those
    after its `cd /app`), as the README shows them."""
    from tests.harbor.test_readme_walkthrough import walkthrough_steps

    steps = walkthrough_steps((REPO / "README.md").read_text())
    (command,) = [command for command, _ in steps if "solution/solve.sh <<" in command]
    lines = command.splitlines()[1:-1]  # the heredoc's body
    return "\n".join(lines[lines.index("cd /app") + 1 :])


def calc_cases(cases: Path, copies: int = 1) -> dict[str, float]:
    """The walkthrough's two cases (untouched repo, solve.sh applied), `copies` of each,
    as a case dir would hold the agents' work: {case: the reward it must get}."""
    fix = walkthrough_fix()
    expected = {}
    for index in range(copies):
        for kind, reward in WALKTHROUGH.items():
            name = kind if copies == 1 else f"{kind}-{index}"
            case = cases / name
            shutil.copytree(CALC / "environment", case, ignore=shutil.ignore_patterns("Dockerfile"))
            if kind == "solution":
                subprocess.run(["bash", "-euo", "pipefail", "-c", fix], cwd=case, check=True)
            for path in [case, *case.rglob("*")]:
                path.chmod(0o755 if path.is_dir() else 0o644)
            expected[name] = reward
    return expected


class Built(NamedTuple):
    package: Path
    image: str  # its verifier image, built from package/tests


@pytest.fixture(scope="module")
def calc_image(built_image: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Built]:
    """The calc package and its verifier image, built from its tests/ as docs/kubernetes.md
    says (the host's network for apt-get), under a tag of its own; removed afterwards."""
    if shutil.which("podman") is None:
        pytest.skip("podman is not installed")
    package = calc_package(tmp_path_factory.mktemp("calc-image") / "calc-pkg", built_image)
    tag = f"localhost/hv-calc-{uuid.uuid4().hex[:8]}:1"
    built = podman(
        "build",
        "--pull=never",
        "--network",
        "host",
        "-q",
        "-t",
        tag,
        str(package / "tests"),
        timeout=1200,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    try:
        yield Built(package, tag)
    finally:
        podman("rmi", "--force", tag)


def restrictions(container: str) -> tuple[bool, dict[str, bool]]:
    """(whether the root filesystem is read-only, {volume mount: writable}) as the
    engine ran the container."""
    shown = podman("inspect", container)
    assert shown.returncode == 0, shown.stderr
    (found,) = json.loads(shown.stdout)
    mounts = {
        m["Destination"]: m["RW"]
        for m in found["Mounts"]
        if m["Destination"] in ("/cases", "/results")
    }
    return found["HostConfig"]["ReadonlyRootfs"], mounts


def for_case(docs: list[dict[str, Any]], case: str) -> list[dict[str, Any]]:
    """The Job with VERIFIER_CASE and VERIFIER_OUT set for one case, as docs/kubernetes.md
    says to edit job/job.yaml."""
    docs = copy.deepcopy(docs)
    for item in container_of(the(docs, "Job"))["env"]:
        if item["name"] in ("VERIFIER_CASE", "VERIFIER_OUT"):
            item["value"] = f"{item['value'].rsplit('/', 1)[0]}/{case}"
    return docs


@pytest.mark.integration
def test_the_image_writes_the_same_manifests_as_a_checkout(
    built_image: str, tmp_path: Path
) -> None:
    """deploy/kubernetes ships in the package (verifier/kubernetes): `task kube` run by
    the image's verifier writes what the checkout's does."""
    package = calc_package(tmp_path / "calc-pkg", built_image)
    (tmp_path / "out").mkdir()
    subprocess.run(["chmod", "-R", "a+rwX", str(tmp_path)], check=True)
    ran = podman(
        "run",
        "--rm",
        "--network",
        "none",
        "-v",
        f"{tmp_path}:/work",
        built_image,
        "task",
        "kube",
        "/work/calc-pkg",
        "/work/out/kube",
        "--image",
        TASK_IMAGE,
    )
    assert ran.returncode == 0, ran.stderr
    here = task_kube(package, tmp_path / "kube", TASK_IMAGE)
    written = sorted(p.relative_to(here) for p in here.rglob("*") if p.is_file())
    assert written == sorted(
        p.relative_to(tmp_path / "out" / "kube")
        for p in (tmp_path / "out" / "kube").rglob("*")
        if p.is_file()
    )
    for relative in written:
        if relative.name == ".verifier-task-init.json":
            continue
        theirs = (tmp_path / "out" / "kube" / relative).read_text()
        assert theirs == (here / relative).read_text().replace(str(package), "/work/calc-pkg"), (
            relative
        )


@pytest.mark.integration
@pytest.mark.parametrize("run_as_user", [None, OPENSHIFT_UID], ids=["image-user", "openshift-uid"])
def test_a_coding_task_job_grades_the_walkthrough_task_right(
    kube_play, calc_image: Built, tmp_path: Path, run_as_user: int | None
) -> None:
    """Each case as one Job's pod: the task's image, non-root, the case on a read-only
    volume, a read-only root filesystem: solution 1.0, untouched 0.3333."""
    image = calc_image.image
    docs = render("job", task_kube(calc_image.package, tmp_path / "calc-kube", image))
    host = host_dirs(tmp_path)
    expected = calc_cases(host["cases"])
    rewards, messages = {}, {}
    for case in expected:
        name = f"hv-calc-{uuid.uuid4().hex[:8]}"
        pod = as_podman_pod(for_case(docs, case), name, host, run_as_user=run_as_user, image=image)
        code, logs = kube_play(pod, name)
        assert code == 0, logs
        assert restrictions(f"{name}-verifier") == (True, {"/cases": False, "/results": True})
        reward_file = host["results"] / case / "reward.json"
        rewards[case] = json.loads(reward_file.read_text())
        messages[case] = host["termination-log"].read_text().strip()
        owner = reward_file.stat().st_uid
        assert owner == (run_as_user or 1001) and owner != 0
    assert {case: reward["reward"] for case, reward in rewards.items()} == pytest.approx(expected)
    assert rewards["untouched"] == pytest.approx(
        {
            "reward": 1 / 3,
            "tests_intact": 1.0,
            "nothing_planted": 1.0,
            "no_tamper": 1.0,
            "tests": 1 / 3,
        }
    )
    assert messages["untouched"].startswith("reward=0.3333  [")
    assert messages["solution"].startswith("reward=1.0000  [")


@pytest.mark.integration
def test_a_coding_task_indexed_job_grades_every_case_in_its_shards(
    kube_play, calc_image: Built, tmp_path: Path
) -> None:
    """`task kube --shards 2`: both shards' pods, as an OpenShift UID, grade every case
    once between them, each with the reward the walkthrough gives it."""
    image = calc_image.image
    docs = render("batch", task_kube(calc_image.package, tmp_path / "calc-kube", image, shards=2))
    host = host_dirs(tmp_path)
    expected = calc_cases(host["cases"], copies=3)
    assert the(docs, "Job")["spec"]["completions"] == 2
    graded: list[str] = []
    for index in range(2):
        name = f"hv-calc-batch-{uuid.uuid4().hex[:8]}"
        pod = as_podman_pod(
            docs, name, host, run_as_user=OPENSHIFT_UID, completion_index=index, image=image
        )
        code, logs = kube_play(pod, name)
        assert code == 0, logs
        summary = json.loads(summary_paths(host["results"], Shard(index, 2))[0].read_text())
        shard = [row["case"] for row in summary["cases"]]
        assert shard == sorted(case for case in expected if Shard(index, 2).owns(case))
        assert all(row["status"] == "ok" for row in summary["cases"])
        graded += shard
    assert sorted(graded) == sorted(expected)  # every case, exactly once
    rewards = {
        case: json.loads((host["results"] / case / "reward.json").read_text())["reward"]
        for case in expected
    }
    assert rewards == pytest.approx(expected)
