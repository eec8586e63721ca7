"""--max-cost-usd: a case's LLM requests are paid for before any of them is sent.

What a request costs is known only when its answer comes back, and a batch sends
hundreds at once: a budget checked against the answers alone is spent many times over
by the wave already out. So the parent reserves, before handing a case to the LLM
stage, the most its requests can cost (LLMJudge.ceiling_usd: every sample at the
prompt's token ceiling and the whole max_tokens, at the model's price); a reservation
is granted only while what is spent, what is reserved and it stay within the budget,
and it settles to what the answers cost when they are back. A case that does not fit
waits while this batch holds reservations (they settle lower and make room); when it
holds none, the case is refused: it is not graded (no reward, no row; a rerun grades
it), it is counted, and once a case no costlier than one already funded is refused,
no case is handed out any more. No request is sent that could take the total past
the budget, whatever the concurrency; the price is that a budget funds fewer cases at
once than it will buy in the end.

The books are kept in a ledger: in memory for a batch of its own; in a file under
OUT/.batch/ for the shards of a batch (or batches given one --budget-id), each an
account in it, read and rewritten under an flock so that N shards together stay within
one budget. A reservation that a process leaves behind (stopped while its requests
were out, or restarted after a crash) is counted in full, as unsettled: its requests
may have been billed. Amounts are whole picodollars, so that the sums are exact and a
reservation is rounded up, never down.
"""

from __future__ import annotations

import contextlib
import enum
import fcntl
import json
import math
import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, Protocol, TypeVar

import attrs

from verifier.errors import OutputError, UsageError

UNITS_PER_USD = 10**12  # picodollars
UNAFFORDABLE = 2**63  # the ceiling of a case that cannot be priced: no budget covers it
_AMOUNTS = ("spent", "reserved", "unsettled", "refused")
_T = TypeVar("_T")


def units(usd: float) -> int:
    """usd in whole picodollars, rounded up (what is reserved or spent is never less)."""
    return math.ceil(usd * UNITS_PER_USD) if math.isfinite(usd) else UNAFFORDABLE


def usd(amount: int) -> float:
    return amount / UNITS_PER_USD


@attrs.frozen
class Account:
    """One batch's line in the ledger (a shard's, or the batch's own), in picodollars."""

    spent: int = 0  # what its answered requests cost
    reserved: int = 0  # held now for requests out
    unsettled: int = 0  # held by a run that ended with requests out: counted in full
    refused: int = 0  # cases refused

    def to_json(self) -> dict[str, int]:
        return attrs.asdict(self)

    @classmethod
    def from_json(cls, record: Mapping[str, Any]) -> Account:
        fields = {name: record[name] for name in _AMOUNTS}
        if not all(type(value) is int and value >= 0 for value in fields.values()):
            raise ValueError("an account's amounts are whole numbers >= 0")
        return cls(**fields)


@attrs.frozen
class Books:
    """The budget and every account charged to it."""

    limit: int  # the budget, in picodollars
    accounts: Mapping[str, Account] = MappingProxyType({})

    @property
    def committed(self) -> int:
        """What is spent, held and left unsettled, over every account."""
        return sum(a.spent + a.reserved + a.unsettled for a in self.accounts.values())

    def account(self, holder: str) -> Account:
        return self.accounts.get(holder, Account())

    def with_account(self, holder: str, account: Account) -> Books:
        return attrs.evolve(self, accounts={**self.accounts, holder: account})

    def total(self) -> Account:
        """Every account summed."""
        found = list(self.accounts.values())
        return Account(**{name: sum(getattr(a, name) for a in found) for name in _AMOUNTS})

    def to_json(self) -> dict[str, Any]:
        return {
            "max_cost_picousd": self.limit,
            "accounts": {holder: account.to_json() for holder, account in self.accounts.items()},
        }

    @classmethod
    def from_json(cls, record: Any) -> Books:
        limit, accounts = record["max_cost_picousd"], record["accounts"]
        if type(limit) is not int or limit <= 0 or not isinstance(accounts, dict):
            raise ValueError("max_cost_picousd is a whole number > 0 and accounts a mapping")
        return cls(limit, {str(h): Account.from_json(a) for h, a in accounts.items()})


class Verdict(enum.Enum):
    GRANTED = "granted"
    WAIT = "wait"  # it does not fit now; the holder's own reservations may make room
    REFUSED = "refused"  # it does not fit, and the holder holds nothing that could settle


def reserve(books: Books, holder: str, amount: int) -> tuple[Books, Verdict]:
    """The books once holder asks to reserve amount, and the verdict."""
    own = books.account(holder)
    if books.committed + amount <= books.limit:
        granted = attrs.evolve(own, reserved=own.reserved + amount)
        return books.with_account(holder, granted), Verdict.GRANTED
    if own.reserved:
        return books, Verdict.WAIT
    refused = attrs.evolve(own, refused=own.refused + 1)
    return books.with_account(holder, refused), Verdict.REFUSED


