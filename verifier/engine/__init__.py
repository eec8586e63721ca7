"""The judge engine: each judge of a case in its own forked process, nothing left behind.

parent   the grader side: scheduling, pipes, timeouts, memory, orphans, redaction
child    the judge's process: isolation, the judge, its value, one result line
"""

from verifier.engine.parent import Limits, guard_grader, run_judges

__all__ = ["Limits", "guard_grader", "run_judges"]
