"""What the benchmarks share: the three-judge eval.yaml, a regular install, the reference.

The benchmarks time a regular (non-editable) install of this checkout in
.cache/bench-venv, as `pip install .` or the image has it: an editable install
adds an import hook that costs tens of milliseconds at every start, which would
flatter batch-versus-grade ratios and overstate grading time.

The reference implementation (opendatahub-io/agent-eval-harness, whose reward
pages this project implements) is measured side by side when REF_DIR names its
source tree (e.g. a `git archive` of the fetched repository): its reward bridge
runs as `python -m agent_eval.harbor.reward` from that tree, in its own venv
(.cache/ref-venv) holding the reference's runtime dependencies.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

# The agent's work is a directory (`work/`), as the reference reads outputs.
THREE_INLINE_EVAL_YAML = """\
name: bench-three-inline
outputs:
  - path: work
judges:
  - name: has_report
    check: |
      return "work/report.md" in outputs["files"]
  - name: mentions_fix
    check: |
      return "fixed" in outputs["files"].get("work/report.md", "").lower()
  - name: length_score
    score_range: [1, 5]
    check: |
      words = len(outputs["files"].get("work/report.md", "").split())
      return min(5, max(1, words // 20 + 1))
"""
REPORT = "work/report.md"

REPO = Path(__file__).resolve().parent.parent
BENCH_VENV = REPO / ".cache" / "bench-venv"
REF_VENV = REPO / ".cache" / "ref-venv"
# The reference's runtime dependencies (its pyproject.toml `dependencies`).
REF_REQUIREMENTS = ("pyyaml>=6.0", "jinja2>=3.1", "truststore>=0.9,<1.0")


def installed_verifier() -> str:
    """The `verifier` of a regular install of this checkout, reinstalled when sources change."""
    sources = sorted([REPO / "pyproject.toml", *(REPO / "verifier").rglob("*.py")])
    digest = hashlib.sha256(b"".join(path.read_bytes() for path in sources)).hexdigest()
    return _installed(BENCH_VENV, REPO, digest)


def installed_revision(revision: str) -> tuple[str, str]:
    """(`verifier` of a regular install of a git revision of this repository, its commit):
    what a change is measured against side by side (e.g. `main`), in its own venv."""
    commit = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--verify", f"{revision}^{{commit}}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    venv = REPO / ".cache" / f"bench-venv-{commit[:12]}"
    if (venv / "installed-from").exists():
        return str(venv / "bin" / "verifier"), commit
    with tempfile.TemporaryDirectory(prefix="bench-revision-") as scratch:
        archive = subprocess.run(
            ["git", "-C", str(REPO), "archive", commit], capture_output=True, check=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", scratch], input=archive, check=True)
        return _installed(venv, Path(scratch), commit), commit


def _installed(venv: Path, source: Path, stamp_text: str) -> str:
    stamp = venv / "installed-from"
    if not stamp.exists() or stamp.read_text() != stamp_text:
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", str(source)], check=True)
        stamp.write_text(stamp_text)
    return str(venv / "bin" / "verifier")


def reference_tree() -> Path | None:
    """REF_DIR, when it holds the reference's reward bridge; None when it is not set."""
    text = os.environ.get("REF_DIR", "").strip()
    if not text:
        return None
    tree = Path(text).resolve()
    if not (tree / "agent_eval" / "harbor" / "reward.py").is_file():
        raise SystemExit(f"REF_DIR={text}: no agent_eval/harbor/reward.py there")
    return tree


def reference_python() -> str:
    """The interpreter of a venv holding the reference's dependencies (made once)."""
    python = REF_VENV / "bin" / "python"
    stamp = REF_VENV / "installed"
    if not stamp.exists():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(REF_VENV)], check=True)
        subprocess.run(
            [str(REF_VENV / "bin" / "pip"), "install", "--quiet", *REF_REQUIREMENTS], check=True
        )
        stamp.write_text("\n".join(REF_REQUIREMENTS))
    return str(python)
