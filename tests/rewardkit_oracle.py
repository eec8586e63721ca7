"""Runs harbor-rewardkit's own criteria on rows of inputs and prints what each returns.

Run by tests/unit/judges/builtins/test_rewardkit_parity.py with the Python of Harbor's venv, where
`.ci/harbor-venv.sh` installs harbor-rewardkit (it needs Python >= 3.12, the
verifier's own tests may run on 3.11). Reads a JSON list of rows from stdin, each
{"criterion": name, "kwargs": {...}, "files": {relative path: text, or {"base64": ...}}};
every row gets a fresh workspace holding its files, and "{workspace}" in a string
argument becomes that workspace's path (rewardkit's trajectory criteria take an
absolute path). Prints a JSON list: each row's value, or {"raised": "<type>: <text>"}.
"""

from __future__ import annotations

import base64
import json
import os
import sys
import tempfile
import warnings
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no price list fetch

import rewardkit.criteria  # noqa: F401  (registers the built-in criteria)
from rewardkit.session import _factory_registry


def evaluate(row: dict) -> object:
    with tempfile.TemporaryDirectory() as directory:
        workspace = Path(directory)
        for relative, content in row.get("files", {}).items():
            path = workspace / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, dict):
                path.write_bytes(base64.b64decode(content["base64"]))
            else:
                path.write_bytes(content.encode("utf-8"))  # as given: no newline translation
        kwargs = {
            key: value.replace("{workspace}", directory) if isinstance(value, str) else value
            for key, value in row["kwargs"].items()
        }
        check = _factory_registry[row["criterion"]](**kwargs)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return check(workspace)
        except Exception as error:  # what rewardkit raises is a row's answer too
            return {"raised": f"{type(error).__name__}: {error}"}


def main() -> None:
    rows = json.load(sys.stdin)
    json.dump([evaluate(row) for row in rows], sys.stdout)


if __name__ == "__main__":
    main()
