"""rewardkit's judge TOML files move across: the same files, graded by harbor-rewardkit
0.2.3 itself (`python -m rewardkit`, in Harbor's venv) and by this verifier (eval.yaml's
`judge_file:`), against one local OpenAI-compatible server that answers each request by
the criteria it asks (rewardkit's JSON-schema content, the verifier's tool call), give
each judge the same score and the same reward.

One tests dir holds a judge TOML of each shape: the four criterion types with weights,
each aggregation (all_pass, threshold, required_pass with annotations and negate),
`mode = "individual"`, `reasoning_effort`, `reference`, `files`, `prompt_template`,
`samples` and `guard`. Besides the scores, the requests show the keys meaning the same:
one request per criterion in individual mode on both sides, `reasoning_effort` sent as
rewardkit sends it, the reference solution and the selected files in the prompt. Each
judge's expected score is also written here, so a change on either side fails.
What does not move is a one-line error: tests/unit/judges/llm/test_judge_file.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.llm_judging import set_llm_env
from tests.llm_servers import FakeLLM, Received, Reply, serve
from verifier.engine import Limits
from verifier.grading import grade, load_eval
from verifier.results import Status

HARBOR_PYTHON = Path(os.environ.get("HARBOR_VENV", "/opt/harbor-venv")) / "bin" / "python"
MODEL = "openai/served-model"
REFERENCE = "The fix: subtract with a - b, multiply with a * b."
RUBRIC = "You grade bug reports for a maintainer who reads them on a phone.\n\n{criteria}\n"

# Each judge file, as a rewardkit author writes it; {tests} is the tests dir.
TOMLS = {
    "quality": f"""
[judge]
judge = "{MODEL}"
files = ["report.md"]
reasoning_effort = "high"
reference = "{{tests}}/solution.md"

[[criterion]]
description = "Is the report correct?"
name = "correct"

[[criterion]]
description = "How readable is it?"
name = "readable"
type = "likert"
points = 5
weight = 2.0

[[criterion]]
description = "How much of the fix does it cover, in percent?"
name = "coverage"
type = "numeric"
min = 0
max = 100

[[criterion]]
description = "Documentation"
name = "docs"
type = "rubric"
levels = ["none", "partial", "complete"]
""",
    "strict": f"""
[judge]
judge = "{MODEL}"

[[criterion]]
description = "Does it build?"
name = "builds"

[[criterion]]
description = "How idiomatic is the style?"
name = "style"
type = "likert"
points = 5

[scoring]
aggregation = "all_pass"
""",
    "gate": f"""
[judge]
judge = "{MODEL}"

[[criterion]]
description = "Is a test added?"
name = "tested"

[[criterion]]
description = "How clear is the commit message?"
name = "message"
type = "likert"
points = 5

[scoring]
aggregation = "threshold"
threshold = 0.6
""",
    "each": f"""
[judge]
judge = "{MODEL}"
mode = "individual"
files = ["report.md", "notes.md"]

[[criterion]]
description = "Does the report name the bug?"
name = "names_bug"

[[criterion]]
description = "Severity, 0 to 10"
name = "severity"
type = "numeric"
min = 0
max = 10

[[criterion]]
description = "How polite is it?"
name = "polite"
type = "likert"
points = 5
""",
    "imported": f"""
[judge]
judge = "{MODEL}"

[[criterion]]
description = "Does it leak secrets?"
name = "leaks"
annotations = {{ type = "negative" }}

[[criterion]]
description = "Does it say how it was tested?"
name = "says_tested"

[[criterion]]
description = "Does it thank the reviewer?"
name = "thanks"
annotations = {{ importance = "optional" }}

[[criterion]]
description = "Does it blame someone?"
name = "blames"
negate = true

[scoring]
aggregation = "required_pass"
""",
    "template": f"""
[judge]
judge = "{MODEL}"
prompt_template = "rubric.md"
samples = 3
guard = "flag"

