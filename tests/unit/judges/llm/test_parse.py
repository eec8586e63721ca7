"""The parts of LLM judges that need no server: reading answers, reducing samples,
redaction, fences, the gate's arithmetic, the cache's key and eviction."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from verifier.errors import OutputError
from verifier.judges.llm.answer_scale import AnswerError, AnswerScale
from verifier.judges.llm.cache import BUCKETS, ResponseCache
from verifier.judges.llm.conversation import conversation_of
from verifier.judges.llm.gate import Gate
from verifier.judges.llm.parse import Reply, parse_text, read_grade
from verifier.judges.llm.prompt import allocate
from verifier.judges.llm.providers import PROVIDERS
from verifier.judges.llm.sampling import reduce_samples
from verifier.judges.llm.template import compile_template, mark_trusted
from verifier.judges.llm.transport import error_message, retry_after
from verifier.redact import redact, redact_tree

ONE_TO_FIVE = AnswerScale(kind="number", low=1, high=5, integer=True)
PASS_FAIL = AnswerScale(kind="pass_fail")


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("Score: 4", 4.0),
        ("The work is solid.\n**Score:** 4/5", 4.0),
        ("I'd give it 3 out of 5.", 3.0),
        ("rating = 2", 2.0),
        ("5", 5.0),
        ('Reasoning...\n```json\n{"score": 2, "rationale": "thin"}\n```', 2.0),
        ("Final score: 4. (Earlier drafts were not scored.)", 4.0),
    ],
)
def test_numbers_in_plain_text(text: str, value: float) -> None:
    assert parse_text(text, ONE_TO_FIVE)[0] == value


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("PASS", True),
        ("The agent fixed the bug.\n\nVerdict: FAIL", False),
        ("passed: yes", True),
        ('{"passed": "false", "rationale": "no"}', False),
        ("Looks fine.\n**Pass**", True),
    ],
)
def test_verdicts_in_plain_text(text: str, value: bool) -> None:
    assert parse_text(text, PASS_FAIL)[0] is value


@pytest.mark.parametrize(
    ("text", "scale", "problem"),
    [
        ("Score: 4. On reflection, score: 2.", ONE_TO_FIVE, "ambiguous: it names 2.0, 4.0"),
        ("Verdict: pass ... verdict: fail", PASS_FAIL, "ambiguous"),
        ("It is quite good overall.", ONE_TO_FIVE, "no score found"),
        ("Score: 8/10", ONE_TO_FIVE, "no score found"),
        ("The agent passed some tests", PASS_FAIL, "no pass/fail verdict found"),
    ],
)
def test_unreadable_text_is_an_error(text: str, scale: AnswerScale, problem: str) -> None:
    with pytest.raises(AnswerError, match=problem):
        parse_text(text, scale)


def test_structured_arguments_as_a_string_or_a_dict() -> None:
    grade = read_grade(Reply(text=None, arguments='{"rationale": "r", "score": "3"}'), ONE_TO_FIVE)
    assert (grade.value, grade.rationale, grade.via) == (3.0, "r", "structured")
    grade = read_grade(Reply(text="why", arguments={"passed": True}), PASS_FAIL)
    assert (grade.value, grade.rationale) == (True, "why")


def test_scale_checks() -> None:
    with pytest.raises(AnswerError, match=r"answered 0, outside its score_range \[1, 5\]"):
        read_grade(Reply(text=None, arguments={"score": 0}), ONE_TO_FIVE)
    strict = AnswerScale(kind="number", low=0, high=2, integer=True, integer_required=True)
    with pytest.raises(AnswerError, match=r"answered 1\.5 but feedback_type is int"):
        read_grade(Reply(text=None, arguments={"score": 1.5}), strict)
    with pytest.raises(AnswerError, match="not a true/false verdict"):
        read_grade(Reply(text=None, arguments={"passed": 3}), PASS_FAIL)


def test_empty_answer_cut_at_max_tokens() -> None:
    with pytest.raises(AnswerError, match=r"empty \(cut at the max_tokens limit"):
        read_grade(Reply(text="", stop_reason="length"), ONE_TO_FIVE)
    with pytest.raises(AnswerError, match="cut at the max_tokens limit"):
        read_grade(Reply(text="The work is", stop_reason="max_tokens"), ONE_TO_FIVE)


def test_reduce_samples() -> None:
    reduced = reduce_samples([4.0, 2.0, 4.0], ONE_TO_FIVE)
    assert (reduced.value, reduced.spread) == (4.0, 2.0)
    assert reduced.agreement == pytest.approx(2 / 3)
    assert reduce_samples([3.0, 4.0], ONE_TO_FIVE).value == 3.0  # stays on the integer scale
    continuous = AnswerScale(kind="number", low=0, high=1)
    assert reduce_samples([0.2, 0.5], continuous).value == pytest.approx(0.35)
    assert reduce_samples([True, True, False], PASS_FAIL).value is True
    assert reduce_samples([True, False], PASS_FAIL).value is False


def test_redaction(monkeypatch: pytest.MonkeyPatch) -> None:
    key = "anthropic-key-that-is-long-enough"
    monkeypatch.setenv("ANTHROPIC_API_KEY", key)
    monkeypatch.setenv("OPENAI_API_KEY", "EMPTY")  # vLLM's placeholder: not a secret
    text = f"x-api-key: {key}; url https://user:pw@proxy:3128; sk-abcdefghijklmnopqrstuv EMPTY"
    shown = redact(text)
    assert key not in shown and "pw@" not in shown and "sk-abcdef" not in shown
    assert "EMPTY" in shown
    assert redact_tree({"a": [f"k={key}"]}) == {"a": ["k=[redacted]"]}


@pytest.mark.parametrize(
    "variable", [variable for provider in PROVIDERS for variable in provider.key_env]
)
def test_every_providers_key_variable_is_redacted_by_its_name(
    monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    # redaction knows secrets by their variables' names; a provider whose key variable
    # the name pattern missed would have its key printed in judges.json
    secret = "a-provider-key-that-is-long-enough"
    monkeypatch.setenv(variable, secret)
    assert secret not in redact(f"key {secret}")


def test_conversation_from_stream_json_and_plain_stdout() -> None:
    stream = (
        '{"type":"assistant","message":{"content":[{"type":"text","text":"one"}]}}\n'
        '{"type":"assistant","parent_tool_use_id":"t1","message":{"content":"sub-agent"}}\n'
        '{"type":"item.completed","item":{"type":"agent_message","text":"two"}}\n'
    )
    assert conversation_of({"stdout": stream}) == "one\n\ntwo"
    assert conversation_of({"stdout": "plain log\n{not json}"}) == "plain log\n{not json}"
    assert conversation_of({"stdout": None}) == ""
    assert conversation_of({"conversation": "given", "stdout": "x"}) == "given"


def test_allocate_shares_the_budget() -> None:
    assert allocate([10, 1000, 1000], 210) == [10, 100, 100]
    assert allocate([10, 20], 1000) == [10, 20]
    assert allocate([], 5) == []


class _Recorder:
    def __init__(self) -> None:
        self.wrapped: list[str] = []

    def wrap(self, text: str) -> str:
        self.wrapped.append(text)
        return f"[{text}]"


def test_only_trusted_values_print_unfenced_whatever_the_expression() -> None:
    """Only a value looked up unchanged from arguments/annotations (and the template's own
    constants) print as they are; anything computed, even from trusted text, is fenced."""
    template = compile_template(
        "{{ arguments.x }}|{{ arguments.n }}|{{ '{' }}|{{ c }}|{{ c | upper }}|{{ c[:2] }}"
        "|{{ c.split('-')[0] }}|{{ arguments.x | upper }}|{{ c ~ '' }}|{{ '%s' % c }}"
        "|{{ arguments.x + c }}".replace("c", "conversation")
    )
    fence = _Recorder()
    variables = {"conversation": "ab-cd", "arguments": mark_trusted({"x": "t", "n": 2})}
    text = template.render(variables, fence)
    assert text == "t|2|{|[ab-cd]|[AB-CD]|[ab]|[ab]|[T]|[ab-cd]|[ab-cd]|[tab-cd]"


def test_transport_helpers() -> None:
    assert retry_after({"retry-after": "2"}) == 2.0
    assert retry_after({"retry-after-ms": "150"}) == 0.15
    assert retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) < 0
    assert retry_after({}) is None
    assert error_message(b'{"error": {"message": "bad model"}}') == "bad model"
    assert error_message(b'{"type":"error","error":{"type":"x","message":"overloaded"}}') == (
        "overloaded"
    )
    assert error_message(b'{"detail": "Not Found"}') == "Not Found"
    assert error_message(b"<html>gateway</html>") == "<html>gateway</html>"


def test_a_throttle_halves_the_gate_once_per_pause_and_successes_restore_it() -> None:
    gate = Gate(8)
    gate.throttle(0.05)
    gate.throttle(0.05)  # the same wave: no second halving
    assert gate.limit == 4 and gate.figures().throttled == 2
    assert not gate.enter(time.monotonic() + 0.01)  # paused past this deadline
    assert gate.enter(time.monotonic() + 1.0)  # waits out the pause, then enters
    assert gate.paused_until <= time.monotonic()
    for _ in range(3):  # the gate in use: four in flight
        assert gate.enter(time.monotonic() + 1.0)
    for _ in range(4):
        gate.succeeded()
    assert gate.limit == 5  # one more after `limit` successes
    for _ in range(50):
        gate.succeeded()
    assert gate.limit == 8  # never above the capacity


def test_a_full_gate_waits_for_a_free_slot() -> None:
    gate = Gate(1)
    assert gate.enter(time.monotonic() + 1)
    assert not gate.enter(time.monotonic() + 0.05)
    gate.leave()
    assert gate.enter(time.monotonic() + 0.05) and gate.figures().peak_in_flight == 1


def test_the_cache_key_ignores_the_nonce_and_nothing_else() -> None:
    fields = {"provider": "openai", "url": "u", "model": "m", "output_mode": "tool", "sample": 0}
    body = {"messages": [{"content": "<case-material-abc123>x</case-material-abc123>"}]}
    other = {"messages": [{"content": "<case-material-def456>x</case-material-def456>"}]}
    key = ResponseCache.key(fields, body, "abc123")
    assert key == ResponseCache.key(fields, other, "def456")
    assert key != ResponseCache.key({**fields, "sample": 1}, body, "abc123")
    assert key != ResponseCache.key({**fields, "model": "n"}, body, "abc123")
    changed = {"messages": [{"content": "<case-material-abc123>y</case-material-abc123>"}]}
    assert key != ResponseCache.key(fields, changed, "abc123")


def test_the_cache_evicts_the_least_recently_used_entries_of_a_full_bucket(tmp_path: Path) -> None:
    entry = 1000  # bytes of one stored payload, about
    cache = ResponseCache(tmp_path, max_bytes=BUCKETS * entry * 3)  # 3 entries a bucket
    keys = [f"ab{index:062x}" for index in range(6)]  # one bucket
    for index, key in enumerate(keys[:3]):
        cache.put(key, {"text": "x" * (entry - 40)}, "m")
        os.utime(tmp_path / "ab" / f"{key}.json", ns=(index * 10**9, index * 10**9))
    assert cache.get(keys[0]) is not None  # used: now the most recent
    cache.put(keys[3], {"text": "x" * (entry - 40)}, "m")
    remaining = sorted(path.stem for path in (tmp_path / "ab").glob("*.json"))
    assert keys[1] not in remaining  # the least recently used went
    assert {keys[0], keys[3]} <= set(remaining)
    assert sum(path.stat().st_size for path in (tmp_path / "ab").iterdir()) <= 3 * entry
    (tmp_path / "ab" / f"{keys[0]}.json").write_text("{torn")
    assert cache.get(keys[0]) is None  # a torn entry is a miss


def test_an_uncreatable_cache_dir_is_an_output_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(OutputError, match="--llm-cache DIR, or --no-llm-cache"):
        ResponseCache.create(tmp_path / "file" / "cache", 10)
