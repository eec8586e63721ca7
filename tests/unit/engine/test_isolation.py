"""Judge isolation and return values: whatever one judge does, the others and the reward stand."""

from __future__ import annotations

import shutil
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from verifier.engine import Limits
from verifier.grading import Grading, grade, load_eval
from verifier.judges.base import Pool
from verifier.results import Status

WriteConfig = Callable[..., Path]
MakeCase = Callable[..., Path]


def check_judge(name: str, body: str, extra: str = "") -> str:
    indented = textwrap.indent(textwrap.dedent(body).strip(), "      ")
    return f"  - name: {name}\n{extra}    check: |\n{indented}\n"


def grade_with(
    write_config: WriteConfig,
    make_case: MakeCase,
    judges: str,
    reward: str = "",
    limits: Limits | None = None,
) -> Grading:
    config = write_config("judges:\n" + judges + reward)
    case = make_case({"report.md": "hello"})
    return grade(load_eval(config), case, limits)


def by_name(grading: Grading) -> dict[str, object]:
    return {result.name: result for result in grading.results}


GOOD = check_judge("good", "return 5", extra="    score_range: [1, 5]\n")


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ("import sys\nsys.exit(3)\nreturn True", "judge called sys.exit(3)"),
        ("import os\nos._exit(0)\nreturn True", "exited with code 0 before returning a result"),
        (
            "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\nreturn True",
            "killed by SIGSEGV",
        ),
        ("import ctypes\nctypes.string_at(0)\nreturn True", "killed by SIGSEGV"),
        ("import os\nos.kill(os.getpid(), 40)\nreturn True", "killed by SIGRTMIN+6"),
        ("return 1 / 0", "ZeroDivisionError: division by zero (at <judges[1] (bad).check>:1)"),
        (
            "x = 1\nraise RuntimeError('nope')\nreturn True",
            "RuntimeError: nope (at <judges[1] (bad).check>:2)",
        ),
        ("return 'yes'", "returned str; a judge must return a bool or a finite number"),
        ("return None", "returned None"),
        ("x = 1  # return it later", "returned None"),
        (
            "def inner():\n    return [1 / 0 for _ in range(1)]\nreturn inner()",
            "ZeroDivisionError: division by zero (at <judges[1] (bad).check>:2)",
        ),
        ("return {'score': 1}", "returned dict"),
        ("return [1]", "returned list"),
        ("return (1, 'a', 'b')", "returned a 3-tuple"),
        ("return float('nan')", "returned nan, not a finite number"),
        ("return float('inf')", "returned inf, not a finite number"),
        ("return (float('-inf'), 'why')", "returned -inf, not a finite number"),
    ],
)
def test_misbehaving_judge_becomes_an_error_record_and_others_stand(
    write_config: WriteConfig, make_case: MakeCase, body: str, error: str
) -> None:
    grading = grade_with(write_config, make_case, GOOD + check_judge("bad", body))
    results = by_name(grading)
    assert results["bad"].status is Status.ERROR
    assert results["bad"].value is None
    assert error in results["bad"].error
    assert results["good"].value == 5.0
    assert grading.reward == 1.0  # default composition: the error is ignored beside a score


def test_hanging_judge_times_out_and_the_rest_finish(
    write_config: WriteConfig, make_case: MakeCase
) -> None:
    hang = check_judge("hang", "while True:\n    pass\nreturn 1", extra="    timeout: 0.5\n")
    started = time.monotonic()
    grading = grade_with(write_config, make_case, GOOD + hang)
    assert time.monotonic() - started < 10
    hung = by_name(grading)["hang"]
    assert hung.status is Status.TIMEOUT
    assert hung.error == "timed out after 0.5s (judge timeout)"
    assert by_name(grading)["good"].status is Status.OK


