"""LLM judges (llm_rubric, prompt, prompt_file) over OpenAI-compatible and Anthropic APIs.

The modules, in the order data flows through them (the entry's keys are read by
verifier.judges.kinds.llm):

  spec, keys  the entry's keys as records (criteria, panel, guard, prices) and their parsing
  load        LLMSpec -> LLMJudge (every load-time check, ConfigError)
  template    Jinja2 sandbox; only trusted values print unfenced
  prompt      system + user messages, material between fences, size budget
  tokens      the prompt's estimated tokens, the context a model takes, an overflow
  providers   the provider registry; OpenAI chat completions / Anthropic Messages;
              what reasoning models reject
  client      one sample's request: the cache, the endpoint's gate, learned quirks
  cache       the response cache (content-addressed files, bounded)
  gate        one endpoint's concurrency bound and shared backoff
  transport   HTTP POST: timeouts, retries with backoff, Retry-After, deadline
  parse       reply -> grade (structured output, tolerant text fallback)
  scale       the answer's scale and schema
  criteria    many criteria in one answer: their verdicts, schema, aggregate
  guard       text in the material aimed at the grader (patterns; the model's answer)
  sampling    N grades -> one (median / majority) and their agreement
  panel       several models' values -> one (median, mean, majority, min)
  pricing     the price table; what a judge's tokens cost
  judge       prompt, samples side by side, one grade (grade: in the judge's process)
  redact      API keys out of every error, rationale and detail
"""
