"""The defaults that more than one layer states: the CLI's declarations
(verifier.cli.options) show and apply them, and the records of the layers below
(the engine's Limits, a batch's request, a task package's request) fall back on them
when a caller gives none. Defaults only the command line has stay in its declarations."""

DEFAULT_IMAGE = "localhost/harbor-verifier:latest"  # the verifier image a package builds on
DEFAULT_WORKDIR = "/app"  # the agent's work dir in a task package
DEFAULT_VERIFIER_NETWORK = "auto"  # a package's verifier network (parsers.VERIFIER_NETWORKS)
DEFAULT_MEMORY_MB = 2048  # each judge process's memory limit
DEFAULT_LLM_PARALLEL = 4  # LLM judges of one case at once
DEFAULT_LLM_CONCURRENCY = 512  # a ceiling: a batch's gates grow towards it (judges/llm/gate)
DEFAULT_LLM_CACHE_MB = 1024  # the answer cache's size bound
