"""What a judge's tokens cost: a price per model, per million input and output tokens.

RL budgets are set in dollars, not tokens. DEFAULT_PRICES are the providers' list
prices for their standard (not batch, not cached) tier, in USD per million tokens,
as published on https://openai.com/api/pricing and
https://docs.anthropic.com/en/docs/about-claude/pricing, last checked 2025-11. They
change, and a self-hosted model has none: a judge's `prices:` (or the file it names)
and the file in $VERIFIER_LLM_PRICES set others, the judge's winning.

A model's price is found by its name as sent, exactly, or with a dated or
`-latest` snapshot suffix (`gpt-4o-2024-08-06`, `claude-sonnet-4-5-20250929`,
`claude-sonnet-4-5@20250929`): never by a looser prefix, which would price
`gpt-5-pro` as `gpt-5`. A model without a price costs `null`, never 0: and a batch
with a budget refuses to start while one of its models has none.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import attrs

from verifier.judges.llm.spec import PriceSpec

DEFAULT_PRICES: Mapping[str, PriceSpec] = {  # the providers' list prices as of 2025-11
    # OpenAI, https://openai.com/api/pricing
    "gpt-5": PriceSpec(1.25, 10.0),
    "gpt-5-mini": PriceSpec(0.25, 2.0),
    "gpt-5-nano": PriceSpec(0.05, 0.40),
    "gpt-4.1": PriceSpec(2.0, 8.0),
    "gpt-4.1-mini": PriceSpec(0.40, 1.60),
    "gpt-4.1-nano": PriceSpec(0.10, 0.40),
    "gpt-4o": PriceSpec(2.50, 10.0),
    "gpt-4o-mini": PriceSpec(0.15, 0.60),
    "o1": PriceSpec(15.0, 60.0),
    "o3": PriceSpec(2.0, 8.0),
    "o3-mini": PriceSpec(1.10, 4.40),
    "o4-mini": PriceSpec(1.10, 4.40),
    # Anthropic, https://docs.anthropic.com/en/docs/about-claude/pricing
    "claude-opus-4-5": PriceSpec(5.0, 25.0),
    "claude-opus-4-1": PriceSpec(15.0, 75.0),
    "claude-opus-4": PriceSpec(15.0, 75.0),
    "claude-opus-4-0": PriceSpec(15.0, 75.0),
    "claude-sonnet-4-5": PriceSpec(3.0, 15.0),
    "claude-sonnet-4": PriceSpec(3.0, 15.0),
    "claude-sonnet-4-0": PriceSpec(3.0, 15.0),
    "claude-3-7-sonnet": PriceSpec(3.0, 15.0),
    "claude-3-5-sonnet": PriceSpec(3.0, 15.0),
    "claude-haiku-4-5": PriceSpec(1.0, 5.0),
    "claude-3-5-haiku": PriceSpec(0.80, 4.0),
    "claude-3-haiku": PriceSpec(0.25, 1.25),
    "claude-3-opus": PriceSpec(15.0, 75.0),
}
_SNAPSHOT = re.compile(r"(?:[-@](?:\d{4}-?\d{2}-?\d{2}|latest))?\Z")  # what may follow a name


@attrs.frozen
class Price:
    """A model's price, and where it came from (judges.json and the summary say)."""

    input: float  # USD per million input tokens
    output: float  # USD per million output tokens
    source: str  # "default", "eval.yaml", a prices file


def find_price(model: str, tables: Sequence[tuple[str, Mapping[str, PriceSpec]]]) -> Price | None:
    """The price of model from the first table (source, prices) that has it; None: none."""
    for source, prices in tables:
        for name, price in prices.items():
            if model.startswith(name) and _SNAPSHOT.match(model, len(name)) is not None:
                return Price(price.input, price.output, source)
    return None


def cost_usd(price: Price | None, input_tokens: int, output_tokens: int) -> float | None:
    """What the tokens cost, None without a price."""
    if price is None:
        return None
    return (input_tokens * price.input + output_tokens * price.output) / 1_000_000
