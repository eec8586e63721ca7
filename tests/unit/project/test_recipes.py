"""docs/architecture.md's recipes, held to the code.

A recipe names the files, registries and methods an extension touches; when the code
moves on and the recipe does not, the next contributor follows it into a file that is
gone or a signature that changed. The recipes are read here by the convention their
section states: every `span` is a path, a `verifier` command, an eval.yaml key
(`key:`), a file name, a dotted name (`verifier.module.name`, `Class.member`), a name
(a call may show its parameters) or a literal (`"category"`, `(value, rationale)`).
Anything else fails, so that no new kind of span goes unchecked. Names are looked up
in the source (ast) of the modules the recipe names, never imported, so a module
renamed under a recipe is a failure that says which recipe and which name.

Then four recipes are followed with a toy extension (a builtin, a judge kind, an LLM
provider, a reward mode) registered the way the recipe says, and a case is graded
with it. A registry other modules imported by name is replaced in each of them, as an
edit of its source would be seen after a restart.
"""

from __future__ import annotations

import ast
import dataclasses
import re
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

import attrs
import pytest

from tests.llm_servers import FakeLLM
from tests.paths import REPO
from verifier import reward
from verifier.config import EvalConfig, JudgeConfig, Key, KindDefaults, Locator, reward_block
from verifier.config.fields import Number, Text
from verifier.config.load import eval_schema
from verifier.errors import ConfigError
from verifier.grading import grade, load_eval
from verifier.judges import KINDS, kinds
from verifier.judges.base import Pool
from verifier.judges.builtins.arguments import CasePath
from verifier.judges.builtins.files import case_text
from verifier.judges.builtins.registry import BUILTINS, argument, builtin
from verifier.judges.llm import providers
from verifier.results import Composition

ARCHITECTURE = REPO / "docs" / "architecture.md"
VERIFIER = str(Path(sys.executable).with_name("verifier"))
RECIPE_TITLES = (
    "A builtin",
    "A judge kind",
    "An LLM provider",
    "A reward mode",
    "An output file",
    "An option",
)
# What a recipe fills in, a Protocol (each member) or a record (each field): the recipe
# must name them all.
MEMBERS, FIELDS = "members", "fields"
FILLED_IN = {
    "A builtin": [("verifier/judges/builtins/registry.py", "BuiltinContext", FIELDS)],
    "A judge kind": [
        ("verifier/judges/kinds/__init__.py", "RunnableKind", MEMBERS),
        ("verifier/config/records.py", "JudgeKind", MEMBERS),
    ],
    "An LLM provider": [
        ("verifier/judges/llm/providers.py", "Endpoint", MEMBERS),
        ("verifier/judges/llm/providers.py", "Provider", FIELDS),
    ],
    "A reward mode": [("verifier/reward.py", "RewardMode", MEMBERS)],
}


# --- reading the recipes ------------------------------------------------------------


