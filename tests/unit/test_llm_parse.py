"""The pure parts of LLM judges: reading answers, reducing samples, redaction, fences."""

from __future__ import annotations

import pytest

from verifier.judges.llm.conversation import conversation_of
from verifier.judges.llm.parse import Reply, parse_text, read_grade
from verifier.judges.llm.prompt import allocate
from verifier.judges.llm.redact import redact, redact_tree
from verifier.judges.llm.sampling import reduce_samples
from verifier.judges.llm.scale import AnswerError, AnswerScale
from verifier.judges.llm.template import compile_template, mark_trusted
from verifier.judges.llm.transport import error_message, retry_after

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
        "|{{ arguments.x + c }}"
        .replace("c", "conversation")
    )  # fmt: skip
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