@pytest.mark.slow
def test_the_grade_deadline_stops_judges_still_running_as_timeouts(
    write_config: WriteConfig, make_case: MakeCase
) -> None:
    """Judges whose own timeouts add up past the deadline: the one still running when it
    comes is stopped as a timeout (on_error decides), a builtin as a failure (only the
    case keeps it running), and one that never got a slot likewise; the others stand."""
    slow = check_judge("slow", "import time\ntime.sleep(60)\nreturn 1", extra="    timeout: 50\n")
    waiting = check_judge("waiting", "return 1", extra="    timeout: 50\n")
    builtin = (
        "  - name: hangs\n    builtin: command_succeeds\n"
        "    arguments: {cmd: 'sleep 60', timeout: 50}\n"
    )
    started = time.monotonic()
    limits = Limits(parallel=2).until(3.0)
    grading = grade_with(write_config, make_case, GOOD + slow + builtin + waiting, limits=limits)
    elapsed = time.monotonic() - started
    assert 2.0 < elapsed < 3.0  # before the deadline, less the margin kept for writing
    judged = by_name(grading)
    assert judged["good"].status is Status.OK and judged["good"].value == 5
    assert judged["slow"].status is Status.TIMEOUT
    assert judged["slow"].error.startswith("stopped after 2.")
    assert "the grade's deadline (--deadline 3s, less 0.3s to write the reward)" in (
        judged["slow"].error
    )
    assert (judged["hangs"].status, judged["hangs"].value) == (Status.OK, False)
    assert "the grade's deadline" in judged["hangs"].rationale
    assert judged["waiting"].status is Status.TIMEOUT
    assert judged["waiting"].error.startswith("not started: the grade's deadline")


MIB = 1024 * 1024


