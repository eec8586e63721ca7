"""python -m verifier (prefer `python -I -m verifier` so nothing in the cwd can shadow it)."""

from verifier.cli import main

main()
