"""Load-time validation: each bad eval.yaml names the file, the key and the fix."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from verifier.errors import ConfigError, ConfigErrors
from verifier.grading import load_eval

GOOD_JUDGE = "judges:\n  - {name: ok, check: 'return True'}\n"


def error_of(write_config: Callable[[str], Path], text: str) -> ConfigError:
    path = write_config(text)
    with pytest.raises(ConfigError) as caught:
        load_eval(path)
    assert str(path) in caught.value.message
    assert "\n" not in caught.value.message
    return caught.value


@pytest.mark.parametrize(
    ("text", "key", "problem"),
    [
        ("judges: [\n", "line 2", "invalid YAML"),
        ("- a\n- b\n", "", "must be a YAML mapping"),
        ("name: x\n", "judges", "non-empty list"),
        ("judges: []\n", "judges", "non-empty list"),
        ("judges:\n  - {name: 1bad, check: 'return 1'}\n", "judges[0].name", "identifier"),
        ("judges:\n  - {name: reward, check: 'return 1'}\n", "judges[0] (reward).name", "reserved"),
        ("judges:\n  - {name: mean, check: 'return 1'}\n", "judges[0] (mean).name", "reserved"),
        (
            "judges:\n  - {name: lambda, check: 'return 1'}\n",
            "judges[0] (lambda).name",
            "Python keyword",
        ),
        (
            "judges:\n  - {name: 'True', check: 'return 1'}\n",
            "judges[0] (True).name",
            "Python keyword",
        ),
        (
            "judges:\n  - {name: a, check: 'return 1'}\n  - {name: a, check: 'return 2'}\n",
            "judges[1] (a).name",
            "duplicate judge name",
        ),
        (
            "judges:\n  - {name: a, chekc: 'return 1'}\n",
            "judges[0] (a).chekc",
            "did you mean 'check'",
        ),
        ("judges:\n  - {name: a, description: x}\n", "judges[0] (a)", "has no judge"),
        ("judges:\n  - {name: a, agent: {x: 1}}\n", "judges[0] (a).agent", "not supported"),
        (
            "judges:\n  - {name: a, module: m}\n",
            "judges[0] (a).function",
            "both module and function",
        ),
        (
            "judges:\n  - {name: a, check: 'return 1', score_range: [5, 1]}\n",
            "judges[0] (a).score_range",
            "increasing",
        ),
        (
            "judges:\n  - {name: a, check: 'return 1', score_range: [1, .nan]}\n",
            "judges[0] (a).score_range",
            "finite",
        ),
        (
            "judges:\n  - {name: a, check: 'return 1', score_range: [1]}\n",
            "judges[0] (a).score_range",
            "[lo, hi]",
        ),
        (
            "judges:\n  - {name: a, check: 'return 1', feedback_type: bool, score_range: [0, 1]}\n",
            "judges[0] (a).feedback_type",
            "bool judges have no score_range",
        ),
        (
            "judges:\n  - {name: a, check: 'return 1', feedback_type: int, score_range: [0, 1.5]}\n",
            "judges[0] (a).score_range",
            "whole-number bounds",
        ),
        (
            "judges:\n  - {name: a, check: 'return 1', feedback_type: str}\n",
            "judges[0] (a).feedback_type",
            "bool, int or float",
        ),
        (
            "judges:\n  - {name: a, check: 'return 1', timeout: 0}\n",
            "judges[0] (a).timeout",
            "positive",
        ),
        (
            "judges:\n  - {name: a, check: 'return 1', arguments: [1]}\n",
            "judges[0] (a).arguments",
            "mapping",
        ),
        (
            "judges:\n  - {name: a, check: 'return (', }\n",
            "judges[0] (a).check",
            "does not compile",
        ),
        ("judges:\n  - {name: a, check: 'x = 1'}\n", "judges[0] (a).check", "never returns"),
        (
            "judges:\n  - {name: a, check: 'return 1', if: 'x ==' }\n",
            "judges[0] (a).if",
            "not a Python expression",
        ),
        (
            "judges:\n  - {name: a, llm_rubric: 'Is it good?'}\n",
            "judges[0] (a).model",
            "no model for this LLM judge",
        ),
        (GOOD_JUDGE + "outputs: [{path: ../x}]\n", "outputs[0].path", "without '..'"),
        (GOOD_JUDGE + "outputs: [{path: /abs}]\n", "outputs[0].path", "relative"),
        (GOOD_JUDGE + "outputs: [{path: .}]\n", "outputs[0].path", "not '.'"),
        (GOOD_JUDGE + "annotations: [1, 2]\n", "annotations", "mapping"),
        (GOOD_JUDGE + "annotations: missing.yaml\n", "annotations", "not a file beside eval.yaml"),
        (GOOD_JUDGE + "reward: 3\n", "reward", "mapping"),
        (GOOD_JUDGE + "reward: {judge: ok, formula: 'ok'}\n", "reward.judge", "cannot be combined"),
        (GOOD_JUDGE + "reward: {judge: ok, raw: [ok]}\n", "reward.judge", "cannot be combined"),
        (GOOD_JUDGE + "reward: {judge: nope}\n", "reward.judge", "not a defined judge"),
        (GOOD_JUDGE + "reward: {formula: 'ok ** 2'}\n", "reward.formula", "'**'"),
        (GOOD_JUDGE + "reward: {formula: 'x = ok'}\n", "reward.formula", "last line"),
        (GOOD_JUDGE + "reward: {weights: {ok: -1}}\n", "reward.weights.ok", "non-negative"),
        (
            GOOD_JUDGE + "reward: {weights: {ok: high}}\n",
            "reward.weights.ok",
            "non-negative number",
        ),
        (GOOD_JUDGE + "reward: {weights: {ok: 0}}\n", "reward.weights", "positive weight"),
        (GOOD_JUDGE + "reward: {gate: true}\n", "reward.weights", "positive weight"),
        (GOOD_JUDGE + "reward: {judge: ok, gate: 'yes'}\n", "reward.gate", "true or false"),
        (
            GOOD_JUDGE + "reward: {weights: {ok: 1}, score_range: [3, 3]}\n",
            "reward.score_range",
            "increasing",
        ),
        (GOOD_JUDGE + "reward: {wieghts: {ok: 1}}\n", "reward.wieghts", "did you mean 'weights'"),
        (GOOD_JUDGE + "reward: {weights: {ok: 1}, raw: ok}\n", "reward.raw", "list"),
        # values that would crash or mislead at run time are load errors
        (
            "judges:\n  - {name: a, check: 'return 1', timeout: 3000000}\n",
            "judges[0] (a).timeout",
            "at most 86400",
        ),
        (
            "judges:\n  - {name: a, check: 'return 1', timeout: " + "9" * 400 + "}\n",
            "judges[0] (a).timeout",
            "a huge number must be a positive number",
        ),
        (
            "judges:\n  - {name: a, check: 'return 1', timeout: " + "9" * 10_001 + "}\n",
            "",
            "invalid YAML: Exceeds the limit",
        ),
        (
            "judges:\n  - {name: a, check: 'return 1', score_range: [-1.0e+308, 1.0e+308]}\n",
            "judges[0] (a).score_range",
            "spans more than a float holds",
        ),
        (
            GOOD_JUDGE
            + "  - {name: b, check: 'return 1'}\nreward: {weights: {ok: 1.0e+308, b: 1.0e+308}}\n",
            "reward.weights",
            "add up to more than a float holds",
        ),
        (
            GOOD_JUDGE + "reward: {weights: {ok: " + "9" * 400 + "}}\n",
            "reward.weights.ok",
            "must be a non-negative number",
        ),
        (
            GOOD_JUDGE + "reward: {formula: '" + "9" * 10_001 + " * ok'}\n",
            "reward.formula",
            "is 10006 characters long",
        ),
        (
            GOOD_JUDGE + "reward: {formula: '" + "-" * 4_000 + "ok'}\n",
            "reward.formula",
            "nested too deeply",
        ),
        (
            GOOD_JUDGE + 'outputs: [{path: "a\\0b"}]\n',
            "outputs[0].path",
            "relative to the case dir",
        ),
        (
            "judges:\n  - {name: a, check: 'return 1', check: 'return 2'}\n",
            "line 2",
            "duplicate key 'check'",
        ),
        (
            "judges:\n  - {name: a, builtin: command_succeeds, arguments: {command: []}}\n",
            "judges[0] (a).arguments.command",
            "shell string or a list of strings",
        ),
        (
            "judges:\n  - {name: a, builtin: file_contains, arguments: {path: x, text: 5}}\n",
            "judges[0] (a).arguments.text",
            "must be a string",
        ),
        (
            "judges:\n  - {name: a, builtin: file_contains, arguments: {path: x, text: y, ignore_case: 'no'}}\n",
            "judges[0] (a).arguments.ignore_case",
            "must be true or false",
        ),
    ],
)
def test_invalid_config_is_a_one_line_error_naming_key_and_problem(
    write_config: Callable[[str], Path],
    monkeypatch: pytest.MonkeyPatch,
    text: str,
    key: str,
    problem: str,
) -> None:
    monkeypatch.delenv("EVAL_JUDGE_MODEL", raising=False)
    error = error_of(write_config, text)
    assert error.exit_code == 2
    assert key in error.key or key in error.message
    assert problem in error.message


def test_missing_config_file_says_how_to_point_at_one(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="file not found; pass --config"):
        load_eval(tmp_path / "eval.yaml")


def test_every_independent_problem_is_collected(write_config: Callable[[str], Path]) -> None:
    path = write_config(
        "judges:\n  - {name: a, chekc: x}\n  - {name: b, check: 'return 1', timeout: -1}\n"
        "reward: {weights: {c: -1}}\noutputs: [{path: ../x}]\n"
    )
    with pytest.raises(ConfigErrors) as caught:
        load_eval(path)
    keys = [problem.key for problem in caught.value.problems]
    assert keys == [
        "judges[0] (a).chekc",
        "judges[1] (b).timeout",
        "reward.weights.c",
        "outputs[0].path",
    ]
    assert "(and 3 more; run `verifier check`)" in caught.value.message


def test_reward_references_to_broken_judges_are_not_reported_twice(
    write_config: Callable[[str], Path],
) -> None:
    path = write_config("judges:\n  - {name: a, chekc: x}\nreward: {judge: a}\n")
    with pytest.raises(ConfigErrors) as caught:
        load_eval(path)
    assert len(caught.value.problems) == 1


def test_unknown_names_in_weights_raw_and_formula_are_warnings(
    load: Callable[[str], object],
) -> None:
    config = load(GOOD_JUDGE + "reward: {formula: 'ok * qualty', raw: [speed]}\n")
    warnings = "\n".join(config.warnings)  # type: ignore[attr-defined]
    assert "reward.formula: 'qualty' matches no judge; it is unbound" in warnings
    assert "reward.raw: 'speed' matches no judge" in warnings
    config = load(GOOD_JUDGE + "reward: {weights: {ok: 1, okk: 1}}\n")
    assert (
        "reward.weights: 'okk' matches no judge; it never has a value and is dropped (did you mean 'ok'?)"
        in "\n".join(config.warnings)
    )  # type: ignore[attr-defined]


def test_reward_score_range_warns_where_a_composed_judge_declares_another(
    load: Callable[[str], object],
) -> None:
    config = load(
        "judges:\n  - {name: q, check: 'return 1', score_range: [0, 10]}\n"
        "  - {name: r, check: 'return 1', score_range: [1, 5]}\n"
        "reward: {weights: {q: 1, r: 1}, score_range: [1, 5]}\n"
    )
    warnings = config.warnings  # type: ignore[attr-defined]
    assert len(warnings) == 1
    assert "judge 'q' declares its own score_range [0.0, 10.0]" in warnings[0]


def test_unknown_top_level_keys_warn_and_suite_keys_are_silent(
    load: Callable[[str], object],
) -> None:
    config = load(GOOD_JUDGE + "thresholds: {x: 1}\nmodels: {judge: m}\njudgse: []\n")
    assert config.warnings == (  # type: ignore[attr-defined]
        f"{config.path}: judgse: unknown top-level key, ignored (did you mean 'judges'?)",  # type: ignore[attr-defined]
    )
    assert config.default_model == "m"  # type: ignore[attr-defined]


def test_pairwise_judge_is_skipped_with_a_note(load: Callable[[str], object]) -> None:
    config = load(GOOD_JUDGE + "  - {name: pairwise, llm_rubric: 'A or B?'}\n")
    assert [judge.name for judge in config.judges] == ["ok"]  # type: ignore[attr-defined]
    assert "pairwise" in config.warnings[0]  # type: ignore[attr-defined]


def test_judge_kind_follows_the_documented_precedence(load: Callable[[str], object]) -> None:
    config = load(
        "judges:\n"
        "  - {name: a, builtin: file_exists, check: 'return 1', arguments: {path: x}}\n"
        "  - {name: b, check: 'return 1', module: m, function: f}\n"
    )
    assert [judge.kind for judge in config.judges] == ["builtin", "check"]  # type: ignore[attr-defined]
    warnings = "\n".join(config.warnings)  # type: ignore[attr-defined]
    assert "judges[0] (a).check: ignored: this is a builtin judge" in warnings
    assert "judges[1] (b).module: ignored: this is a check judge" in warnings


def test_every_kind_claims_the_entries_its_own_keys_make_without_the_others() -> None:
    """The registry imports a kind only for an entry with a key it names for it: an entry
    setting a kind's claim key alone is that kind's, also when the registry is asked
    first, in a fresh interpreter."""
    script = (
        "import sys\n"
        "from verifier.judges.kinds import KINDS\n"
        "for name in KINDS.names:\n"
        "    for key in KINDS.named(name).claim_keys:\n"
        "        claimed = KINDS.claiming({'name': 'j', key: 'file_exists'})\n"
        "        assert claimed is not None and claimed.name == name, (key, claimed)\n"
        "    assert KINDS.named(name).name == name\n"
        "entry = {'name': 'j', 'builtin': 'no_harmful_content'}\n"
        "assert KINDS.claiming(entry).name == 'llm'\n"
    )
    fresh = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert fresh.returncode == 0, fresh.stderr


def test_a_check_only_eval_imports_no_other_judge_kind(tmp_path: Path) -> None:
    config = tmp_path / "eval.yaml"
    config.write_text("judges:\n  - {name: a, check: 'return True'}\n")
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from verifier.grading import load_eval\n"
        f"load_eval(Path({str(config)!r}))\n"
        "print(sorted(m for m in sys.modules if m.startswith('verifier.judges.kinds.')))\n"
    )
    fresh = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert fresh.returncode == 0, fresh.stderr
    assert fresh.stdout.strip() == "['verifier.judges.kinds.check']"


def test_a_key_of_another_kind_is_known_and_a_typo_is_not(load: Callable[[str], object]) -> None:
    """Keys outside the judge's own kind are checked against every kind's keys."""
    config = load("judges:\n  - {name: a, check: 'return 1', prompt: 'x'}\n")
    assert "judges[0] (a).prompt: ignored: this is a check judge" in config.warnings[0]  # type: ignore[attr-defined]
    with pytest.raises(ConfigErrors, match=r"judges\[0\] \(a\)\.promt: unknown judge key"):
        load("judges:\n  - {name: a, check: 'return 1', promt: 'x'}\n")


def test_annotations_may_be_a_yaml_file_beside_eval_yaml(
    write_config: Callable[[str], Path],
) -> None:
    write_config("expected: 42\n", name="truth.yaml")
    config = load_eval(write_config(GOOD_JUDGE + "annotations: truth.yaml\n")).config
    assert config.annotations == {"expected": 42}


def test_step_and_description_are_accepted(load: Callable[[str], object]) -> None:
    config = load(
        "execution: {steps: [{id: s1, prompt: go}]}\n"
        "judges:\n  - {name: a, check: 'return 1', step: s1, description: d}\n"
    )
    assert config.judges[0].step == "s1"  # type: ignore[attr-defined]
    assert config.warnings == ()  # type: ignore[attr-defined]
