"""eval.yaml's `dataset.path`: each case gets its dataset entry's annotations, the text of
the files they name (`annotation_<key>_content`) and its input as the trusted task input.

Real dataset dirs and cases in tmp_path, graded by `verifier grade` and `verifier batch`
in real processes; `verifier check` reports the dataset.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from verifier.batch import discover_cases
from verifier.config import load_config
from verifier.dataset import survey
from verifier.errors import ConfigError
from verifier.grading import grade, load_eval
from verifier.judges import KINDS

VERIFIER = str(Path(sys.executable).with_name("verifier"))
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

EVAL = """\
name: with-dataset
annotations: {expected: from-eval-yaml, shared: from-eval-yaml}
dataset:
  path: cases
  schema: one dir per case
judges:
  - name: sees_oracle
    check: |
      oracle = outputs.get("annotation_oracle_content")
      return oracle is not None and oracle.strip() in outputs["files"].get("answer.txt", ""), repr(oracle)
  - name: sees_annotations
    check: |
      a = outputs["annotations"]
      return True, f"expected={a.get('expected')} shared={a.get('shared')} level={a.get('level')}"
  - name: sees_input
    check: |
      return True, f"{outputs['inputs']!r} trusted={outputs['inputs_trusted']}"
"""


def make_dataset(root: Path, entries: dict[str, dict[str, str | bytes]]) -> Path:
    """eval.yaml beside a dataset dir `cases/` holding the given entries."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "eval.yaml").write_text(EVAL)
    for case_id, files in entries.items():
        for relative, content in files.items():
            path = root / "cases" / case_id / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content)
    return root / "eval.yaml"


ENTRIES: dict[str, dict[str, str | bytes]] = {
    "t1": {
        "annotations.yaml": "oracle: refs/oracle.txt\nexpected: 42\nlevel: hard\n",
        "refs/oracle.txt": "forty-two\n",
        "input.yaml": "prompt: answer the question\n",
    },
    "t2": {
        "annotations.yaml": "oracle: oracle.txt\nnote: not a file name\n",
        "oracle.txt": "seven\n",
    },
}


