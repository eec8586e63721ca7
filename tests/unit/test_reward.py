"""Every documented behaviour of reward-api.md and reward-block.md, as compose() sees it."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.unit.conftest import results
from verifier.config import EvalConfig
from verifier.errors import ConfigError
from verifier.results import Composition, JudgeResult
from verifier.reward import compose as compose_mode

Load = Callable[[str], EvalConfig]


def compose(judged: list[JudgeResult], config: EvalConfig) -> Composition:
    return compose_mode(config.reward, judged, config.scales())


JUDGES = """
judges:
  - {name: quality, check: "return 4", score_range: [1, 5]}
  - {name: efficiency, check: "return 0.5"}
  - {name: passed, check: "return True"}
  - {name: lint, check: "return True"}
"""


def reward_of(load: Load, block: str, **values: bool | float | str | None) -> float:
    config = load(JUDGES + block)
    return compose(results(**values), config).reward


# --- single-judge mode -------------------------------------------------------------------


def test_single_judge_value_is_the_reward_clamped_as_is(load: Load) -> None:
    block = "reward: {judge: efficiency}"
    assert reward_of(load, block, efficiency=0.7) == pytest.approx(0.7)
    assert reward_of(load, block, efficiency=1.3) == 1.0
    assert reward_of(load, block, efficiency=-2.0) == 0.0


def test_single_judge_normalize_false_clamps_even_a_ranged_value(load: Load) -> None:
    assert reward_of(load, "reward: {judge: quality, normalize: false}", quality=4.0) == 1.0


def test_single_judge_normalize_maps_from_the_judges_own_score_range(load: Load) -> None:
    assert reward_of(load, "reward: {judge: quality, normalize: true}", quality=4.0) == 0.75


def test_single_judge_normalize_falls_back_to_reward_score_range(load: Load) -> None:
    block = "reward: {judge: efficiency, normalize: true, score_range: [0, 10]}"
    assert reward_of(load, block, efficiency=5.0) == 0.5


def test_single_judge_normalize_defaults_to_one_to_five(load: Load) -> None:
    assert reward_of(load, "reward: {judge: efficiency, normalize: true}", efficiency=2.0) == 0.25


@pytest.mark.parametrize("missing", [None, "skipped"])
def test_single_judge_missing_skipped_or_errored_scores_zero(
    load: Load, missing: str | None
) -> None:
    assert reward_of(load, "reward: {judge: quality}", quality=missing, passed=True) == 0.0


def test_single_judge_boolean_is_one_or_zero(load: Load) -> None:
    assert reward_of(load, "reward: {judge: passed}", passed=True) == 1.0
    assert reward_of(load, "reward: {judge: passed}", passed=False) == 0.0


def test_single_judge_gate_defaults_to_off(load: Load) -> None:
    assert reward_of(load, "reward: {judge: efficiency}", efficiency=0.7, lint=False) == 0.7


def test_single_judge_gate_on_zeros_for_any_false_boolean(load: Load) -> None:
    block = "reward: {judge: efficiency, gate: true}"
    assert reward_of(load, block, efficiency=0.7, lint=False) == 0.0
    assert reward_of(load, block, efficiency=0.7, lint=True) == pytest.approx(0.7)


# --- weighted ----------------------------------------------------------------------------

WEIGHTED = """
reward:
  formula: weighted
  weights:
    quality: 0.7
    efficiency: 0.3
  raw: [efficiency]
  gate: true