[[criterion]]
description = "What tone does it take?"
name = "tone"
type = "likert"
points = 5
""",
}
# What the server answers for each criterion (samples: one answer a request, in turn).
VERDICTS: dict[str, Any] = {
    "correct": True,
    "readable": 4,
    "coverage": 70,
    "docs": 1,
    "builds": True,
    "style": 4,
    "tested": True,
    "message": 3,
    "names_bug": True,
    "severity": 3,
    "polite": 2,
    "leaks": False,
    "says_tested": True,
    "thanks": False,
    "blames": False,
    "tone": [2, 5, 4],
    "guard": False,  # rewardkit's guard question
}
# The score each judge must get, on both sides.
EXPECTED = {
    "quality": (1 + 2 * 0.75 + 0.7 + 0.5) / 5,  # weighted mean
    "strict": 0.0,  # all_pass: style 4 of 5 does not pass
    "gate": 1.0,  # (1 + 0.5) / 2 >= 0.6
    "each": (1 + 0.3 + 0.25) / 3,
    "imported": 1.0,  # leaks negated, thanks optional, blames negated
    "template": 0.75,  # the median of 2, 5 and 4 of 5
}


class Scripted:
    """The server's route: each request answered by the criteria it asks, in the wire
    form its client asked for; the requests of each client kept by criterion."""

    def __init__(self, server: FakeLLM) -> None:
        self.server = server
        self.turns: Counter[tuple[str, str]] = Counter()
        self.asked: dict[str, list[tuple[tuple[str, ...], Received]]] = {
            "rewardkit": [],
            "verifier": [],
        }

    def __call__(self, received: Received) -> Reply:
        body = received.body
        client = "verifier" if "tools" in body else "rewardkit"
        names = self.criteria(client, received)
        self.asked[client].append((names, received))
        scores = {name: self.answer(client, name) for name in names}
        server = self.server
        if client == "verifier":
            answer = {name: {"rationale": "as scripted", "score": s} for name, s in scores.items()}
            return server.grade(criteria=answer)
        if len(names) == 1 and "score" in self.schema(body):  # rewardkit's flat shape
            (score,) = scores.values()
            return server.text(json.dumps({"score": score, "reasoning": "as scripted"}))
        shaped = {name: {"score": s, "reasoning": "as scripted"} for name, s in scores.items()}
        return server.text(json.dumps(shaped))

    @staticmethod
    def schema(body: dict[str, Any]) -> dict[str, Any]:
        return body["response_format"]["json_schema"]["schema"]["properties"]

    def criteria(self, client: str, received: Received) -> tuple[str, ...]:
        if client == "verifier":
            tool = received.body["tools"][0]["function"]["parameters"]
            return tuple(tool["properties"]["criteria"]["properties"])
        properties = self.schema(received.body)
        if "score" in properties:  # one criterion: its name is in the system prompt
            return (re.search(r"^- '([^']+)':", received.system, re.MULTILINE)[1],)
        return tuple(properties)

    def answer(self, client: str, name: str) -> Any:
        verdict = VERDICTS[name]
        if isinstance(verdict, list):
            turn = self.turns[client, name]
            self.turns[client, name] += 1
            verdict = verdict[turn % len(verdict)]
        if client == "rewardkit" and isinstance(verdict, bool):
            return "yes" if verdict else "no"
        return verdict

    def of(self, client: str, criterion: str) -> list[Received]:
        return [received for names, received in self.asked[client] if criterion in names]


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The tests dir graded by rewardkit and by the verifier against one server."""
    probe = (
        subprocess.run([str(HARBOR_PYTHON), "-c", "import rewardkit"], capture_output=True)
        if HARBOR_PYTHON.exists()
        else None
    )
    if probe is None or probe.returncode != 0:
        missing = f"harbor-rewardkit in {HARBOR_PYTHON} (.ci/harbor-venv.sh)"
        pytest.fail(missing) if os.environ.get("CI") else pytest.skip(missing)
    root = tmp_path_factory.mktemp("judge-files")
    tests, case, out = root / "tests", root / "case", root / "out"
    for directory in (tests, case, out):
        directory.mkdir()
    for name, text in TOMLS.items():
        (tests / f"{name}.toml").write_text(text.replace("{tests}", str(tests)))
    (tests / "solution.md").write_text(REFERENCE + "\n")
    (tests / "rubric.md").write_text(RUBRIC)
    (case / "report.md").write_text("calc.py subtracted with +; fixed it.\n")
    (case / "notes.md").write_text("Ran the tests by hand.\n")
    (case / "scratch.txt").write_text("a file no judge lists\n")
    config = tests / "eval.yaml"
    config.write_text(
        "name: migrated\njudges:\n"
        + "".join(f"  - {{name: {name}, judge_file: {name}.toml}}\n" for name in TOMLS)
        + "reward:\n  formula: weighted\n  weights: {"
        + ", ".join(f"{name}: 1" for name in TOMLS)
        + "}\n"
    )
    for server in serve("openai"):
        script = Scripted(server)
        server.route = script
        environ = {
            **os.environ,
            "OPENAI_API_KEY": "sk-rewardkit-parity",
            "OPENAI_API_BASE": server.url,
            "OPENAI_BASE_URL": server.url,
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        }
        # rewardkit reads `files` relative to its working dir: the workspace, as the case.
        ran = subprocess.run(
            [
                *(str(HARBOR_PYTHON), "-m", "rewardkit", str(tests)),
                *("--workspace", str(case), "--output", str(out / "reward.json")),
            ],
            cwd=case,
            env=environ,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert ran.returncode == 0, ran.stdout + ran.stderr
        details = json.loads((out / "reward-details.json").read_text())["reward"]
        theirs = {part["name"]: part["detail"]["score"] for part in details["components"]}
        with pytest.MonkeyPatch.context() as patch:
            set_llm_env(patch)
            patch.setenv("OPENAI_BASE_URL", server.url)
            grading = grade(load_eval(config), case, Limits())
        yield {
            "rewardkit": theirs,
            "rewardkit_reward": json.loads((out / "reward.json").read_text())["reward"],
            "verifier": grading,
            "script": script,
        }


@pytest.mark.slow
@pytest.mark.parametrize("judge", list(TOMLS))
def test_each_judge_file_scores_as_rewardkit_scores_it(graded: dict[str, Any], judge: str) -> None:
    results = {result.name: result for result in graded["verifier"].results}
    assert results[judge].status is Status.OK, results[judge].error
    assert graded["rewardkit"][judge] == pytest.approx(EXPECTED[judge], abs=1e-4)
    assert results[judge].value == pytest.approx(EXPECTED[judge], abs=1e-9)


@pytest.mark.slow
def test_the_reward_is_rewardkits(graded: dict[str, Any]) -> None:
    """rewardkit's flat components averaged (a reward.toml's equal weights); eval.yaml's
    reward block weighs them the same."""
    reward = graded["verifier"].composition.reward
    assert graded["rewardkit_reward"] == pytest.approx(reward, abs=1e-4)
    assert reward == pytest.approx(sum(EXPECTED.values()) / len(EXPECTED))


@pytest.mark.slow
def test_individual_mode_asks_each_criterion_in_a_request_of_its_own(
    graded: dict[str, Any],
) -> None:
    script: Scripted = graded["script"]
    for client in ("rewardkit", "verifier"):
        asked = [names for names, _ in script.asked[client] if set(names) & {"severity"}]
        assert asked == [("severity",)], client
        for criterion in ("names_bug", "severity", "polite"):
            assert len(script.of(client, criterion)) == 1, (client, criterion)
    batched = [names for names, _ in script.asked["verifier"] if "readable" in names]
    assert batched == [("correct", "readable", "coverage", "docs")]


@pytest.mark.slow
def test_reasoning_effort_reference_and_files_reach_the_request(graded: dict[str, Any]) -> None:
    script: Scripted = graded["script"]
    for client in ("rewardkit", "verifier"):
        (request,) = script.of(client, "readable")
        assert request.body["reasoning_effort"] == "high", client
        text = json.dumps(request.body["messages"])
        assert REFERENCE in text and "Compare the agent's work against it" in text, client
        assert "subtracted with +" in text, client  # report.md, which the judge lists
        assert "a file no judge lists" not in text and "Ran the tests" not in text, client
        (each,) = script.of(client, "severity")
        assert "Ran the tests by hand" in json.dumps(each.body["messages"]), client
    # rewardkit sends medium when a file sets none; the verifier sends none.
    (theirs,) = script.of("rewardkit", "builds")
    (ours,) = script.of("verifier", "builds")
    assert theirs.body["reasoning_effort"] == "medium" and "reasoning_effort" not in ours.body


@pytest.mark.slow
def test_the_prompt_template_is_the_rubric_and_samples_are_reduced_alike(
    graded: dict[str, Any],
) -> None:
    script: Scripted = graded["script"]
    for client in ("rewardkit", "verifier"):
        requests = script.of(client, "tone")
        assert len(requests) == 3, client
        assert all("reads them on a phone" in json.dumps(r.body["messages"]) for r in requests)
    ours = {result.name: result for result in graded["verifier"].results}["template"]
    assert sorted(ours.details["sample_values"]) == pytest.approx([0.25, 0.75, 1.0])
