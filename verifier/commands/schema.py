"""`verifier schema`: eval.yaml's JSON Schema, for editors and CI linters.

Generated from the declarations the loader checks files with (verifier.config), so
the schema and `verifier check` cannot drift apart; an editor shows most mistakes
as they are typed, `verifier check` every one.
"""

from __future__ import annotations

import json

import attrs

from verifier.config.load import eval_schema
from verifier.errors import EXIT_OK
from verifier.judges import KINDS


@attrs.frozen
class SchemaArgs:
    """`verifier schema` takes nothing but --debug."""


def run(args: SchemaArgs) -> int:  # noqa: ARG001 (every command takes its record)
    print(json.dumps(eval_schema(KINDS), indent=2))
    return EXIT_OK