"""


def test_weighted_is_the_weight_normalized_sum(load: Load) -> None:
    # quality 4 on [1, 5] -> 0.75; efficiency raw 0.5 -> 0.5
    assert reward_of(load, WEIGHTED, quality=4.0, efficiency=0.5) == pytest.approx(0.675)


def test_weighted_divides_by_the_sum_of_weights(load: Load) -> None:
    block = "reward: {weights: {quality: 3, efficiency: 1}, raw: [efficiency]}"
    assert reward_of(load, block, quality=5.0, efficiency=0.0) == pytest.approx(0.75)


def test_weighted_is_the_default_formula(load: Load) -> None:
    block = "reward: {weights: {quality: 1}}"
    assert reward_of(load, block, quality=3.0) == 0.5


def test_weighted_normalizes_unless_raw(load: Load) -> None:
    block = "reward: {weights: {efficiency: 1}}"
    # efficiency has no score_range: normalized over the default [1, 5] -> 0.5 is below 1 -> 0
    assert reward_of(load, block, efficiency=0.5) == 0.0
    assert reward_of(load, block + "\n", efficiency=3.0) == 0.5


def test_weighted_raw_values_are_clamped_not_normalized(load: Load) -> None:
    block = "reward: {weights: {efficiency: 1}, raw: [efficiency]}"
    assert reward_of(load, block, efficiency=1.7) == 1.0


def test_weighted_drops_missing_judges_and_renormalizes_upward(load: Load) -> None:
    both = reward_of(load, WEIGHTED, quality=5.0, efficiency=0.0)
    dropped = reward_of(load, WEIGHTED, quality=5.0, efficiency=None)
    assert both == pytest.approx(0.7)
    assert dropped == 1.0  # the reward can go up


def test_weighted_uses_reward_score_range_for_judges_without_their_own(load: Load) -> None:
    block = "reward: {weights: {efficiency: 1}, score_range: [0, 2]}"
    assert reward_of(load, block, efficiency=0.5) == 0.25


def test_weighted_judge_own_range_beats_reward_score_range(load: Load) -> None:
    block = "reward: {weights: {quality: 1}, score_range: [0, 10]}"
    assert reward_of(load, block, quality=4.0) == 0.75


def test_weighted_booleans_count_as_one_or_zero(load: Load) -> None:
    block = "reward: {weights: {passed: 1, efficiency: 1}, raw: [efficiency], gate: false}"
    assert reward_of(load, block, passed=False, efficiency=1.0) == 0.5


def test_weighted_with_every_judge_missing_is_zero(load: Load) -> None:
    config = load(JUDGES + WEIGHTED)
    composition = compose(results(quality=None, efficiency="skipped"), config)
    assert composition.reward == 0.0
    assert any("reward is 0.0" in warning for warning in composition.warnings)


# --- expressions -------------------------------------------------------------------------


def test_expression_binds_normalized_values(load: Load) -> None:
    block = """
reward:
  formula: "0.6 * quality + 0.4 * efficiency"
  score_range: [1, 5]
  raw: [efficiency]
  gate: false
"""
    assert reward_of(load, block, quality=4.0, efficiency=0.5) == pytest.approx(0.65)


def test_expression_result_is_clamped(load: Load) -> None:
    block = "reward: {formula: 'quality * 3 - 1'}"
    assert reward_of(load, block, quality=5.0) == 1.0
    assert reward_of(load, block, quality=1.0) == 0.0


def test_multi_line_expression_last_line_is_the_value(load: Load) -> None:
    block = """
judges:
  - {name: clarity, check: "return 3", score_range: [1, 5]}
  - {name: accuracy, check: "return 5", score_range: [1, 5]}
  - {name: efficiency, check: "return 0.9"}
reward:
  formula: |
    base = mean([clarity, accuracy])
    min(base, efficiency)
  raw: [efficiency]
  gate: false
