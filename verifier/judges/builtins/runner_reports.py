"""What a hardened runner hands back (runners.py): its report, a file returned beside
the launcher's HMAC-SHA256 signature under a key only the grader and the launcher hold
(or, for `go test -json`, its events on stdout), verified and parsed; or the fact that
no report counts: missing, cut short, unsigned or forged, from a runner that was
killed, unparsable. Pure functions of the finished run."""

from __future__ import annotations

import hashlib
import hmac
import signal

from verifier.casefiles import CaseFile
from verifier.judges.builtins.files import MAX_FILE_BYTES
from verifier.judges.builtins.reports import Reading, ReportError, parse_report
from verifier.judges.builtins.runners import RunnerPlan
from verifier.sandbox import CommandRun

SIGNATURE_SUFFIX = ".sig"  # beside a signed report: its HMAC, in hex


def handed_back(run: CommandRun, plan: RunnerPlan, key: bytes | None) -> Reading:
    """The report the runner handed back (its file, or its stdout), or why none counts:
    missing, unusable, not signed by the launcher, or from a runner that was killed."""
    files = (plan.label,)
    if plan.report is None:
        if run.signal is not None:
            killed = f"{plan.label} was killed by {signal.Signals(run.signal).name}"
            return Reading(None, files, f"{killed}: its events do not count", plan.name)
        if run.stdout_cut_bytes:
            problem = f"{plan.label} printed more than {MAX_FILE_BYTES} bytes of events"
            return Reading(None, files, problem, plan.name)
        found: CaseFile | None = CaseFile((run.stdout or "").encode(), None)
    else:
        found = run.returned.get(plan.report)
    if found is None or found.data is None:
        why = found.problem if found is not None else "it did not run"
        return Reading(None, files, f"{plan.label} left no report ({why})", plan.name)
    if key is not None and plan.report is not None:
        signature = run.returned.get(f"{plan.report}{SIGNATURE_SUFFIX}")
        if not signed(key, found.data, signature):
            return Reading(
                None,
                files,
                f"the report of {plan.label} is not the launcher's: its signature does not verify",
                plan.name,
            )
    try:
        return Reading(parse_report(found.data, plan.format), files, tool=plan.name)
    except ReportError as error:
        return Reading(None, files, f"the report of {plan.label} {error}", plan.name)


def signed(key: bytes, data: bytes, signature: CaseFile | None) -> bool:
    """Whether signature holds the HMAC-SHA256 of data under key (the launcher's)."""
    if signature is None or signature.data is None:
        return False
    expected = hmac.new(key, data, hashlib.sha256).hexdigest().encode("ascii")
    return hmac.compare_digest(expected, signature.data.strip())
