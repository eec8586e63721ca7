"""Running code from the case where it cannot reach the grader.

A grade (or a batch) plans one `SandboxPolicy` before any judge forks (policy.py:
what is hidden, and how well; who runs as which UID) and hands a `Sandbox` holding it
to the judges that run commands, through their context; a batch worker's copy and a
judge's copy differ only in their slot and lane. `Sandbox.run(Command, case_dir)`
(command.py) then makes the command's dirs (dirs.py: HOME, its private copy of the
case made by case_copy.py, the provided files, the results dir), derives its plan
(plan.py: a pure function of the policy, the dirs and the request), confines its
process before exec (confine.py: no_new_privs, limits, Landlock, the seccomp filter of
supervisor.py), and keeps a bounded tail of its output (capture.py).
"""

from verifier.sandbox.capture import STDOUT_BYTES
from verifier.sandbox.command import Command, CommandRun, Sandbox, WorkdirProbe
from verifier.sandbox.plan import PROVIDED_ENV, RESULTS_ENV, command_path, leads_into
from verifier.sandbox.policy import SandboxPolicy, discard_policy, plan_policy

__all__ = [
    "PROVIDED_ENV",
    "RESULTS_ENV",
    "STDOUT_BYTES",
    "Command",
    "CommandRun",
    "Sandbox",
    "SandboxPolicy",
    "WorkdirProbe",
    "command_path",
    "discard_policy",
    "leads_into",
    "plan_policy",
]