"""
    config = load(block)
    both = results(clarity=3.0, accuracy=5.0, efficiency=0.9)
    assert compose(both, config).reward == pytest.approx(0.75)
    assert compose(results(clarity=3.0, accuracy=5.0, efficiency=0.6), config).reward == 0.6


def test_expression_with_an_unbound_judge_is_zero_with_a_warning(load: Load) -> None:
    config = load(JUDGES + "reward: {formula: 'quality + efficiency', raw: [efficiency]}")
    composition = compose(results(quality=5.0, efficiency=None), config)
    assert composition.reward == 0.0
    assert "efficiency" in composition.warnings[0]


def test_expression_division_by_zero_is_zero_with_a_warning(load: Load) -> None:
    config = load(JUDGES + "reward: {formula: 'quality / efficiency', raw: [efficiency]}")
    composition = compose(results(quality=5.0, efficiency=0.0), config)
    assert composition.reward == 0.0
    assert "ZeroDivisionError" in composition.warnings[0]


def test_expression_booleans_are_bound_as_one_or_zero(load: Load) -> None:
    block = "reward: {formula: 'passed * quality', gate: false}"
    assert reward_of(load, block, passed=True, quality=5.0) == 1.0
    assert reward_of(load, block, passed=False, quality=5.0) == 0.0


# --- gate --------------------------------------------------------------------------------


def test_gate_defaults_to_on_in_formula_mode(load: Load) -> None:
    block = "reward: {formula: 'quality'}"
    assert reward_of(load, block, quality=5.0, lint=False) == 0.0


def test_gate_scans_every_boolean_not_just_referenced_ones(load: Load) -> None:
    assert reward_of(load, WEIGHTED, quality=5.0, efficiency=1.0, lint=False) == 0.0


def test_double_gating_note_gate_off_leaves_other_booleans_alone(load: Load) -> None:
    block = "reward: {formula: 'passed * quality', gate: false}"
    assert reward_of(load, block, passed=True, quality=5.0, lint=False) == 1.0


def test_gate_ignores_errored_and_skipped_booleans(load: Load) -> None:
    assert (
        reward_of(load, WEIGHTED, quality=5.0, efficiency=1.0, lint=None, passed="skipped") == 1.0
    )


def test_gate_outcome_is_recorded(load: Load) -> None:
    config = load(JUDGES + WEIGHTED)
    composition = compose(results(quality=5.0, efficiency=1.0, lint=False), config)
    record = composition.to_json()
    assert record["gate"] == {"enabled": True, "passed": False, "failed_judges": ["lint"]}
    assert record["mode"] == "weighted"


# --- default composition (no reward block) -----------------------------------------------


def test_default_reward_json_example_is_0_875(load: Load) -> None:
    config = load("""
judges:
  - {name: files_exist, check: "return True"}
  - {name: rfe_quality, check: "return 4", score_range: [1, 5]}
  - {name: revision_quality, check: "return 5", score_range: [1, 5]}
