"""`verifier check` lists every independent problem of an eval.yaml in one run: one
test per kind of problem paired with each other kind (an eval.yaml with four errors was
reported two, then two more once those were fixed: a judge's preparation and the
dataset were looked at only when the rest loaded).

Each kind is what an author writes wrong; every pair is put in one eval.yaml (beside a
judge that is fine), and `verifier check` must name both.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import attrs
import pytest

from verifier.commands import check_config
from verifier.errors import EXIT_CONFIG


@attrs.frozen
class Mistake:
    judges: tuple[str, ...] = ()  # entries of `judges:`
    top: str = ""  # top-level YAML
    files: tuple[str, ...] = ()  # dirs made beside eval.yaml
    says: str = ""  # what check's line says


MISTAKES = {
    "a judge's key": Mistake(
        judges=('{name: a, chek: "return True"}',),
        says="judges[1] (a).chek: unknown judge key (did you mean 'check'?)",
    ),
    "a judge's value": Mistake(
        judges=('{name: t, check: "return True", timeout: -1}',),
        says="(t).timeout: -1 must be a positive number of seconds",
    ),
    "the reward block": Mistake(
        top="reward: {formula: 'ok ** 2'}\n",
        says="reward.formula: '**' is not allowed",
    ),
    "another block": Mistake(
        top="trajectory: ../trail.json\n",
        says="trajectory: '../trail.json' must be agent_logs",
    ),
    "a judge's code": Mistake(
        judges=('{name: b, check: "return ("}',),
        says="(b).check: does not compile",
    ),
    "a judge's module": Mistake(
        judges=("{name: m, module: no_module_here, function: f}",),
        says="(m).module: cannot import 'no_module_here'",
    ),
    "the dataset": Mistake(
        top="dataset: {path: cases}\n",
        files=("cases/bad id",),
        says="cases/bad id: is not a usable case id",
    ),
}


def checked(root: Path, *mistakes: Mistake) -> tuple[int, str]:
    """check's exit code and stdout for an eval.yaml holding these mistakes."""
    entries = ['{name: ok, check: "return True"}']
    entries += [entry for mistake in mistakes for entry in mistake.judges]
    text = "judges:\n" + "".join(f"  - {entry}\n" for entry in entries)
    text += "".join(mistake.top for mistake in mistakes)
    for mistake in mistakes:
        for directory in mistake.files:
            (root / directory).mkdir(parents=True)
    config = root / "eval.yaml"
    config.write_text(text)
    return check_config.run(check_config.CheckArgs(config, deadline=None, strict=False)), text


PAIRS = list(itertools.combinations(MISTAKES, 2))


@pytest.mark.parametrize(("first", "second"), PAIRS, ids=[" + ".join(pair) for pair in PAIRS])
def test_check_names_both_problems_of_a_pair_in_one_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], first: str, second: str
) -> None:
    code, text = checked(tmp_path, MISTAKES[first], MISTAKES[second])
    shown = capsys.readouterr().out
    assert code == EXIT_CONFIG, text
    assert "invalid (2 problems)" in shown, text + shown
    for mistake in (MISTAKES[first], MISTAKES[second]):
        assert mistake.says in shown, text + shown


def test_check_names_every_problem_of_one_judge_entry(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An unknown key, a bad timeout and a bad scale in one entry: three problems."""
    entry = Mistake(judges=('{name: a, chek: 1, check: "return 1", timeout: -1, score_range: 3}',))
    code, text = checked(tmp_path, entry)
    shown = capsys.readouterr().out
    assert code == EXIT_CONFIG
    assert "invalid (3 problems)" in shown, text + shown
    for says in ("(a).chek: unknown judge key", "(a).timeout: -1", "(a).score_range: "):
        assert says in shown, text + shown


def test_a_misspelt_judge_key_is_one_problem_not_also_no_judge(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`chek:` leaves the entry without a judge: that follows from the typo."""
    code, _ = checked(tmp_path, MISTAKES["a judge's key"])
    shown = capsys.readouterr().out
    assert code == EXIT_CONFIG
    assert "invalid (1 problem)" in shown and "has no judge" not in shown, shown