def settle(books: Books, holder: str, reserved: int, cost: int) -> Books:
    """A reservation's requests are answered: what they cost is spent, the rest freed."""
    own = books.account(holder)
    return books.with_account(
        holder, attrs.evolve(own, spent=own.spent + cost, reserved=own.reserved - reserved)
    )


def abandon(books: Books, holder: str, reserved: int) -> Books:
    """A reservation whose requests went out and whose cost will never be known: counted
    in full, as unsettled."""
    own = books.account(holder)
    return books.with_account(
        holder,
        attrs.evolve(own, reserved=own.reserved - reserved, unsettled=own.unsettled + reserved),
    )


def take_over(books: Books, holders: frozenset[str] | None) -> Books:
    """Reservations that holders (None: every one) left behind, abandoned: their
    processes are gone (the caller holds the lock each of them held while it ran)."""
    for holder, account in books.accounts.items():
        if account.reserved and (holders is None or holder in holders):
            books = abandon(books, holder, account.reserved)
    return books


# --- where the books are kept --------------------------------------------------------


class Ledger(Protocol):
    """The books, and the one way to change them: a pure step applied under the ledger's
    lock, whose result is returned."""

    def change(self, step: Callable[[Books], tuple[Books, _T]]) -> _T: ...

    def describe(self) -> tuple[str, str] | None:
        """(the file, its budget id) when it is shared; None when it is the batch's own."""
        ...


class MemoryLedger:
    """A batch's own budget: a rerun starts a new one."""

    def __init__(self, limit: int) -> None:
        self.books = Books(limit)

    def change(self, step: Callable[[Books], tuple[Books, _T]]) -> _T:
        self.books, found = step(self.books)
        return found

    def describe(self) -> tuple[str, str] | None:
        return None


class FileLedger:
    """A budget shared through a file: OUT/.batch/budget.<id>.json, JSON.

    Each change locks the file (flock, which the out volume must honour across nodes:
    NFSv4 and CephFS do, and the batch's own lock needs it already), reads it, and
    rewrites it in place before the lock goes: in place, not renamed, so that the lock
    and the data are one file and a reader on another node reads what the last writer
    wrote (a rename would leave it a stale handle). A file that cannot be read as a
    ledger is an error naming it, never a budget of zero spent."""

    def __init__(self, path: Path, budget_id: str, limit: int) -> None:
        self.path = path
        self.budget_id = budget_id
        self.limit = limit

    def change(self, step: Callable[[Books], tuple[Books, _T]]) -> _T:
        with self._locked() as descriptor:
            books = self._read(descriptor)
            changed, found = step(books)
            if changed != books:
                data = (json.dumps(changed.to_json(), indent=1) + "\n").encode()
                try:
                    os.pwrite(descriptor, data, 0)
                    os.ftruncate(descriptor, len(data))
                except OSError as error:
                    raise OutputError(
                        f"{self.path}: cannot be written ({error.strerror})"
                    ) from None
        return found

    def describe(self) -> tuple[str, str] | None:
        return str(self.path), self.budget_id

    @contextlib.contextmanager
    def _locked(self) -> Iterator[int]:
        try:
            descriptor = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o664)
        except OSError as error:
            raise OutputError(f"{self.path}: cannot be opened ({error.strerror})") from None
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX)
            yield descriptor
        finally:
            os.close(descriptor)

    def _read(self, descriptor: int) -> Books:
        data = b""
        while chunk := os.pread(descriptor, 1 << 16, len(data)):
            data += chunk
        if not data:
            return Books(self.limit)
        try:
            books = Books.from_json(json.loads(data))
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise UsageError(
                f"{self.path}: not a budget ledger ({error}); remove it to start a new budget "
                "(what it counted is then forgotten)"
            ) from None
        if books.limit != self.limit:
            raise UsageError(
                f"--max-cost-usd {usd(self.limit):g}: the budget shared in {self.path} is "
                f"{usd(books.limit):g} USD; give the same, or another --budget-id for a new "
                "budget"
            )
        return books


# --- the batch's side ----------------------------------------------------------------


