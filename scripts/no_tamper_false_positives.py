"""guard/no_tamper's false positives on real projects: every source file of each sdist
read as if the agent had added it (no reference), as honest code the guard must pass.

    pip download --no-binary :all: --no-deps more-itertools==10.5.0 attrs==26.1.0
    python scripts/no_tamper_false_positives.py more-itertools-10.5.0.tar.gz attrs-26.1.0.tar.gz

Prints, per sdist, the files read, the files flagged and each finding, then the rate
over all of them: the figure docs/builtins.md gives for the guard.
"""

from __future__ import annotations

import sys
import tarfile
import tempfile
from pathlib import Path

from verifier.judges.builtins.guards import no_tamper
from verifier.judges.builtins.registry import BuiltinContext


def measure(sdist: Path) -> tuple[int, int]:
    """(files read, files flagged) of one sdist, its findings printed."""
    with tempfile.TemporaryDirectory() as directory:
        with tarfile.open(sdist) as archive:
            archive.extractall(directory, filter="data")
        case = Path(directory).resolve()
        answer = no_tamper(BuiltinContext(case, case, {}), paths=None, reference=None)
        files = sum(1 for path in case.rglob("*") if path.suffix in (".py", ".go"))
    findings = answer.details.get("tampering", [])
    flagged = len({finding["path"] for finding in findings})
    print(f"{sdist.name}: {files} source files read, {flagged} flagged")
    for finding in findings:
        where = finding["path"].split("/", 1)[-1]
        print(f"  {where}:{finding['line']}: {finding['what']}")
    return files, flagged


def main(sdists: list[str]) -> int:
    if not sdists:
        print(__doc__)
        return 2
    read = flagged = 0
    for sdist in sdists:
        files, hits = measure(Path(sdist))
        read, flagged = read + files, flagged + hits
    print(f"all: {flagged} of {read} files flagged ({100 * flagged / max(read, 1):.1f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
