"""LLM judges (llm_rubric, prompt, prompt_file) over OpenAI-compatible and Anthropic APIs.

The modules, in the order data flows through them:

  load        judge entry -> LLMJudge (all load-time checks, ConfigError)
  template    Jinja2 sandbox; case text marked and fenced when printed
  prompt      system + user messages, size budget, the scale in words
  providers   OpenAI chat completions / Anthropic Messages: request and reply
  transport   HTTP POST: timeouts, retries with backoff, Retry-After, deadline
  parse       reply -> grade (structured output, tolerant text fallback)
  sampling    N grades -> one (median / majority) and their agreement
  judge       the per-case callable run in the judge's process
  redact      API keys out of every error, rationale and detail
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from verifier.config import EvalConfig, JudgeConfig


def prepare_llm(judge: JudgeConfig, config: EvalConfig) -> Callable[[dict[str, Any]], Any]:
    """The judge's per-case callable; ConfigError for anything wrong with its keys."""
    from verifier.judges.llm.load import build_judge

    return build_judge(judge, config, os.environ)
