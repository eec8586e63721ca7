"""The tasks here are the agents' repos (their own tests included), not this project's
tests: pytest leaves them alone."""

collect_ignore = ["calc", "gocalc"]