@pytest.mark.parametrize(
    ("asked", "container_mb", "own_mb", "workers", "expected"),
    [
        # a 512 MiB container, one grader of 20 MiB: 512 - (20 + 32) = 460 for the judges
        (2048, 512, 20, 1, {"memory_mb": 460, "memory_total_mb": 460}),
        (256, 512, 20, 1, {}),  # asked for less than the container leaves: unchanged
        (2048, 64 * 1024, 20, 1, {}),  # a big container changes nothing
        # a batch: 4 workers, the parent and the LLM stage; each worker a quarter
        (2048, 1024, 20, 4, {"memory_mb": (1024 - 6 * 52) // 4, "memory_total_mb": 1024 - 312}),
        (200, 1024, 20, 4, {"memory_mb": 178, "memory_total_mb": 712}),  # 4 x 200 > 712
    ],
)
def test_the_judges_memory_fits_the_container(
    asked: int, container_mb: int, own_mb: int, workers: int, expected: dict
) -> None:
    from verifier.engine.parent import container_share

    share = container_share(asked, container_mb * MIB, own_mb * MIB, workers)
    assert {key: share[key] for key in ("memory_mb", "memory_total_mb") if key in share} == expected
    if expected:
        assert share["memory_note"].startswith(f"the container's memory limit, {container_mb} MiB")


def test_a_container_too_small_for_a_judge_is_a_usage_error() -> None:
    from verifier.engine.parent import container_share
    from verifier.errors import UsageError

    with pytest.raises(UsageError, match=r"leaves 0 MiB per judge .* or pass fewer --jobs"):
        container_share(2048, 200 * MIB, 20 * MIB, 4)


@pytest.mark.slow
def test_judges_over_the_containers_share_together_stop_the_largest(
    write_config: WriteConfig, make_case: MakeCase
) -> None:
    """Two judges each under its own limit, over the container's share together: the
    larger is stopped by the verifier with an error naming the container's limit,
    before the kernel would kill one."""
    hog = "data = b'x' * ({} * 1024 * 1024)\nimport time\ntime.sleep(3)\nreturn True"
    judges = check_judge("big", hog.format(150)) + check_judge("small", hog.format(60))
    note = "the container's memory limit, 512 MiB (cgroup), less 52 MiB for the grader"
    limits = Limits(memory_mb=200, memory_total_mb=180, memory_note=note, parallel=2)
    grading = grade_with(write_config, make_case, judges, limits=limits)
    big, small = by_name(grading)["big"], by_name(grading)["small"]
    assert big.status is Status.ERROR
    assert big.error == (
        f"exceeded the memory limit of 180 MiB of the judges running together ({note})"
    )
    assert small.status is Status.OK and small.value is True


def test_a_judge_timeout_before_the_deadline_is_still_its_own(
    write_config: WriteConfig, make_case: MakeCase
) -> None:
    hang = check_judge("hang", "while True:\n    pass\nreturn 1", extra="    timeout: 0.5\n")
    grading = grade_with(write_config, make_case, hang, limits=Limits().until(30))
    assert by_name(grading)["hang"].error == "timed out after 0.5s (judge timeout)"


@pytest.mark.slow
def test_timeout_kills_processes_the_judge_started(
    write_config: WriteConfig, make_case: MakeCase, tmp_path: Path
) -> None:
    marker = tmp_path / "still-running"
    body = f"""
    import subprocess, time
    subprocess.Popen(["sh", "-c", "sleep 1.5; touch {marker}"])
    time.sleep(30)
    return True
    """
    grade_with(write_config, make_case, check_judge("spawner", body, extra="    timeout: 0.5\n"))
    time.sleep(2)
    assert not marker.exists()


def test_memory_hog_becomes_an_error_record(write_config: WriteConfig, make_case: MakeCase) -> None:
    hog = check_judge("hog", "blocks = bytearray(4 * 1024 ** 3)\nreturn True")
    grading = grade_with(write_config, make_case, GOOD + hog, limits=Limits(memory_mb=512))
    assert by_name(grading)["hog"].status is Status.ERROR
    assert "exceeded the memory limit of 512 MiB" in by_name(grading)["hog"].error
    assert by_name(grading)["good"].value == 5.0


def test_memory_in_use_over_the_limit_is_an_error_record(
    write_config: WriteConfig, make_case: MakeCase
) -> None:
    """Touched a little at a time, so that the backstop never refuses an allocation: the
    memory actually in use is what is watched."""
    body = """
    import time
    chunks = []
    for _ in range(40):
        chunks.append(bytearray(16 * 1024 * 1024))
        time.sleep(0.02)
    time.sleep(5)
    return True
    """
    grading = grade_with(
        write_config, make_case, GOOD + check_judge("grower", body), limits=Limits(memory_mb=256)
    )
    grower = by_name(grading)["grower"]
    assert (grower.status, grower.error) == (Status.ERROR, "exceeded the memory limit of 256 MiB")
    assert grower.duration_s < 4


def test_reserving_address_space_is_not_using_memory(
    write_config: WriteConfig, make_case: MakeCase
) -> None:
    """What RLIMIT_AS got wrong: the JVM, Go and V8 reserve gigabytes they never touch."""
    body = """
    import mmap
    reserved = mmap.mmap(-1, 8 * 1024 ** 3, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, prot=0)
    return len(reserved) == 8 * 1024 ** 3
    """
    grading = grade_with(
        write_config, make_case, check_judge("reserver", body), limits=Limits(memory_mb=256)
    )
    assert (grading.results[0].status, grading.results[0].value) == (Status.OK, True)


def test_a_command_over_the_memory_limit_fails_its_builtin_rather_than_erroring(
    write_config: WriteConfig, make_case: MakeCase
) -> None:
    """A memory bomb in the case is a fact about the case: an error would be dropped from
    the reward (on_error: drop) and could raise it."""
    grower = (
        "python3 -c 'import time\nx = []\nfor _ in range(40):\n"
        "    x.append(bytearray(16 * 2**20)); time.sleep(0.02)\ntime.sleep(5)'"
    )
    judge = (
        f"  - name: tests\n    builtin: command_succeeds\n    arguments: {{command: {grower!r}}}\n"
    )
    grading = grade_with(write_config, make_case, judge, limits=Limits(memory_mb=256))
    result = grading.results[0]
    assert (result.status, result.value, result.rationale) == (
        Status.OK,
        False,
        "the judge gave no answer on this case (exceeded the memory limit "
        "of 256 MiB): counted as a failure",
    )


@pytest.mark.skipif(shutil.which("java") is None, reason="no JVM on this machine")
def test_java_runs_under_the_default_memory_limit(
    write_config: WriteConfig, make_case: MakeCase
) -> None:
    judge = (
        "  - name: jvm\n    builtin: command_succeeds\n    arguments: {command: java -version}\n"
    )
    grading = grade_with(write_config, make_case, judge)
    assert (grading.results[0].status, grading.results[0].value) == (Status.OK, True)


def test_judges_run_in_parallel(write_config: WriteConfig, make_case: MakeCase) -> None:
    sleepers = "".join(
        check_judge(f"s{i}", "import time\ntime.sleep(0.6)\nreturn 5") for i in range(4)
    )
    started = time.monotonic()
    grading = grade_with(write_config, make_case, sleepers, limits=Limits(parallel=4))
    assert time.monotonic() - started < 2.0  # serially it would take 2.4 s
    assert [result.value for result in grading.results] == [5.0] * 4


@pytest.mark.slow
def test_parallel_limit_is_respected(write_config: WriteConfig, make_case: MakeCase) -> None:
    sleepers = "".join(
        check_judge(f"s{i}", "import time\ntime.sleep(0.4)\nreturn 5") for i in range(3)
    )
    started = time.monotonic()
    grade_with(write_config, make_case, sleepers, limits=Limits(parallel=1))
    assert time.monotonic() - started >= 1.2


def test_large_rationale_arrives_whole(write_config: WriteConfig, make_case: MakeCase) -> None:
    grading = grade_with(write_config, make_case, check_judge("big", "return True, 'x' * 19000"))
    assert grading.results[0].rationale == "x" * 19000


def test_judge_prints_do_not_reach_stdout(
    write_config: WriteConfig, make_case: MakeCase, capfd: pytest.CaptureFixture[str]
) -> None:
    grade_with(write_config, make_case, check_judge("chatty", "print('noise')\nreturn True"))
    captured = capfd.readouterr()
    assert "noise" not in captured.out
    assert "noise" in captured.err


@pytest.mark.parametrize(
    ("body", "extra", "value", "rationale"),
    [
        ("return True", "", True, None),
        ("return 3", "", 3.0, None),
        ("return 2.5, 'because'", "", 2.5, "because"),
        ("return False, 42", "", False, "42"),
        ("class R:\n    value = 4\n    rationale = 'obj'\nreturn R()", "", 4.0, "obj"),
        ("return 5", "    score_range: [1, 5]\n", 5.0, None),
        ("return 4.0", "    feedback_type: int\n", 4.0, None),
    ],
)
def test_allowed_return_values(
    write_config: WriteConfig,
    make_case: MakeCase,
    body: str,
    extra: str,
    value: object,
    rationale: str | None,
) -> None:
    result = grade_with(write_config, make_case, check_judge("j", body, extra=extra)).results[0]
    assert result.status is Status.OK
    assert result.value == value and type(result.value) is type(value)
    assert result.rationale == rationale


@pytest.mark.parametrize(
    ("body", "extra", "error"),
    [
        ("return 6", "    score_range: [1, 5]\n", "returned 6, outside its score_range [1, 5]"),
        ("return 0.5", "    score_range: [1, 5]\n", "outside its score_range"),
        ("return 1", "    feedback_type: bool\n", "feedback_type is bool"),
        ("return True", "    feedback_type: float\n", "feedback_type is float"),
        ("return 2.5", "    feedback_type: int\n", "feedback_type is int"),
    ],
)
def test_values_off_the_declared_scale_are_errors_never_clamped(
    write_config: WriteConfig, make_case: MakeCase, body: str, extra: str, error: str
) -> None:
    result = grade_with(write_config, make_case, check_judge("j", body, extra=extra)).results[0]
    assert result.status is Status.ERROR
    assert error in result.error


def test_if_false_skips_with_null_value_and_no_error(
    write_config: WriteConfig, make_case: MakeCase
) -> None:
    judge = check_judge("j", "return 5", extra="    if: \"'missing.md' in outputs['files']\"\n")
    result = grade_with(write_config, make_case, GOOD + judge).results[1]
    assert (result.status, result.value, result.error) == (Status.SKIPPED, None, None)


def test_if_sees_outputs_annotations_and_arguments(
    write_config: WriteConfig, make_case: MakeCase
) -> None:
    config = write_config(
        "annotations: {level: 3}\njudges:\n"
        + check_judge(
            "j",
            "return True",
            extra="    arguments: {min: 2}\n"
            "    if: \"annotations['level'] > arguments['min'] and len(outputs['files']) == 1\"\n",
        )
    )
    result = grade(load_eval(config), make_case({"a.txt": "x"})).results[0]
    assert result.status is Status.OK


def test_if_that_raises_is_an_error(write_config: WriteConfig, make_case: MakeCase) -> None:
    judge = check_judge("j", "return 5", extra="    if: \"outputs['nope'] > 1\"\n")
    result = grade_with(write_config, make_case, judge).results[0]
    assert result.status is Status.ERROR
    assert result.error.startswith("if: KeyError")


def test_if_cannot_use_builtins_outside_its_list(
    write_config: WriteConfig, make_case: MakeCase
) -> None:
    judge = check_judge("j", "return 5", extra="    if: \"open('/etc/passwd')\"\n")
    result = grade_with(write_config, make_case, judge).results[0]
    assert result.status is Status.ERROR
    assert "NameError" in result.error


def test_check_receives_outputs_and_arguments(
    write_config: WriteConfig, make_case: MakeCase
) -> None:
    judge = check_judge(
        "j",
        "return outputs['files']['report.md'] == arguments['want']",
        extra="    arguments: {want: hello}\n",
    )
    assert grade_with(write_config, make_case, judge).results[0].value is True


def test_skipped_pool_gives_skipped_records_without_running(
    write_config: WriteConfig, make_case: MakeCase
) -> None:
    grading = grade_with(
        write_config, make_case, GOOD, limits=Limits(skip_pools=frozenset({Pool.CPU}))
    )
    assert grading.results[0].status is Status.SKIPPED


def test_the_memory_counters_bound_the_private_pages_the_watch_counts() -> None:
    """The watch reads the kernel's counters first and walks a tree's page tables only
    when they might be over a limit: the counters never read below the private pages,
    for a process that touched its own memory nor for a fork sharing its parent's."""
    import os
    import subprocess
    import sys

    from verifier.linux import private_bytes, private_bytes_bound

    script = (
        "import os, sys\n"
        "data = bytearray(b'x' * (96 * 1024 * 1024))\n"
        "child = os.fork()\n"
        "if child == 0:\n"
        "    data[: 16 * 1024 * 1024] = b'y' * (16 * 1024 * 1024)\n"
        "print(int(child == 0), os.getpid(), flush=True)\n"
        "sys.stdin.read()\n"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        roles = sorted(tuple(map(int, process.stdout.readline().split())) for _ in "ab")
        pids = [pid for _, pid in roles]  # the parent's, then the fork's
        for pid in pids:
            assert private_bytes_bound([pid]) >= private_bytes([pid]) > 0
        assert private_bytes([pids[1]]) > 16 * 1024 * 1024  # the pages the fork wrote
        assert private_bytes_bound([pids[0]]) > 96 * 1024 * 1024  # shared: resident still
        assert private_bytes_bound(pids) >= private_bytes(pids)
        assert private_bytes_bound([os.getpid() + 10**7]) == 0  # gone: nothing to count
    finally:
        assert process.stdin is not None
        process.stdin.close()
        process.wait()