def recipes() -> dict[str, str]:
    """Each recipe's text by its title, from the Recipes section."""
    section = ARCHITECTURE.read_text().split("\n## Recipes\n", 1)[1].split("\n## ", 1)[0]
    parts = re.split(r"^### (.+)$", section, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def spans(text: str) -> list[str]:
    """The text's code spans, each on one line."""
    return [" ".join(span.split()) for span in re.findall(r"`([^`]+)`", text)]


PATH = re.compile(r"[\w.<>-]+(/[\w.<>-]+)*(\.py|\.md|/)")
FILE_NAME = re.compile(r"[\w-]+\.(json|txt|yaml|csv)")
KEY = re.compile(r"(\w+):")
NAME = re.compile(r"@?(?P<name>\w+(\.\w+)*)(\((?P<parameters>.*)\))?(=.+)?")
IDENTIFIER = re.compile(r"[A-Za-z_]\w*")


def expand(path: str) -> list[Path]:
    """The files (or dir) a written path stands for: `<kind>` is each file of its dir."""
    pattern = re.sub(r"<[^>]+>", "*", path.rstrip("/"))
    return sorted(REPO.glob(pattern)) if "*" in pattern else [REPO / pattern]


@dataclasses.dataclass
class Source:
    """What a module defines, as its source says (nothing is imported)."""

    path: Path
    top: set[str] = dataclasses.field(default_factory=set)  # names bound at module level
    imported: set[str] = dataclasses.field(default_factory=set)  # of them, by an import
    classes: dict[str, list[ast.ClassDef]] = dataclasses.field(default_factory=dict)
    functions: dict[str, list[list[str]]] = dataclasses.field(default_factory=dict)
    parameters: set[str] = dataclasses.field(default_factory=set)
    strings: set[str] = dataclasses.field(default_factory=set)
    # eval.yaml keys declared: Key("name", ...), or a builtin's `name: T = argument(...)`
    keys: set[str] = dataclasses.field(default_factory=set)

    @classmethod
    def read(cls, path: Path) -> Source:
        text = path.read_text()
        tree = ast.parse(text)
        source = cls(path, keys=set(re.findall(r"\bKey\(\s*\"(\w+)\"", text)))
        for node in tree.body:
            source.top.update(_bound_names(node))
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                source.imported.update(_bound_names(node))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                source.classes.setdefault(node.name, []).append(node)
                for item in node.body:
                    if isinstance(item, ast.FunctionDef):
                        source._function(item, method=_is_method(item))
                    elif _declares_argument(item):
                        assert isinstance(item, ast.AnnAssign)
                        assert isinstance(item.target, ast.Name)
                        source.keys.add(item.target.id)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                source.strings.add(node.value)
        for node in tree.body:
            if isinstance(node, ast.FunctionDef):
                source._function(node, method=False)
        return source

    def _function(self, node: ast.FunctionDef, method: bool) -> None:
        positional = [a.arg for a in (*node.args.posonlyargs, *node.args.args)]
        self.functions.setdefault(node.name, []).append(positional[1:] if method else positional)
        self.parameters.update(
            a.arg for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)
        )

    def members(self, class_name: str, fields_only: bool = False) -> set[str]:
        """A class's fields and (unless fields_only) its methods and class attributes."""
        found: set[str] = set()
        for node in self.classes.get(class_name, []):
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    found.add(item.target.id)
                elif not fields_only:
                    found.update(n for n in _bound_names(item) if not n.startswith("__"))
        return found


def _bound_names(node: ast.stmt) -> set[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, ast.Assign):
        return {t.id for t in node.targets if isinstance(t, ast.Name)}
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return {node.target.id}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    return set()


def _declares_argument(node: ast.stmt) -> bool:
    """`name: T = argument(...)`: a field of a builtin's arguments record."""
    return (
        isinstance(node, ast.AnnAssign)
        and isinstance(node.target, ast.Name)
        and isinstance(node.value, ast.Call)
        and isinstance(node.value.func, ast.Name)
        and node.value.func.id == "argument"
    )


def _is_method(node: ast.FunctionDef) -> bool:
    return not any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in node.decorator_list)


def module_file(dotted: str) -> tuple[Path, list[str]] | None:
    """`verifier.a.b.name` -> (verifier/a/b.py, ["name"]): the longest module prefix."""
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        base = REPO.joinpath(*parts[:end])
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                return candidate, parts[end:]
    return None


