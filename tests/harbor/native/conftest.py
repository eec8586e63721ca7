"""The tasks here are Harbor tasks of our own (their tests are theirs, run by their
test.sh in a task's container), not this project's tests: pytest leaves them alone."""

collect_ignore = [
    "primes",
    "echo-server",
    "go-sum",
    "c-words",
    "git-answer",
    "multi-key",
    "root-key",
    "entry-service",
]
