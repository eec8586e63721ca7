"""The verifier as a self-contained layer: /opt/verifier runs on any image.

docker/bundle.sh builds /opt/verifier from Debian's python3 with its own loader,
libraries, stdlib and dependencies. Here it is copied onto images the verifier could
meet as a Harbor task's environment and graded with, as `verifier task init
--environment` packages do (COPY --from=<verifier image> /opt/verifier):

- an image with nothing at all (FROM scratch: no libc, no shell, no Python);
- an image with its own `python3` on PATH and hostile PYTHON* variables: the verifier
  ignores both, and a command judge's `python3` is the image's, never the verifier's.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.conftest import (
    BUNDLED_PYTHON,
    EXAMPLES,
    IMAGE,
    Engine,
    Mount,
    RunOptions,
    grade_mounts,
    read_reward,
    shared_dir,
    shared_file,
)

pytestmark = pytest.mark.integration


def test_the_verifier_needs_nothing_of_the_image(
    engine: Engine, image_of, out_dir: Path, host_rewards
) -> None:
    """FROM scratch: no libc, no dynamic loader, no shell, no Python; only the layer."""
    image = image_of(f"FROM scratch\nCOPY --from={IMAGE} /opt/verifier /opt/verifier\n")
    command = [
        BUNDLED_PYTHON,
        "-I",
        "-m",
        "verifier",
        "grade",
        "--config",
        "/tests/eval.yaml",
        "--case",
        "/case",
        "--out",
        "/logs/verifier",
    ]
    result = engine.run(
        command,
        mounts=grade_mounts(EXAMPLES / "case-pass", out_dir),
        options=RunOptions(user="1000680000:0", read_only=True, tmpfs=("/tmp",)),
        image=image,
    )
    assert result.exit_code == 0, str(result)
    assert read_reward(out_dir) == host_rewards["case-pass"]


FAKE_PYTHON = "#!/bin/sh\necho the image python\n"
HOSTILE_SITE = "raise SystemExit('the image site ran in the verifier')\n"
PATH_EVAL = """\
name: which-python
judges:
  - name: image_python
    builtin: command_output_matches
    arguments: {command: python3, expected: the image python}
  - name: no_verifier_python
    builtin: command_succeeds
    arguments: {command: '! command -v python3.11'}
"""


def test_the_images_python_and_variables_do_not_reach_the_verifier(
    engine: Engine, image_of, tmp_path: Path, out_dir: Path
) -> None:
    """An image's python3 on PATH, PYTHONPATH/PYTHONHOME/PYTHONSTARTUP naming its own
    site: the verifier runs on its own Python regardless, and the command judge's
    `python3` is the image's one."""
    image = image_of(
        f"FROM {IMAGE}\nUSER root\nCOPY python3 /usr/local/bin/python3\n"
        "COPY evil/sitecustomize.py /evil/sitecustomize.py\nUSER 1001:0\n",
        {"python3": FAKE_PYTHON, "evil/sitecustomize.py": HOSTILE_SITE},
    )
    config = shared_file(shared_dir(tmp_path / "tests") / "eval.yaml", PATH_EVAL)
    case = shared_dir(tmp_path / "case")
    shared_file(case / "notes.txt", "the agent's work\n")
    hostile = {
        "PYTHONPATH": "/evil",
        "PYTHONHOME": "/evil",
        "PYTHONSTARTUP": "/evil/x.py",
        "PYTHONSAFEPATH": "",
        "PYTHONNOUSERSITE": "",
    }
    result = engine.run(
        mounts=[
            Mount(str(case), "/case", read_only=True),
            Mount(str(out_dir), "/logs/verifier"),
            Mount(str(config), "/tests/eval.yaml", read_only=True),
        ],
        options=RunOptions(env=hostile),
        image=image,
    )
    assert result.exit_code == 0, str(result)
    assert read_reward(out_dir)["image_python"] == 1.0
    assert read_reward(out_dir)["no_verifier_python"] == 1.0


PLANTED_VERIFIER = """\
import os, pathlib
pathlib.Path("/logs/verifier/reward.json").write_text('{"reward": 1.0}')
os._exit(0)
"""


def test_python_m_verifier_in_a_case_dir_runs_the_bundles_verifier(
    engine: Engine, tmp_path: Path, out_dir: Path, host_rewards
) -> None:
    """`python -m verifier` with the bundle's interpreter (no -I), started in a case dir
    that holds a `verifier` package of its own: the interpreter's ._pth keeps the working
    dir off sys.path, so the planted package never runs and the reward is the honest one."""
    case = shared_dir(tmp_path / "case")
    for source in (EXAMPLES / "case-fail").rglob("*"):
        if source.is_file():
            target = case / source.relative_to(EXAMPLES / "case-fail")
            shared_dir(target.parent)
            shared_file(target, source.read_text())
    shared_file(shared_dir(case / "verifier") / "__init__.py", PLANTED_VERIFIER)
    shared_file(case / "verifier" / "__main__.py", PLANTED_VERIFIER)
    grade = f"cd /case && exec {BUNDLED_PYTHON} -m verifier grade"
    result = engine.run(["/bin/sh", "-c", grade], mounts=grade_mounts(case, out_dir))
    assert result.exit_code == 0, str(result)
    assert read_reward(out_dir) == host_rewards["case-fail"]
    assert read_reward(out_dir)["reward"] < 1.0


CA_EVAL = """\
name: trust
judges:
  - name: trusts_public_cas
    check: |
      import os, ssl
      stats = ssl.create_default_context().cert_store_stats()
      return stats["x509_ca"] > 100, os.environ.get("SSL_CERT_FILE", "unset")
"""


def test_https_trusts_the_bundles_own_ca_bundle(
    engine: Engine, tmp_path: Path, out_dir: Path
) -> None:
    """The base has no CA certificates (debian:bookworm-slim); LLM judges' HTTPS gets the
    bundle's own, unless SSL_CERT_FILE names another."""
    config = shared_file(shared_dir(tmp_path / "tests") / "eval.yaml", CA_EVAL)
    case = shared_dir(tmp_path / "case")
    shared_file(case / "a.txt", "x\n")
    mounts = [
        Mount(str(case), "/case", read_only=True),
        Mount(str(out_dir), "/logs/verifier"),
        Mount(str(config), "/tests/eval.yaml", read_only=True),
    ]
    result = engine.run(mounts=mounts, options=RunOptions.restricted())
    assert result.exit_code == 0, str(result)
    assert read_reward(out_dir)["trusts_public_cas"] == 1.0
    probe = engine.run(["sh", "-c", "ls /etc/ssl/certs 2>&1 | head -1"])
    assert "No such file" in probe.stdout, str(probe)