class Recipe:
    """One recipe's spans, checked against the modules it names."""

    def __init__(self, title: str, text: str) -> None:
        self.title = title
        self.spans = spans(text)
        modules: list[Path] = []
        for span in self.spans:
            if PATH.fullmatch(span):
                modules += [p for p in expand(span) if p.suffix == ".py" and p.is_file()]
            elif span.startswith("verifier."):
                found = module_file(span)
                if found is not None:
                    modules.append(found[0])
        self.sources = [Source.read(path) for path in dict.fromkeys(modules)]

    def problems(self) -> Iterator[str]:
        for span in self.spans:
            problem = self.problem(span)
            if problem is not None:
                yield f"{self.title}: `{span}` {problem}"

    def problem(self, span: str) -> str | None:
        if span.startswith(("(", '"')):
            return None  # a literal: what a builtin returns, a category's name
        if span == "verifier" or span.startswith("verifier "):
            return None  # a command: test_every_command_a_recipe_names_runs
        if span.startswith("make "):
            target = span.removeprefix("make ")
            makefile = (REPO / "Makefile").read_text()
            return (
                None
                if re.search(rf"^{re.escape(target)}:", makefile, re.MULTILINE)
                else ("names a make target the Makefile does not define")
            )
        if PATH.fullmatch(span):
            return (
                None
                if all(p.exists() for p in expand(span)) and expand(span)
                else ("names a path that does not exist")
            )
        if FILE_NAME.fullmatch(span):
            return (
                None
                if self.any(lambda s: span in s.strings)
                else ("is a file name no module the recipe names writes")
            )
        if match := KEY.fullmatch(span):
            return (
                None
                if self.any(lambda s: match[1] in s.keys | s.strings)
                else ("is an eval.yaml key no module the recipe names declares (Key(...)) or reads")
            )
        match = NAME.fullmatch(span)
        if match is None:
            return "is none of the kinds of span the Recipes section lists"
        name = match["name"]
        if name.startswith("verifier."):
            return self.dotted_problem(name)
        first, *rest = name.split(".")
        if not self.any(lambda s: self.defines(s, first)):
            return f"names {first!r}, which no module the recipe names defines"
        if rest and not self.any(lambda s: rest[0] in s.members(first)):
            return f"names {first}.{rest[0]}, which {first} does not define"
        parameters = match["parameters"]
        if parameters is not None:
            return self.signature_problem(rest[-1] if rest else first, parameters)
        return None

    def any(self, test: Callable[[Source], bool]) -> bool:
        return any(test(source) for source in self.sources)

    @staticmethod
    def defines(source: Source, name: str) -> bool:
        return (
            name in source.top
            or name in source.parameters
            or any(name in source.members(c) for c in source.classes)
        )

    def dotted_problem(self, dotted: str) -> str | None:
        found = module_file(dotted)
        if found is None:
            return "is not in any module of the package"
        path, names = found
        source = Source.read(path)
        # A package's __init__ re-exports its API; any other module is named for what it
        # defines, not for what it happens to import (its home is where to read it).
        defined = source.top if path.name == "__init__.py" else source.top - source.imported
        if names and names[0] not in defined:
            return f"names {names[0]!r}, which {path.relative_to(REPO)} does not define"
        if len(names) > 1 and names[1] not in source.members(names[0]):
            return f"names {names[1]!r}, which {names[0]} does not define"
        return None

    def signature_problem(self, name: str, written: str) -> str | None:
        """A call written with bare parameter names must match every definition of it."""
        parameters = [p.strip() for p in written.split(",")] if written.strip() else []
        if not all(IDENTIFIER.fullmatch(p) for p in parameters):
            return None  # `Provider(...)`, `@builtin("category", ...)`: only the name counts
        defined = [found for s in self.sources for found in s.functions.get(name, [])]
        if not defined:
            return f"shows parameters, but {name} is no function of the modules it names"
        wrong = [found for found in defined if found != parameters]
        if wrong:
            return f"shows ({', '.join(parameters)}), but {name} takes ({', '.join(wrong[0])})"
        return None


def test_the_recipes_section_has_its_six_recipes() -> None:
    assert tuple(recipes()) == RECIPE_TITLES


@pytest.mark.parametrize("title", RECIPE_TITLES)
def test_every_path_and_name_a_recipe_gives_exists(title: str) -> None:
    recipe = Recipe(title, recipes()[title])
    assert recipe.sources, f"{title}: names no module of the package"
    assert list(recipe.problems()) == []


