"""The task's own pytest reporter: /logs/verifier/ctrf.json in CTRF (ctrf.io)."""

import json
import time

_tests = []


def pytest_runtest_logreport(report):
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        status = {"passed": "passed", "failed": "failed", "skipped": "skipped"}[report.outcome]
        _tests.append(
            {"name": report.nodeid, "status": status, "duration": int(report.duration * 1000)}
        )


def pytest_sessionfinish(session):
    now = int(time.time() * 1000)
    summary = {s: sum(t["status"] == s for t in _tests) for s in ("passed", "failed", "skipped")}
    summary.update(tests=len(_tests), pending=0, other=0, start=now, stop=now)
    report = {"results": {"tool": {"name": "pytest"}, "summary": summary, "tests": _tests}}
    with open("/logs/verifier/ctrf.json", "w") as handle:
        json.dump(report, handle)
