"""A hardened runner's report counts only under the launcher's HMAC signature."""

from __future__ import annotations

import hashlib
import hmac

from verifier.casefiles import CaseFile
from verifier.judges.builtins.runner_reports import signed

KEY = b"k" * 32
REPORT = b'{"results": {"tests": []}}'


def signature(key: bytes, data: bytes) -> CaseFile:
    return CaseFile(hmac.new(key, data, hashlib.sha256).hexdigest().encode() + b"\n", None)


def test_a_report_signed_under_the_key_verifies() -> None:
    assert signed(KEY, REPORT, signature(KEY, REPORT))


def test_a_report_forged_or_signed_under_another_key_does_not_verify() -> None:
    assert not signed(KEY, REPORT + b" ", signature(KEY, REPORT))
    assert not signed(KEY, REPORT, signature(b"x" * 32, REPORT))
    assert not signed(KEY, REPORT, CaseFile(b"", None))


def test_a_missing_or_unreadable_signature_does_not_verify() -> None:
    assert not signed(KEY, REPORT, None)
    assert not signed(KEY, REPORT, CaseFile(None, "does not exist"))