@pytest.mark.parametrize(("title", "filled_in"), FILLED_IN.items())
def test_a_recipe_names_every_member_of_what_it_fills_in(
    title: str, filled_in: list[tuple[str, str, str]]
) -> None:
    written = {
        NAME.fullmatch(span)["name"] for span in spans(recipes()[title]) if NAME.fullmatch(span)
    }
    for path, class_name, which in filled_in:
        source = Source.read(REPO / path)
        members = source.members(class_name, fields_only=which == FIELDS)
        assert members, f"{path} defines no {class_name} (renamed? fix the recipe and FILLED_IN)"
        assert sorted(members - written) == [], f"{title}: {class_name}'s members it leaves out"


@pytest.mark.slow
def test_every_command_a_recipe_names_runs() -> None:
    commands = {
        tuple(word for word in span.split()[1:] if not word.startswith("-"))
        for text in recipes().values()
        for span in spans(text)
        if span.startswith("verifier ")
    }
    assert commands
    for command in sorted(commands):
        shown = subprocess.run(
            [VERIFIER, *command, "--help"], capture_output=True, text=True, timeout=60
        )
        assert shown.returncode == 0, f"verifier {' '.join(command)} --help: {shown.stderr}"


def test_the_checker_refuses_what_the_recipes_once_said() -> None:
    """The drift these tests were written for, each caught with its reason."""
    drifted = Recipe(
        "old",
        "`verifier/judges/builtins/files.py` `verifier/reward.py` `builtins/json_files.py` "
        "`verifier.case.read_case_file` `combine(results, values, ranges)` `no_such_name` "
        "`no_such_key:` `Judged.no_such_member` `a span + of no kind`",
    )
    assert [problem.split("` ", 1)[1] for problem in drifted.problems()] == [
        "names a path that does not exist",
        "names 'read_case_file', which verifier/case.py does not define",
        "shows (results, values, ranges), but combine takes (judged)",
        "names 'no_such_name', which no module the recipe names defines",
        "is an eval.yaml key no module the recipe names declares (Key(...)) or reads",
        "names Judged.no_such_member, which Judged does not define",
        "is none of the kinds of span the Recipes section lists",
    ]


# --- following the recipes with a toy extension -----------------------------------


def replace_registry(
    monkeypatch: pytest.MonkeyPatch, home: ModuleType, name: str, extended: Any
) -> None:
    """home.name as extended, in home and in every verifier module that imported it by
    name (they hold the same object), as the edited source would be loaded."""
    original = getattr(home, name)
    for module_name, module in list(sys.modules.items()):
        if module_name.split(".")[0] == "verifier" and getattr(module, name, None) is original:
            monkeypatch.setattr(module, name, extended)


def write_eval(directory: Path, text: str) -> Path:
    directory.mkdir(exist_ok=True)
    path = directory / "eval.yaml"
    path.write_text(text)
    return path


@pytest.fixture
def toy_builtin() -> Iterator[str]:
    """toy/toy_word_in_file, registered as the builtin recipe says."""

    @attrs.frozen(kw_only=True)
    class ToyArguments:
        path: str = argument(CasePath(), required=True)
        word: str = argument(Text(non_empty=True), required=True)

    def toy_word_in_file(context: Any, arguments: ToyArguments) -> tuple[bool, str]:
        path, word = arguments.path, arguments.word
        text, problem = case_text(context, path)
        if text is None:
            return False, problem
        return word in text.split(), f"{path} {'says' if word in text.split() else 'lacks'} {word}"

    builtin("toy", ToyArguments)(toy_word_in_file)
    try:
        yield "toy/toy_word_in_file"
    finally:
        del BUILTINS["toy_word_in_file"]