def verifier(*args: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`verifier ARGS` in a real process."""
    return subprocess.run(
        [VERIFIER, *map(str, args)], capture_output=True, text=True, check=False, env=env
    )


def run_grade(config: Path, case: Path, out: Path, *args: str) -> dict:
    done = verifier("grade", "--config", config, "--case", case, "--out", out, *args)
    assert done.returncode == 0, done.stderr
    return json.loads((out / "judges.json").read_text())


def test_a_case_gets_its_entrys_annotations_files_and_input(tmp_path: Path) -> None:
    config = make_dataset(tmp_path / "suite", ENTRIES)
    case = tmp_path / "t1"
    case.mkdir()
    (case / "answer.txt").write_text("the answer: forty-two\n")
    (case / "input.yaml").write_text("prompt: the agent's own, ignored\n")
    judges = run_grade(config, case, tmp_path / "out")
    per_judge = judges["per_judge"]
    assert per_judge["sees_oracle"]["value"] is True
    assert per_judge["sees_oracle"]["rationale"] == "'forty-two\\n'"
    # The entry's annotations over eval.yaml's: the entry wins, eval.yaml's others stay.
    assert (
        per_judge["sees_annotations"]["rationale"] == "expected=42 shared=from-eval-yaml level=hard"
    )
    assert per_judge["sees_input"]["rationale"] == "{'prompt': 'answer the question'} trusted=True"
    assert judges["task_input"] == {"source": "cases/t1/input.yaml", "trusted": True}
    assert judges["dataset"] == {"case_id": "t1", "entry": "cases/t1"}
    assert judges["case_warnings"] == []
    assert judges["reward"] == 1.0


def test_case_id_names_the_entry_and_a_missing_one_is_a_case_warning(tmp_path: Path) -> None:
    config = make_dataset(tmp_path / "suite", ENTRIES)
    case = tmp_path / "some-trial"
    case.mkdir()
    (case / "answer.txt").write_text("seven\n")
    judges = run_grade(config, case, tmp_path / "out", "--case-id", "t2")
    assert judges["per_judge"]["sees_oracle"]["value"] is True
    assert judges["dataset"] == {"case_id": "t2", "entry": "cases/t2"}
    # t2 has no input file: the trusted task input falls back to eval.yaml's (none here).
    assert judges["task_input"] == {"source": None, "trusted": False}
    assert judges["per_judge"]["sees_annotations"]["rationale"] == (
        "expected=from-eval-yaml shared=from-eval-yaml level=None"
    )
    # Without --case-id the dir's name is the id: "some-trial" has no entry.
    judges = run_grade(config, case, tmp_path / "out2")
    assert judges["dataset"] == {"case_id": "some-trial", "entry": None}
    assert judges["case_warnings"] == [
        "case id 'some-trial' has no entry in the dataset cases/: graded without its "
        "annotations and input (pass --case-id to name the entry)"
    ]
    assert judges["per_judge"]["sees_oracle"]["value"] is False
    assert judges["per_judge"]["sees_oracle"]["rationale"] == "None"
    # The variable stands in for the flag.
    done = verifier(
        "grade",
        "--config",
        config,
        "--case",
        case,
        "--out",
        tmp_path / "out3",
        env={"VERIFIER_CASE_ID": "t2", "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "out3" / "judges.json").read_text())["dataset"]["entry"] == (
        "cases/t2"
    )


@pytest.mark.parametrize("case_id", ["../t1", "a/b", ""])
def test_a_case_id_that_is_not_a_name_is_a_usage_error(tmp_path: Path, case_id: str) -> None:
    config = make_dataset(tmp_path / "suite", ENTRIES)
    (tmp_path / "case").mkdir()
    done = verifier(
        "grade",
        "--config",
        config,
        "--case",
        tmp_path / "case",
        "--out",
        tmp_path / "out",
        "--case-id",
        case_id,
    )
    assert done.returncode == 2
    assert "--case-id" in done.stderr and "Traceback" not in done.stderr


def test_only_file_names_inside_the_dataset_become_content(tmp_path: Path) -> None:
    entries: dict[str, dict[str, str | bytes]] = {
        "t": {
            "annotations.yaml": textwrap.dedent("""\
                text: oracle.txt
                blob: image.png
                folder: refs
                missing: nowhere.txt
                sentence: "a description\\nover two lines"
                absolute: /etc/hostname
                number: 7
                shared: ../shared.txt
            """),
            "oracle.txt": "the text",
            "image.png": b"\x89PNG\0\0binary",
            "refs/a.txt": "a",
        }
    }
    config = make_dataset(tmp_path, entries)
    (tmp_path / "cases" / "shared.txt").write_text("for every case")
    entry = load_config(config, KINDS).dataset.case("t")  # type: ignore[union-attr]
    assert entry is not None
    assert dict(entry.contents) == {
        "annotation_text_content": "the text",
        "annotation_blob_content": {
            "_binary": True,
            "path": str(tmp_path.resolve() / "cases" / "t" / "image.png"),
            "name": "image.png",
        },
        "annotation_shared_content": "for every case",
    }
    assert entry.annotations["number"] == 7
    # What the agent is given: everything but annotations.yaml and the annotated files.
    assert [str(p) for p in entry.agent_inputs()] == ["refs/a.txt"]


@pytest.mark.parametrize(
    ("arrange", "message"),
    [
        (lambda d: (d / "annotations.yaml").write_text("a: [\n"), "invalid YAML"),
        (lambda d: (d / "annotations.yaml").write_text("- a list\n"), "must be a YAML mapping"),
        (
            lambda d: (d / "annotations.yaml").write_text("oracle: ../../eval.yaml\n"),
            "leads outside the dataset",
        ),
        (
            lambda d: (
                (d / "annotations.yaml").write_text("oracle: link.txt\n"),
                (d / "link.txt").symlink_to(d / "input.yaml"),
            ),
            "is a symlink",
        ),
        (lambda d: (d / "input.yaml").write_text("prompt: [\n"), "invalid YAML"),
    ],
)
def test_a_broken_entry_is_a_config_error_naming_the_file(
    tmp_path: Path, arrange, message: str
) -> None:
    config = make_dataset(tmp_path / "suite", ENTRIES)
    arrange(tmp_path / "suite" / "cases" / "t1")
    case = tmp_path / "t1"
    case.mkdir()
    done = verifier("grade", "--config", config, "--case", case, "--out", tmp_path / "out")
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    assert "cases/t1/" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "out" / "reward.json").exists()
    # check lists it, and the other entries are fine.
    checked = verifier("check", config)
    assert checked.returncode == 2
    assert "invalid (1 problem)" in checked.stdout and message in checked.stdout


@pytest.mark.parametrize(
    ("block", "message"),
    [
        ("dataset: [cases]", "dataset: must be a mapping"),
        ("dataset: {path: /abs/cases}", "must be a directory inside eval.yaml's dir"),
        ("dataset: {path: ../cases}", "must be a directory inside eval.yaml's dir"),
        ("dataset: {path: afile}", "is not a directory"),
        ("dataset: {path: dangling}", "is not a directory"),
        ("dataset: {path: 5}", "must be a directory relative to eval.yaml"),
    ],
)
def test_a_bad_dataset_path_is_a_load_error(tmp_path: Path, block: str, message: str) -> None:
    (tmp_path / "afile").write_text("not a dir")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    config = tmp_path / "eval.yaml"
    config.write_text(f"{block}\njudges:\n  - name: a\n    check: return True\n")
    with pytest.raises(ConfigError, match=message):
        load_eval(config)


def test_an_absent_dataset_dir_is_a_case_warning_not_a_load_error(tmp_path: Path) -> None:
    """agent-eval-harness's root eval.yaml names `eval/dataset/cases`, which its runs
    generate: a package shipping eval.yaml alone grades, without annotations."""
    config = tmp_path / "eval.yaml"
    config.write_text(
        "dataset: {path: eval/dataset/cases, schema: text}\njudges:\n  - name: a\n"
        '    check: return not outputs.get("annotations")\n'
    )
    case = tmp_path / "case"
    case.mkdir()
    (case / "out.md").write_text("x")
    out = tmp_path / "out"
    graded = verifier("grade", "--config", config, "--case", case, "--out", out)
    assert graded.returncode == 0, graded.stderr
    judges = json.loads((out / "judges.json").read_text())
    assert judges["reward"] == 1.0 and judges["dataset"] == {"case_id": "case", "entry": None}
    (warning,) = judges["case_warnings"]
    assert "dataset.path 'eval/dataset/cases' does not exist beside eval.yaml" in warning
    checked = verifier("check", config)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "valid (1 warning)" in checked.stdout
    assert "dataset: eval/dataset/cases/: absent" in checked.stdout
    assert "does not exist beside eval.yaml" in checked.stderr
    strict = verifier("check", config, "--strict")
    assert strict.returncode == 2 and "does not exist beside eval.yaml" in strict.stderr
    made = verifier("task", "init", tmp_path / "tasks", "--config", config, "--from-dataset")
    assert made.returncode == 2 and "no task to make" in made.stderr


def test_no_dataset_path_means_no_dataset(tmp_path: Path) -> None:
    config = tmp_path / "eval.yaml"
    config.write_text("dataset: {schema: text}\njudges:\n  - name: a\n    check: return True\n")
    assert load_eval(config).config.dataset is None
    case = tmp_path / "case"
    case.mkdir()
    grading = grade(load_eval(config), case)
    assert grading.case_id is None and grading.case_warnings == (
        "the case dir is empty: the agent left nothing",
    )


def test_an_output_named_like_an_annotation_key_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "eval.yaml"
    config.write_text(
        "outputs: [{path: out/annotation_oracle}]\njudges:\n  - name: a\n    check: return True\n"
    )
    with pytest.raises(ConfigError, match="annotation_oracle_content"):
        load_eval(config)


def test_check_reports_the_anova_example_dataset() -> None:
    done = verifier("check", FIXTURES / "anova-example" / "eval.yaml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (
        "dataset: dataset/: 4 cases; annotation keys: instruction, oracle "
        "(files, as annotation_<key>_content: instruction, oracle)\n"
    ) in done.stdout


def test_survey_names_entries_without_input_and_unusable_ids(tmp_path: Path) -> None:
    config = make_dataset(tmp_path, {**ENTRIES, "bad id": {"input.yaml": "prompt: x\n"}})
    dataset = load_config(config, KINDS).dataset
    assert dataset is not None
    surveyed = survey(dataset)
    assert surveyed.case_ids == ("bad id", "t1", "t2")
    assert surveyed.annotation_keys == ("expected", "level", "note", "oracle")
    assert surveyed.file_keys == ("oracle",)
    assert surveyed.without_input == ("t2",)
    assert [error.source for error in surveyed.problems] == [str(dataset.root / "bad id")]


def test_batch_gives_each_case_its_own_entry(tmp_path: Path) -> None:
    config = make_dataset(tmp_path / "suite", ENTRIES)
    cases = tmp_path / "cases"
    for case_id, answer in (("t1", "forty-two"), ("t2", "forty-two"), ("t3", "")):
        (cases / case_id).mkdir(parents=True)
        (cases / case_id / "answer.txt").write_text(answer)
    done = verifier("batch", "--config", config, "--cases", cases, "--out", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    rewards = {
        case_id: json.loads((tmp_path / "out" / case_id / "judges.json").read_text())
        for case_id in ("t1", "t2", "t3")
    }
    assert rewards["t1"]["reward"] == 1.0  # its oracle is forty-two
    assert rewards["t2"]["reward"] == 0.0  # its oracle is seven
    assert rewards["t2"]["dataset"]["entry"] == "cases/t2"
    assert rewards["t3"]["dataset"] == {"case_id": "t3", "entry": None}
    assert rewards["t3"]["case_warnings"][0].startswith("case id 't3' has no entry")
    # A changed entry changes the config: the rerun grades again (no --force).
    (tmp_path / "suite" / "cases" / "t2" / "oracle.txt").write_text("forty-two\n")
    done = verifier("batch", "--config", config, "--cases", cases, "--out", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "out" / "t2" / "reward.json").read_text())["reward"] == 1.0


def test_a_harbor_trial_is_named_by_its_task_dir(tmp_path: Path) -> None:
    job = tmp_path / "job"
    trial = job / "task-0010__AbCdEf"
    (trial / "artifacts" / "app").mkdir(parents=True)
    (job / "config.json").write_text(json.dumps({"job_name": "job"}))
    (trial / "config.json").write_text(json.dumps({"task": {"path": "/x/tasks/task-0010"}}))
    other = job / "task-0031__XyZ"
    (other / "artifacts").mkdir(parents=True)
    found = discover_cases(job)
    assert [(case.name, case.case_id) for case in found] == [
        ("task-0010__AbCdEf", "task-0010"),
        ("task-0031__XyZ", "task-0031"),  # no config.json: the name before Harbor's suffix
    ]
