"""What a setting's text means: the parsers of a flag's value, a VERIFIER_* variable and
a task.toml env value. Each returns the value or raises ValueError saying why, in words
the caller puts after the flag's or the variable's name."""

from __future__ import annotations

import enum
import re
from collections.abc import Callable
from pathlib import Path

import attrs

MAX_MEMORY_MB = 1024 * 1024  # 1 TiB: beyond it a limit in bytes stops meaning anything
VERIFIER_NETWORKS = ("auto", "no-network", "public")
_TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
_FALSE_WORDS = frozenset({"", "0", "false", "no", "off"})


def parse_path(text: str) -> Path:
    if "\0" in text or not text.strip():
        raise ValueError(f"{text!r} is not a path")
    return Path(text)


def parse_positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise ValueError(f"{value} must be at least 1")
    return value


def _parse_number(
    text: str, accept: Callable[[float], bool], problem: str, what: str = "a number"
) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not {what}") from None
    if not accept(value):
        raise ValueError(f"{text} {problem}")
    return value


def parse_positive_number(text: str) -> float:
    return _parse_number(text, lambda v: 0 < v < float("inf"), "must be a finite number above 0")


def parse_agreement(text: str) -> float:
    return _parse_number(
        text, lambda v: -1 <= v <= 1, "must be from -1 to 1 (Spearman's rho, Cohen's kappa)"
    )


def parse_memory_mb(text: str) -> int:
    value = parse_positive_int(text)
    if value > MAX_MEMORY_MB:
        raise ValueError(f"{value} is more than {MAX_MEMORY_MB} (1 TiB)")
    return value


def parse_bool(text: str) -> bool:
    word = text.strip().lower()
    if word in _TRUE_WORDS:
        return True
    if word in _FALSE_WORDS:
        return False
    raise ValueError(f"{text!r} is not a boolean (use 1/0, true/false, yes/no, on/off)")


def parse_shard(text: str) -> tuple[int, int]:
    """`I/N` -> (I, N) with 0 <= I < N."""
    index, _, count = text.partition("/")
    try:
        shard = int(index), int(count)
    except ValueError:
        raise ValueError(f"{text!r}: expected I/N, e.g. 0/4") from None
    if not 0 <= shard[0] < shard[1]:
        raise ValueError(f"{text!r}: I must be in 0..N-1 and N at least 1")
    return shard


def parse_name(text: str) -> str:
    """A dataset case id or a step id: one directory name."""
    if not text or "/" in text or "\0" in text or text in (".", ".."):
        raise ValueError(f"{text!r} is not a name (one directory name)")
    return text


def parse_budget_id(text: str) -> str:
    """A shared budget's name: it names a file (letters, digits, `.`, `_`, `-`)."""
    if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}", text) is None:
        raise ValueError(f"{text!r}: use up to 128 letters, digits, '.', '_' or '-'")
    return text


def parse_names(text: str) -> tuple[str, ...]:
    """`ID,ID,...` -> the names, each checked by parse_name."""
    names = tuple(parse_name(part.strip()) for part in text.split(",") if part.strip())
    if not names:
        raise ValueError(f"{text!r}: name at least one (ID,ID,...)")
    return names


def parse_globs(text: str) -> tuple[str, ...]:
    """`GLOB,GLOB,...` -> the globs (verifier.globs checks each where it is used)."""
    globs = tuple(part.strip() for part in text.split(",") if part.strip())
    if not globs or any("\0" in glob for glob in globs):
        raise ValueError(f"{text!r}: name at least one glob (GLOB,GLOB,...)")
    return globs


class RewardKeysKind(enum.Enum):
    ALL = "all"  # the reward and every judge with a value
    NAMED = "named"  # the reward and the judges named (none: the reward alone)
    NATIVE = "native"  # the reward and the keys the task's own test.sh wrote


@attrs.frozen
class RewardKeys:
    """What reward.json holds besides the reward (`--reward-keys`, $VERIFIER_REWARD_JSON;
    output.reward_json writes it). `judges`: the names, for NAMED alone."""

    kind: RewardKeysKind
    judges: tuple[str, ...] = ()

    def __str__(self) -> str:
        """As the option is written: all, native, reward, or NAME,..."""
        if self.kind is not RewardKeysKind.NAMED:
            return self.kind.value
        return ",".join(self.judges) or "reward"


ALL_REWARD_KEYS = RewardKeys(RewardKeysKind.ALL)
NATIVE_REWARD_KEYS = RewardKeys(RewardKeysKind.NATIVE)


def parse_reward_keys(text: str) -> RewardKeys:
    """`reward` (the reward alone), `all`, `native`, or `NAME,...` (the judges' names;
    `reward`, always written, may be listed too)."""
    words = [part.strip() for part in text.split(",") if part.strip()]
    if words == ["all"]:
        return ALL_REWARD_KEYS
    if words == ["native"]:
        return NATIVE_REWARD_KEYS
    if not words or "all" in words or "native" in words:
        raise ValueError(f"{text!r}: use reward, all, native, or judge names (NAME,NAME,...)")
    names = tuple(dict.fromkeys(parse_name(word) for word in words if word != "reward"))
    return RewardKeys(RewardKeysKind.NAMED, names)


def parse_seconds(text: str) -> float:
    """A positive, finite number of seconds."""
    return _parse_number(
        text,
        lambda v: 0 < v < float("inf"),
        "must be a positive number of seconds",
        "a number of seconds",
    )


def parse_fraction(text: str) -> float:
    """A number in [0, 1] (a reward)."""
    return _parse_number(text, lambda v: 0 <= v <= 1, "must be in [0, 1]")


def parse_choice(*choices: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if text not in choices:
            raise ValueError(f"{text!r}: use one of {', '.join(choices)}")
        return text

    return parse


def parse_text(text: str) -> str:
    if "\0" in text:
        raise ValueError(f"{text!r} contains a NUL byte")
    return text