def test_a_toy_builtin_grades_a_case(toy_builtin: str, tmp_path: Path) -> None:
    config = write_eval(
        tmp_path / "config",
        f"""judges:
  - {{name: said, builtin: {toy_builtin}, arguments: {{path: notes.md, word: done}}}}
""",
    )
    loaded = load_eval(config)
    for text, expected in (("all done here\n", 1.0), ("not yet\n", 0.0)):
        case = tmp_path / f"case-{expected}"
        case.mkdir()
        (case / "notes.md").write_text(text)
        graded = grade(loaded, case)
        assert graded.reward == expected, graded.results
    missing = tmp_path / "case-missing"
    missing.mkdir()
    result = grade(loaded, missing).results[0]
    assert (result.value, result.status.value) == (False, "ok")
    assert "notes.md" in result.rationale
    misspelt = write_eval(
        tmp_path / "bad",
        f"""judges:
  - {{name: said, builtin: {toy_builtin}, arguments: {{path: notes.md, wrod: done}}}}
""",
    )
    with pytest.raises(ConfigError, match="wrod"):
        load_eval(misspelt)
    assert toy_builtin in str(eval_schema(KINDS))


class ConstantSpec:
    def __init__(self, value: float) -> None:
        self.value = value


class ConstantKind(KindDefaults):
    """`constant: 0.25`: a judge whose value is written in eval.yaml."""

    name = "constant"
    case_bound = False
    keys = (Key("constant", Number(minimum=0, maximum=1, description="the value")),)
    claim_keys = ("constant",)
    pool = Pool.CPU

    def spec(self, values: Mapping[str, Any], at: Locator) -> ConstantSpec:
        if "constant" not in values:
            raise at.child("constant").error("must be a number")
        return ConstantSpec(values["constant"])

    def entry_schema(self) -> dict[str, Any]:
        return {}

    def prepare(self, judge: JudgeConfig, config: EvalConfig) -> Callable[[Any], Any]:
        value = judge.spec.value
        return lambda context: value

    def describe(self, judge: JudgeConfig, config: EvalConfig) -> str:
        return f"constant {judge.spec.value}"