@attrs.frozen
class BudgetFigures:
    """What came of a budget: this batch's figures and, shared, every account's."""

    max_cost_usd: float
    reserved_usd: float  # every reservation this batch took, summed (upper bounds)
    spent_usd: float  # what its requests cost
    unsettled_usd: float  # reservations it left with requests out, counted in full
    refused: int  # cases refused: their requests did not fit
    not_started: int = 0  # cases never handed out once the budget was spent
    dearest_refused_usd: float = 0.0  # the largest reservation refused
    ledger: str | None = None  # the shared ledger's file (None: the batch's own budget)
    budget_id: str | None = None
    shared: Account | None = None  # every account of the shared ledger, summed

    @property
    def exhausted(self) -> bool:
        return self.refused + self.not_started > 0

    def hint(self) -> str | None:
        """Why nothing like the refused cases can be graded under this budget, if so."""
        if self.dearest_refused_usd <= self.max_cost_usd:
            return None
        return (
            f"a case's LLM requests can cost up to {self.dearest_refused_usd:.4f} USD (each "
            "prompt's bytes as tokens and the whole max_tokens, at the model's price), more "
            f"than --max-cost-usd {self.max_cost_usd:g} itself: raise it, or lower "
            "VERIFIER_LLM_MAX_TOKENS"
        )

    def line(self) -> str:
        """The end of the summary line when the budget left cases ungraded."""
        spent = f"{self.spent_usd:.4f} of {self.max_cost_usd:g} USD"
        if self.shared is not None:
            spent += f" here, {usd(self.shared.spent):.4f} in all"
        return f"BUDGET SPENT ({spent}): {self.refused + self.not_started} cases not graded"

    def to_json(self) -> dict[str, Any]:
        shared = None
        if self.shared is not None:
            shared = {
                "file": self.ledger,
                "budget_id": self.budget_id,
                "spent_usd": _rounded(usd(self.shared.spent)),
                "reserved_usd": _rounded(usd(self.shared.reserved)),
                "unsettled_usd": _rounded(usd(self.shared.unsettled)),
                "refused_cases": self.shared.refused,
            }
        return {
            "max_cost_usd": self.max_cost_usd,
            "reserved_usd": _rounded(self.reserved_usd),
            "spent_usd": _rounded(self.spent_usd),
            "unsettled_usd": _rounded(self.unsettled_usd),
            "exhausted": self.exhausted,
            "refused_cases": self.refused,
            "cases_not_started": self.not_started,
            "dearest_refused_usd": _rounded(self.dearest_refused_usd),
            "shared": shared,
        }


def _rounded(value: float) -> float:
    return round(value, 6)


class Purse:
    """The batch's budget as the pool sees it: a case's reservation asked for, settled
    or abandoned, by case name. Lives in the parent, which is single-threaded."""

    def __init__(self, ledger: Ledger, holder: str, max_cost_usd: float) -> None:
        self.ledger = ledger
        self.holder = holder
        self.max_cost_usd = max_cost_usd
        self.held: dict[str, int] = {}  # case -> its reservation
        # This run's figures (an account in a shared ledger also holds earlier runs').
        self.reserved_total = self.spent = self.unsettled = self.refused = 0
        self.largest_granted = 0
        self.dearest_refused = 0
        self.closed = False  # a case like those funded was refused: hand out no more

    def ask(self, case: str, ceiling_usd: float) -> Verdict:
        amount = units(ceiling_usd)
        verdict = self.ledger.change(lambda books: reserve(books, self.holder, amount))
        if verdict is Verdict.GRANTED:
            self.held[case] = amount
            self.reserved_total += amount
            self.largest_granted = max(self.largest_granted, amount)
        elif verdict is Verdict.REFUSED:
            self.refused += 1
            self.dearest_refused = max(self.dearest_refused, amount)
            # One costlier than any funded (a case that fills its prompt) leaves the
            # others their chance; one like them, or before any, means it is spent.
            self.closed = self.closed or amount <= self.largest_granted or not self.largest_granted
        return verdict

    def settle(self, case: str, cost_usd: float) -> None:
        amount, cost = self.held.pop(case), units(cost_usd)
        self.ledger.change(lambda books: (settle(books, self.holder, amount, cost), None))
        self.spent += cost

    def abandon(self, cases: list[str] | None = None) -> None:
        """Reservations of cases whose answers will not come (None: every one left)."""
        amounts = [self.held.pop(case) for case in (list(self.held) if cases is None else cases)]
        if amounts:
            total = sum(amounts)
            self.ledger.change(lambda books: (abandon(books, self.holder, total), None))
            self.unsettled += total

    def figures(self, not_started: int) -> BudgetFigures:
        books = self.ledger.change(lambda books: (books, books))
        shared = self.ledger.describe()
        return BudgetFigures(
            max_cost_usd=self.max_cost_usd,
            reserved_usd=usd(self.reserved_total),
            spent_usd=usd(self.spent),
            unsettled_usd=usd(self.unsettled),
            refused=self.refused,
            not_started=not_started,
            dearest_refused_usd=usd(self.dearest_refused),
            ledger=shared[0] if shared else None,
            budget_id=shared[1] if shared else None,
            shared=books.total() if shared else None,
        )


def open_purse(
    max_cost_usd: float, shared: tuple[Path, str] | None, holder: str, exclusive: bool
) -> Purse:
    """The batch's budget: its own, or the ledger at shared (path, budget id), where
    this holder's reservations (every holder's when exclusive: no other batch runs on
    OUT) left by an earlier run are abandoned first. The caller holds the batch lock,
    which no two runs of one holder hold at once."""
    limit = max(1, math.floor(max_cost_usd * UNITS_PER_USD))
    if shared is None:
        return Purse(MemoryLedger(limit), holder, max_cost_usd)
    ledger = FileLedger(shared[0], shared[1], limit)
    holders = None if exclusive else frozenset({holder})
    ledger.change(lambda books: (take_over(books, holders), None))
    return Purse(ledger, holder, max_cost_usd)
