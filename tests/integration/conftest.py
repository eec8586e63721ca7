"""Fixtures for the image's integration tests: real engines, the image built once.

Engines (each test that takes `engine` runs on all of them):

- ``docker``: the docker SDK against dockerd (unix:///var/run/docker.sock);
- ``podman``: the docker SDK against podman's Docker-compatible API, served for the
  session by ``podman system service --time=0 unix://<tmp>/podman.sock``;
- ``podman-cli``: the podman command line.

The image is built once per session with ``make image`` (ENGINE picks the builder;
the Makefile copies the image to the other engine). VERIFIER_IMAGE names it,
VERIFIER_SKIP_BUILD=1 uses an existing image as is. An engine that is not
installed or not running is skipped, unless it is listed in
VERIFIER_REQUIRE_ENGINES (comma-separated, as CI does), where it is an error.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
IMAGE = os.environ.get("VERIFIER_IMAGE", "localhost/harbor-verifier:latest")
BUNDLED_PYTHON = "/opt/verifier/python/python3.11"  # the verifier's own interpreter
DOCKER_SOCKET = os.environ.get("VERIFIER_DOCKER_HOST", "unix:///var/run/docker.sock")
ENGINE_NAMES = ("docker", "podman", "podman-cli")
RUN_TIMEOUT = 120

# OpenShift restricted-v2, the way the issue spells it out.
RESTRICTED_USER = "1000680000:0"


def required_engines() -> set[str]:
    names = {n.strip() for n in os.environ.get("VERIFIER_REQUIRE_ENGINES", "").split(",")}
    names.discard("")
    if "podman" in names:
        names.add("podman-cli")
    return names


def unavailable(name: str, reason: str) -> None:
    if name in required_engines():
        pytest.fail(f"engine {name} is required (VERIFIER_REQUIRE_ENGINES) but {reason}")
    pytest.skip(f"{name}: {reason}")


# --- results and mounts -----------------------------------------------------------


@dataclass
class Result:
    exit_code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def __str__(self) -> str:
        return f"exit {self.exit_code}\n--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}"


@dataclass(frozen=True)
class Mount:
    """A bind mount (source is an absolute host path) or a named volume."""

    source: str
    target: str
    read_only: bool = False


@dataclass
class RunOptions:
    user: str | None = None
    read_only: bool = False
    tmpfs: tuple[str, ...] = ()
    cap_drop: tuple[str, ...] = ()
    security_opt: tuple[str, ...] = ()
    ulimits: tuple[str, ...] = ()  # e.g. "nproc=400:400"
    memory: str | None = None  # e.g. "300m"
    env: dict[str, str] = field(default_factory=dict)

    @classmethod
    def restricted(cls, user: str = RESTRICTED_USER) -> RunOptions:
        """--user UID:0 --read-only --tmpfs /tmp --cap-drop ALL --security-opt no-new-privileges"""
        return cls(
            user=user,
            read_only=True,
            tmpfs=("/tmp",),
            cap_drop=("ALL",),
            security_opt=("no-new-privileges",),
        )


# --- engines ------------------------------------------------------------------------


class Engine:
    """What the tests do with a container engine; every container runs --network none."""

    name: str

    def run(
        self,
        command: list[str] | None = None,
        mounts: tuple[Mount, ...] | list[Mount] = (),
        options: RunOptions | None = None,
        image: str = IMAGE,
    ) -> Result:
        raise NotImplementedError

    def run_with_diff(
        self, command: list[str] | None = None, mounts: tuple[Mount, ...] | list[Mount] = ()
    ) -> tuple[Result, list[str]]:
        """Run to completion, then list what changed in the container's own filesystem
        (`docker diff`), less what the engine itself manages and the mount points."""
        raise NotImplementedError

    def start(
        self,
        command: list[str],
        mounts: list[Mount] | tuple[Mount, ...] = (),
        user: str | None = None,
    ) -> str:
        """Start a detached container; returns its id."""
        raise NotImplementedError

    def exec(self, container: str, command: list[str], user: str | None = None) -> Result:
        raise NotImplementedError

    def remove(self, container: str) -> None:
        raise NotImplementedError

    def volume_create(self) -> str:
        raise NotImplementedError

    def volume_remove(self, name: str) -> None:
        raise NotImplementedError

    def image_inspect(self) -> dict:
        raise NotImplementedError

    def build(self, context: Path, tag: str) -> Result:
        """Build context/Containerfile as `tag` (no network: the test's own images)."""
        raise NotImplementedError

    def remove_image(self, tag: str) -> None:
        raise NotImplementedError

    def __repr__(self) -> str:
        return self.name


class SdkEngine(Engine):
    """The docker SDK, against dockerd or podman's Docker-compatible socket."""

    def __init__(self, name: str, client) -> None:
        self.name = name
        self.client = client

    @staticmethod
    def _volumes(mounts) -> dict:
        return {m.source: {"bind": m.target, "mode": "ro" if m.read_only else "rw"} for m in mounts}

    def run(self, command=None, mounts=(), options=None, image=IMAGE) -> Result:
        options = options or RunOptions()
        kwargs = {
            "network_mode": "none",
            "volumes": self._volumes(mounts),
            "environment": options.env,
            "read_only": options.read_only,
        }
        if options.user is not None:
            kwargs["user"] = options.user
        if options.tmpfs:  # "/tmp" or "/tmp:size=64m"
            kwargs["tmpfs"] = dict((*path.split(":", 1), "")[:2] for path in options.tmpfs)
        if options.ulimits:
            import docker

            kwargs["ulimits"] = [
                docker.types.Ulimit(name=name, soft=int(soft), hard=int(hard))
                for name, soft, hard in (
                    (limit.split("=")[0], *limit.split("=")[1].split(":"))
                    for limit in options.ulimits
                )
            ]
        if options.cap_drop:
            kwargs["cap_drop"] = list(options.cap_drop)
        if options.memory:
            kwargs["mem_limit"] = options.memory
        if options.security_opt:
            kwargs["security_opt"] = list(options.security_opt)
        container = self.client.containers.run(image, command, detach=True, **kwargs)
        try:
            status = container.wait(timeout=RUN_TIMEOUT)
            stdout = container.logs(stdout=True, stderr=False).decode()
            stderr = container.logs(stdout=False, stderr=True).decode()
            return Result(status["StatusCode"], stdout, stderr)
        finally:
            container.remove(force=True)

    def run_with_diff(self, command=None, mounts=()) -> tuple[Result, list[str]]:
        container = self.client.containers.run(
            IMAGE, command, detach=True, network_mode="none", volumes=self._volumes(mounts)
        )
        try:
            status = container.wait(timeout=RUN_TIMEOUT)
            result = Result(
                status["StatusCode"],
                container.logs(stdout=True, stderr=False).decode(),
                container.logs(stdout=False, stderr=True).decode(),
            )
            changes = [f"{c['Kind']} {c['Path']}" for c in container.diff() or []]
            return result, filter_changes(changes, mounts)
        finally:
            container.remove(force=True)

    def start(self, command, mounts=(), user=None) -> str:
        kwargs = {"network_mode": "none", "volumes": self._volumes(mounts)}
        if user is not None:
            kwargs["user"] = user
        return self.client.containers.run(IMAGE, command, detach=True, **kwargs).id

    def exec(self, container, command, user=None) -> Result:
        result = self.client.containers.get(container).exec_run(
            command, user=user or "", demux=True
        )
        stdout, stderr = result.output
        return Result(result.exit_code, (stdout or b"").decode(), (stderr or b"").decode())

    def remove(self, container) -> None:
        self.client.containers.get(container).remove(force=True)

    def volume_create(self) -> str:
        return self.client.volumes.create(name=f"hv-test-{uuid.uuid4().hex[:12]}").name

    def volume_remove(self, name) -> None:
        self.client.volumes.get(name).remove(force=True)

    def image_inspect(self) -> dict:
        return self.client.images.get(IMAGE).attrs

    def build(self, context, tag) -> Result:
        import docker

        try:
            _, log = self.client.images.build(
                path=str(context),
                dockerfile="Containerfile",
                tag=tag,
                rm=True,
                network_mode="none",
            )
        except docker.errors.BuildError as error:
            return Result(1, "", f"{error}\n" + "".join(str(line) for line in error.build_log))
        return Result(0, "".join(str(line.get("stream", "")) for line in log), "")

    def remove_image(self, tag) -> None:
        self.client.images.remove(tag, force=True)


class CliEngine(Engine):
    """An engine's command line (podman here): the flags exactly as a person types them."""

    def __init__(self, name: str, binary: str) -> None:
        self.name = name
        self.binary = binary

    def _cli(self, args: list[str], timeout: float = RUN_TIMEOUT) -> Result:
        proc = subprocess.run(
            [self.binary, *args], capture_output=True, text=True, timeout=timeout, check=False
        )
        return Result(proc.returncode, proc.stdout, proc.stderr)

    @staticmethod
    def _mount_args(mounts) -> list[str]:
        args = []
        for m in mounts:
            args += ["-v", f"{m.source}:{m.target}" + (":ro" if m.read_only else "")]
        return args

    def run(self, command=None, mounts=(), options=None, image=IMAGE) -> Result:
        options = options or RunOptions()
        args = ["run", "--rm", "--network", "none", *self._mount_args(mounts)]
        if options.user is not None:
            args += ["--user", options.user]
        if options.read_only:
            args.append("--read-only")
        for path in options.tmpfs:
            args += ["--tmpfs", path]
        for cap in options.cap_drop:
            args += ["--cap-drop", cap]
        for opt in options.security_opt:
            args += ["--security-opt", opt]
        for limit in options.ulimits:
            args += ["--ulimit", limit]
        if options.memory:
            args += ["--memory", options.memory]
        for key, value in options.env.items():
            args += ["-e", f"{key}={value}"]
        return self._cli([*args, image, *(command or [])])

    def run_with_diff(self, command=None, mounts=()) -> tuple[Result, list[str]]:
        name = f"hv-test-{uuid.uuid4().hex[:12]}"
        args = ["run", "--name", name, "--network", "none", *self._mount_args(mounts)]
        try:
            result = self._cli([*args, IMAGE, *(command or [])])
            diff = self._cli(["diff", "--format", "json", name])
            assert diff.exit_code == 0, str(diff)
            data = json.loads(diff.stdout or "{}")
            kinds = {"changed": 0, "added": 1, "deleted": 2}
            changes = [f"{kinds[k]} {p}" for k in kinds for p in data.get(k) or []]
            return result, filter_changes(changes, mounts)
        finally:
            self._cli(["rm", "-f", name])

    def start(self, command, mounts=(), user=None) -> str:
        args = ["run", "-d", "--network", "none", *self._mount_args(mounts)]
        if user is not None:
            args += ["--user", user]
        result = self._cli([*args, IMAGE, *command])
        assert result.exit_code == 0, str(result)
        return result.stdout.strip()

    def exec(self, container, command, user=None) -> Result:
        return self._cli(["exec", *(["--user", user] if user else []), container, *command])

    def remove(self, container) -> None:
        self._cli(["rm", "-f", "-t", "0", container])

    def volume_create(self) -> str:
        name = f"hv-test-{uuid.uuid4().hex[:12]}"
        result = self._cli(["volume", "create", name])
        assert result.exit_code == 0, str(result)
        return name

    def volume_remove(self, name) -> None:
        self._cli(["volume", "rm", "-f", name])

    def image_inspect(self) -> dict:
        result = self._cli(["image", "inspect", IMAGE])
        assert result.exit_code == 0, str(result)
        return json.loads(result.stdout)[0]

    def build(self, context, tag) -> Result:
        return self._cli(
            [
                "build",
                "--pull=never",
                "--network",
                "none",
                "-t",
                tag,
                "-f",
                str(context / "Containerfile"),
                str(context),
            ],
            timeout=600,
        )

    def remove_image(self, tag) -> None:
        self._cli(["rmi", "--force", tag])


# What engines themselves create or touch in a container's filesystem.
ENGINE_MANAGED = (
    "/etc/hosts",
    "/etc/hostname",
    "/etc/resolv.conf",
    "/run",
    "/dev",
    "/proc",
    "/sys",
)


def filter_changes(changes: list[str], mounts) -> list[str]:
    """Drop engine-managed paths, mount points and their parent dirs from a diff."""
    ignored = set(ENGINE_MANAGED) | {"/", "/etc"}  # the dirs holding them
    for m in mounts:
        target = Path(m.target)
        ignored.update(str(p) for p in [target, *target.parents])
    kept = []
    for change in changes:
        path = change.split(" ", 1)[1]
        if path in ignored or any(path.startswith(f"{root}/") for root in ENGINE_MANAGED):
            continue
        kept.append(change)
    return sorted(kept)


# --- session fixtures ------------------------------------------------------------------


@pytest.fixture(scope="session")
def built_image() -> str:
    """`make image` once per session (podman or docker, copied to the other engine)."""
    if os.environ.get("VERIFIER_SKIP_BUILD") == "1":
        return IMAGE
    if shutil.which("podman") is None and shutil.which("docker") is None:
        pytest.skip("neither podman nor docker is installed")
    proc = subprocess.run(
        ["make", "--no-print-directory", "image", f"IMAGE={IMAGE}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    print(proc.stdout, proc.stderr, sep="\n")
    if proc.returncode != 0:
        pytest.fail(f"make image failed (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return IMAGE


def _docker_client(base_url: str):
    import docker

    client = docker.DockerClient(base_url=base_url, timeout=RUN_TIMEOUT)
    client.ping()
    return client


@pytest.fixture(scope="session")
def docker_engine(built_image: str) -> Iterator[Engine]:
    try:
        client = _docker_client(DOCKER_SOCKET)
    except Exception as error:  # not installed, not running, no permission
        unavailable("docker", f"dockerd is not reachable at {DOCKER_SOCKET}: {error}")
    try:
        client.images.get(built_image)
    except Exception as error:
        unavailable("docker", f"image {built_image} is not in docker's storage: {error}")
    yield SdkEngine("docker", client)
    client.close()


@pytest.fixture(scope="session")
def podman_socket(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """podman's Docker-compatible API on a private socket, for the session."""
    if shutil.which("podman") is None:
        unavailable("podman", "podman is not installed")
    path = tmp_path_factory.mktemp("podman") / "podman.sock"
    log = open(path.with_name("service.log"), "wb")  # noqa: SIM115 (closed below)
    service = subprocess.Popen(
        ["podman", "system", "service", "--time=0", f"unix://{path}"],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while not path.exists():
            if service.poll() is not None or time.monotonic() > deadline:
                log.flush()
                text = path.with_name("service.log").read_text(errors="replace")
                pytest.fail(f"podman system service did not start:\n{text}")
            time.sleep(0.1)
        yield f"unix://{path}"
    finally:
        service.terminate()
        try:
            service.wait(timeout=15)
        except subprocess.TimeoutExpired:
            service.kill()
            service.wait()
        log.close()


@pytest.fixture(scope="session")
def podman_engine(built_image: str, podman_socket: str) -> Iterator[Engine]:
    try:
        client = _docker_client(podman_socket)
    except Exception as error:
        pytest.fail(f"podman's Docker-compatible API at {podman_socket}: {error}")
    yield SdkEngine("podman", client)
    client.close()


@pytest.fixture(scope="session")
def podman_cli_engine(built_image: str) -> Engine:
    if shutil.which("podman") is None:
        unavailable("podman-cli", "podman is not installed")
    engine = CliEngine("podman-cli", "podman")
    if engine._cli(["image", "exists", built_image]).exit_code != 0:
        unavailable("podman-cli", f"image {built_image} is not in podman's storage")
    return engine


@pytest.fixture(params=ENGINE_NAMES)
def engine(request: pytest.FixtureRequest) -> Engine:
    fixture = {
        "docker": "docker_engine",
        "podman": "podman_engine",
        "podman-cli": "podman_cli_engine",
    }[request.param]
    return request.getfixturevalue(fixture)


@pytest.fixture
def image_of(engine: Engine, tmp_path: Path):
    """Build a throwaway image from a Containerfile (and files beside it); removed after."""
    built: list[str] = []

    def build(containerfile: str, files: dict[str, str] | None = None) -> str:
        context = tmp_path / f"context-{len(built)}"
        context.mkdir()
        (context / "Containerfile").write_text(containerfile)
        for name, text in (files or {}).items():
            path = context / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            path.chmod(0o755)
        tag = f"localhost/hv-test-image:{uuid.uuid4().hex[:12]}"
        result = engine.build(context, tag)
        assert result.exit_code == 0, str(result)
        built.append(tag)
        return tag

    yield build
    for tag in built:
        engine.remove_image(tag)


# --- host-side grading and working dirs ---------------------------------------------


def host_verifier() -> str:
    """The `verifier` of the Python that runs the tests (the project's venv)."""
    candidate = Path(sys.executable).parent / "verifier"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("verifier")
    if found is None:
        pytest.fail("the host `verifier` command is not installed (make venv)")
    return found


@pytest.fixture(scope="session")
def host_rewards(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """reward.json of each example case, graded by `verifier grade` on the host."""
    rewards = {}
    for case in ("case-pass", "case-fail"):
        out = tmp_path_factory.mktemp(f"host-{case}")
        proc = subprocess.run(
            [
                host_verifier(),
                "grade",
                "--config",
                str(EXAMPLES / "eval.yaml"),
                "--case",
                str(EXAMPLES / case),
                "--out",
                str(out),
            ],
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT,
            check=False,
        )
        assert proc.returncode == 0, f"host grade of {case}: {proc.stdout}{proc.stderr}"
        rewards[case] = json.loads((out / "reward.json").read_text())
    return rewards


@pytest.fixture
def out_dir(tmp_path: Path) -> Path:
    """An output dir any container UID can write (the image runs as a non-root UID)."""
    path = tmp_path / "out"
    path.mkdir()
    path.chmod(0o777)
    return path


def shared_dir(path: Path) -> Path:
    """Create `path` readable by any container UID (pytest's tmp dirs are 0700)."""
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o755)
    return path


def shared_file(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o644)
    return path


def grade_mounts(
    case: Path, out: Path, config: Path | None = EXAMPLES / "eval.yaml"
) -> list[Mount]:
    mounts = [Mount(str(case), "/case", read_only=True), Mount(str(out), "/logs/verifier")]
    if config is not None:
        mounts.append(Mount(str(config), "/tests/eval.yaml", read_only=True))
    return mounts


def read_reward(out: Path) -> dict:
    path = out / "reward.json"
    assert path.exists(), f"no reward.json in {out}: {sorted(p.name for p in out.iterdir())}"
    return json.loads(path.read_text())