def test_a_toy_judge_kind_grades_a_case(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:

    toy = ConstantKind()
    module = ModuleType(f"{kinds.__name__}.{toy.name}")  # verifier/judges/kinds/constant.py
    module.KIND = toy  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    extended = kinds.KindRegistry({**kinds.KINDS.triggers, toy.name: toy.claim_keys})
    replace_registry(monkeypatch, kinds, "KINDS", extended)
    config = write_eval(
        tmp_path / "config",
        """judges:
  - {name: fixed, constant: 0.25, score_range: [0, 1]}
  - {name: passed, check: 'return True'}
""",
    )
    case = tmp_path / "case"
    case.mkdir()
    graded = grade(load_eval(config), case)
    assert [(r.name, r.kind, r.value) for r in graded.results] == [
        ("fixed", "constant", 0.25),
        ("passed", "check", True),
    ]
    assert graded.reward == 0.25
    with pytest.raises(ConfigError, match="constant"):
        load_eval(write_eval(tmp_path / "bad", "judges:\n  - {name: x, constant: 7}\n"))


def test_a_toy_llm_provider_is_chosen_and_its_key_redacted(
    monkeypatch: pytest.MonkeyPatch, openai_server: FakeLLM, judge_of: Callable[..., Any]
) -> None:

    toy = providers.Provider(
        name="toyllm",
        label="Toy",
        aliases=("toy-compatible",),
        base_url_env="TOY_LLM_URL",
        default_base_url="http://127.0.0.1:9/v1",
        key_env=("TOY_LLM_API_KEY",),  # a name redact.py's pattern takes for a secret
        model_prefixes=("toymodel",),
        endpoint=providers.OpenAIChat,
    )
    replace_registry(monkeypatch, providers, "PROVIDERS", (*providers.PROVIDERS, toy))
    for alias in (toy.name, *toy.aliases):
        monkeypatch.setitem(providers.PROVIDERS_BY_ALIAS, alias, toy)
    bearer = "toy-bearer-0123456789abcdef"
    monkeypatch.setenv("TOY_LLM_URL", openai_server.url)
    monkeypatch.setenv("TOY_LLM_API_KEY", bearer)
    for judge in (
        "provider: toy-compatible, model: judge-model",
        "model: toymodel-7",
    ):
        openai_server.queue(openai_server.grade(score=4, rationale=f"key {bearer} seen"))
        verdict = judge_of(
            None, f"- {{name: q, llm_rubric: Clear?, score_range: [1, 5], {judge}}}"
        )()
        assert verdict.value == 4.0
        assert verdict.details["provider"] == "toyllm"
        assert bearer not in verdict.rationale
        assert openai_server.received[-1].headers["authorization"] == f"Bearer {bearer}"
    with pytest.raises(ConfigError, match="toy-compatible"):
        judge_of(None, "- {name: q, llm_rubric: Clear?, provider: toy-compat, model: m}")


@dataclasses.dataclass(frozen=True)
class MinimumReward:
    """`reward: {minimum: [a, b]}`: the lowest of the judges' values (clamped to [0, 1];
    a judge without a value counts 0.0)."""

    mode: ClassVar[str] = "minimum"
    keys: ClassVar[frozenset[str]] = frozenset({"minimum"})
    judges: tuple[str, ...]
    gate: bool = False
    score_range: tuple[float, float] | None = None
    on_error: str = "drop"

    @classmethod
    def claims(cls, block: Mapping[str, Any]) -> bool:
        return "minimum" in block

    @classmethod
    def from_block(cls, block: Mapping[str, Any], context: Any) -> MinimumReward:
        names = block["minimum"]
        if not isinstance(names, list) or not names:
            raise context.error("minimum", "must be a non-empty list of judge names")
        return cls(tuple(names), on_error=context.on_error)

    def combine(self, judged: Any) -> Any:
        scores = {
            name: min(1.0, max(0.0, float(judged.values.get(name, 0.0)))) for name in self.judges
        }
        return Composition(
            reward=min(scores.values()),
            mode=self.mode,
            gate_enabled=False,
            gate_failed=(),
            contributions=scores,
        )

    def describe(self) -> str:
        return f"minimum of {', '.join(self.judges)}"

    def normalized_judges(self) -> frozenset[str]:
        return frozenset()

    def referenced_names(self) -> Mapping[str, frozenset[str]]:
        return {"reward.minimum": frozenset(self.judges)}


def test_a_toy_reward_mode_composes_a_case(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:

    modes = list(reward.REWARD_MODES)
    modes.insert(modes.index(reward.WeightedReward), MinimumReward)
    replace_registry(monkeypatch, reward, "REWARD_MODES", tuple(modes))
    replace_registry(
        monkeypatch, reward_block, "ALL_KEYS", reward_block.ALL_KEYS | MinimumReward.keys
    )
    text = """judges:
  - {name: a, check: 'return 0.4', score_range: [0, 1]}
  - {name: b, check: 'return True'}
reward: {minimum: [a, b, c]}
"""
    config = write_eval(tmp_path / "config", text)
    loaded = load_eval(config)
    assert any("'c' matches no judge" in warning for warning in loaded.config.warnings)
    case = tmp_path / "case"
    case.mkdir()
    graded = grade(loaded, case)
    assert graded.composition.mode == "minimum"
    assert graded.reward == 0.0  # c has no value
    loaded = load_eval(write_eval(tmp_path / "two", text.replace(", c]", "]")))
    assert grade(loaded, case).reward == 0.4
    with pytest.raises(ConfigError, match=r"reward\.minimum"):
        load_eval(write_eval(tmp_path / "bad", text.replace("[a, b, c]", "[]")))
