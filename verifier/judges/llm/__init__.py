"""LLM judges (llm_rubric, prompt, prompt_file) over OpenAI-compatible and Anthropic APIs.

The modules, in the order data flows through them (the entry's keys are read by
verifier.judges.kinds.llm):

  load        LLMSpec -> LLMJudge (every load-time check, ConfigError)
  template    Jinja2 sandbox; case text marked and fenced when printed
  prompt      system + user messages, size budget, the scale in words
  providers   the provider registry; OpenAI chat completions / Anthropic Messages
  transport   HTTP POST: timeouts, retries with backoff, Retry-After, deadline
  parse       reply -> grade (structured output, tolerant text fallback)
  scale       the answer's scale and schema
  sampling    N grades -> one (median / majority) and their agreement
  judge       the per-case callable run in the judge's process
  redact      API keys out of every error, rationale and detail
"""
