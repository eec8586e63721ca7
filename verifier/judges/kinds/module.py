"""`module:` + `function:` judges: a callable from a module beside eval.yaml.

Imported at load time, only from the directory that holds eval.yaml (never from
the case dir or the working directory), so a missing module fails the config once.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from verifier.config import EvalConfig, JudgeConfig, Key, KindDefaults, Locator
from verifier.config.fields import Text
from verifier.judges.base import JudgeContext, Pool


@attrs.frozen
class ModuleSpec:
    module: str
    function: str


class ModuleKind(KindDefaults):
    name = "module"
    pool = Pool.CPU
    case_bound = False
    keys = (
        Key("module", Text(non_empty=True, description="a dotted module beside eval.yaml")),
        Key(
            "function",
            Text(non_empty=True, description="called as fn(outputs=record, **arguments)"),
        ),
    )
    claim_keys = ("module", "function")

    def spec(self, values: Mapping[str, Any], at: Locator) -> ModuleSpec:
        for key in ("module", "function"):
            if key not in values:
                raise at.child(key).error("module judges need both module and function")
        return ModuleSpec(values["module"], values["function"])

    def entry_schema(self) -> dict[str, Any]:
        """Both keys set (not null)."""
        return {
            "required": list(self.claim_keys),
            "properties": {key: {"type": "string"} for key in self.claim_keys},
        }

    def prepare(self, judge: JudgeConfig, config: EvalConfig) -> Callable[[JudgeContext], Any]:
        """Import the module from eval.yaml's dir; `fn(outputs=record, **arguments)`."""
        spec: ModuleSpec = judge.spec
        base_dir = str(config.base_dir)
        if base_dir not in sys.path:
            sys.path.insert(0, base_dir)
        at = config.locator(f"{judge.key}.module")
        try:
            module = importlib.import_module(spec.module)
        except Exception as error:
            raise at.error(
                f"cannot import {spec.module!r} from {base_dir}: {type(error).__name__}: {error}"
            ) from None
        module_file = getattr(module, "__file__", None)
        if module_file is None or not Path(module_file).resolve().is_relative_to(config.base_dir):
            raise at.error(
                f"{spec.module!r} resolves to {module_file or 'a built-in module'}, not a file "
                f"under {base_dir}; rename the judge module"
            )
        function = getattr(module, spec.function, None)
        if not callable(function):
            raise config.locator(f"{judge.key}.function").error(
                f"{spec.module}.{spec.function} is not a function"
            )
        arguments = dict(judge.arguments)
        return lambda context: function(outputs=context.record, **arguments)

    def describe(self, judge: JudgeConfig, config: EvalConfig) -> str:
        return f"module {judge.spec.module}.{judge.spec.function}"


KIND = ModuleKind()
