"""What the benchmarks share: the three-inline-judge eval.yaml and a regular install.

The benchmarks time a regular (non-editable) install of this checkout in
.cache/bench-venv, as `pip install .` or the image has it: an editable install
adds an import hook that costs tens of milliseconds at every start, which would
flatter batch-versus-grade ratios and overstate grading time.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

THREE_INLINE_EVAL_YAML = """\
name: bench-three-inline
outputs:
  - path: report.md
judges:
  - name: has_report
    check: |
      return "report.md" in outputs["files"]
  - name: mentions_fix
    check: |
      return "fixed" in outputs["files"].get("report.md", "").lower()
  - name: length_score
    score_range: [1, 5]
    check: |
      words = len(outputs["files"].get("report.md", "").split())
      return min(5, max(1, words // 20 + 1))
"""


REPO = Path(__file__).resolve().parent.parent
BENCH_VENV = REPO / ".cache" / "bench-venv"


def installed_verifier() -> str:
    """The `verifier` of a regular install of this checkout, reinstalled when sources change."""
    sources = sorted([REPO / "pyproject.toml", *(REPO / "verifier").rglob("*.py")])
    digest = hashlib.sha256(b"".join(path.read_bytes() for path in sources)).hexdigest()
    stamp = BENCH_VENV / "installed-from"
    if not stamp.exists() or stamp.read_text() != digest:
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(BENCH_VENV)], check=True)
        subprocess.run(
            [str(BENCH_VENV / "bin" / "pip"), "install", "--quiet", str(REPO)], check=True
        )
        stamp.write_text(digest)
    return str(BENCH_VENV / "bin" / "verifier")