""")
    composition = compose(results(files_exist=True, rfe_quality=4.0, revision_quality=5.0), config)
    assert composition.reward == 0.875


def test_default_booleans_gate_and_do_not_average(load: Load) -> None:
    assert reward_of(load, "", quality=3.0, passed=True) == 0.5
    assert reward_of(load, "", quality=5.0, passed=False) == 0.0


def test_default_numeric_without_range_uses_one_to_five(load: Load) -> None:
    assert reward_of(load, "", efficiency=2.0) == 0.25


def test_default_gates_only_all_passing_is_one(load: Load) -> None:
    assert reward_of(load, "", passed=True, lint=True) == 1.0


def test_default_skipped_judges_are_ignored(load: Load) -> None:
    assert reward_of(load, "", passed=True, quality="skipped") == 1.0


def test_default_nothing_scored_because_of_errors_is_zero(load: Load) -> None:
    assert reward_of(load, "", passed=True, quality=None) == 0.0


def test_default_errors_beside_scored_numbers_are_ignored(load: Load) -> None:
    assert reward_of(load, "", quality=5.0, efficiency=None) == 1.0


def test_default_values_above_range_clamp(load: Load) -> None:
    assert reward_of(load, "", efficiency=9.0) == 1.0


# --- reward.on_error: drop (the documented rules), zero, fail ---------------------------

GATED_JUDGES = JUDGES + '  - {name: tests_pass, check: "return True", feedback_type: bool}\n'


def composed(load: Load, block: str, **values: bool | float | str | None) -> Composition:
    config = load(GATED_JUDGES + block)
    return compose(results(**values), config)


def test_on_error_drop_is_the_default_and_can_raise_the_reward(load: Load) -> None:
    dropped = composed(load, WEIGHTED, quality=5.0, efficiency=None)
    assert (dropped.reward, dropped.on_error, dropped.errored) == (1.0, "drop", ("efficiency",))


def test_on_error_zero_counts_an_errored_weighted_judge_as_zero(load: Load) -> None:
    block = WEIGHTED + "  on_error: zero\n"
    assert composed(load, block, quality=5.0, efficiency=None).reward == pytest.approx(0.7)
    assert composed(load, block, quality=5.0, efficiency=0.0).reward == pytest.approx(0.7)


def test_on_error_zero_binds_an_errored_judge_to_zero_in_an_expression(load: Load) -> None:
    block = "reward: {formula: 'quality + efficiency', raw: [efficiency], on_error: zero}"
    composition = composed(load, block, quality=4.0, efficiency=None)
    assert composition.reward == pytest.approx(0.75) and composition.warnings == ()
    unbound = composed(load, block.replace(", on_error: zero", ""), quality=4.0, efficiency=None)
    assert unbound.reward == 0.0 and "not defined" in unbound.warnings[0]


def test_on_error_zero_averages_an_errored_numeric_judge_as_zero(load: Load) -> None:
    # quality 5 -> 1.0, efficiency errored -> 0.0: the mean is 0.5 (drop would give 1.0)
    assert composed(load, "reward: {on_error: zero}", quality=5.0, efficiency=None).reward == 0.5
    assert composed(load, "", quality=5.0, efficiency=None).reward == 1.0


def test_on_error_zero_fails_the_gate_for_an_errored_boolean_judge(load: Load) -> None:
    values = {"quality": 5.0, "efficiency": 1.0, "tests_pass": None}
    zero = composed(load, WEIGHTED + "  on_error: zero\n", **values)
    assert (zero.reward, zero.gate_failed) == (0.0, ("tests_pass",))
    assert composed(load, WEIGHTED, **values).reward == 1.0
    default = composed(load, "reward: {on_error: zero}", **values)
    assert (default.reward, default.gate_failed) == (0.0, ("tests_pass",))


def test_on_error_zero_fails_the_gate_for_an_errored_verdict_builtin(load: Load) -> None:
    """A builtin without a partial-credit scale gives verdicts: errored, it is a failed
    gate, not a skipped one, though eval.yaml declares no feedback_type."""
    config = load(
        JUDGES
        + "  - {name: report, builtin: file_exists, arguments: {path: a}}\n"
        + WEIGHTED
        + "  on_error: zero\n"
    )
    assert config.judge("report").feedback_type == "bool"
    zero = compose(results(quality=5.0, efficiency=1.0, report=None), config)
    assert (zero.reward, zero.gate_failed) == (0.0, ("report",))


def test_an_llm_builtin_is_a_verdict_and_an_llm_rubric_is_not(load: Load) -> None:
    config = load(
        JUDGES + "  - {name: complete, builtin: quality/output_completeness, "
        "model: openai/m}\n  - {name: rubric, llm_rubric: grade it, model: openai/m}\n"
    )
    assert config.judge("complete").feedback_type == "bool"
    assert config.judge("rubric").feedback_type is None


def test_a_partial_credit_builtin_keeps_its_range_and_no_verdict_type(load: Load) -> None:
    config = load(
        JUDGES + "  - {name: rate, builtin: diff_ratio, arguments: {path: a, expected: b}}\n"
    )
    assert (config.judge("rate").feedback_type, config.judge("rate").score_range) == (None, (0, 1))


def test_a_builtin_with_a_declared_range_is_not_made_a_verdict(load: Load) -> None:
    config = load(
        JUDGES + "  - {name: report, builtin: file_exists, arguments: {path: a}, "
        "score_range: [0, 1]}\n"
    )
    assert config.judge("report").feedback_type is None


def test_on_error_is_recorded_in_the_composition(load: Load) -> None:
    record = composed(load, WEIGHTED + "  on_error: zero\n", quality=5.0, efficiency=None).to_json()
    assert record["on_error"] == "zero" and record["errored_judges"] == ["efficiency"]


def test_on_error_must_be_a_known_policy(load: Load) -> None:
    with pytest.raises(ConfigError, match=r"reward\.on_error: 'ignore' must be drop, zero or fail"):
        load(JUDGES + "reward: {weights: {quality: 1}, on_error: ignore}")


def test_a_reward_key_without_a_value_keeps_its_default(load: Load) -> None:
    """`gate:` with nothing after it is null: not set, so the gate stays on."""
    block = "reward: {formula: weighted, weights: {quality: 1}, gate: null}"
    assert reward_of(load, block, quality=5.0, passed=False) == 0.0
    assert reward_of(load, block, quality=5.0, passed=True) == 1.0
