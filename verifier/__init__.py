"""Grades an agent's case directory against eval.yaml and writes a Harbor reward."""

__version__ = "0.1.0"
