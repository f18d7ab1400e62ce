"""The admission protocols as pure step functions: one transition system.

Every place that decides an admission -- `AdmissionController`, the Hypothesis
machine, the exhaustive explorer and the CrossHair obligations in `proofs/` -- is
written with these functions, so the models and the implementation take the same
steps. A check reads the shared slots one at a time, in index order; other servers
may act between any two reads, so the view is a sum of reads made at different
moments, not a snapshot. The protocols, each with one name (the value of `Protocol`):

* `check-then-write` (vLLM 0.30.0's, the default): read every slot, admit a request
  of weight `n` iff `view + n <= cap`, then write the new count to the own slot.
* `write-then-check` (queueref's opt-in): first add `n` to the own slot (the
  reservation), then read every slot (own reservation included) and keep the
  reservation iff `view <= cap`; otherwise write it back and reject.
* `locked`: check-then-write under one lock shared by every server, the
  exact baseline of the benchmark.
* `local`: check-then-write on the server's own count only (the behaviour
  before vLLM PR #54746).

`bound` is the one statement of each protocol's worst global count.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Final


class Protocol(StrEnum):
    """The admission protocols that queueref models and implements, by their one name."""

    CHECK_THEN_WRITE = "check-then-write"
    WRITE_THEN_CHECK = "write-then-check"
    LOCKED = "locked"
    LOCAL = "local"


def parse_protocol(name: object, allowed: Iterable[Protocol] = tuple(Protocol)) -> Protocol:
    """The protocol `name` names, one of `allowed`; `ValueError` naming the choices."""
    chosen = tuple(allowed)
    names = {p.value: p for p in chosen}
    # E2E-CLI-5: a protocol is typed by its name, nothing else.
    found = names.get(name) if isinstance(name, str) else None
    if found is None:
        raise ValueError(f"unknown admission protocol {name!r}: expected one of {', '.join(names)}")
    return found


def overshoot_bound(num_servers: int, max_num_queued_reqs: int, max_n: int) -> int:
    """The most check-then-write ever admits: `M + (N - 1) * min(M, W)` for N servers, a
    cap M and requests of weight at most W."""
    return max_num_queued_reqs + (num_servers - 1) * min(max_num_queued_reqs, max_n)


def bound(protocol: Protocol, num_servers: int, max_num_queued_reqs: int, max_n: int) -> int:
    """The worst global count of `protocol`, the one definition every other place calls:
    check-then-write `overshoot_bound`; write-then-check and locked the cap M itself;
    local `N * M` (each server caps only itself)."""
    protocol = parse_protocol(protocol)
    if protocol is Protocol.CHECK_THEN_WRITE:
        return overshoot_bound(num_servers, max_num_queued_reqs, max_n)
    if protocol is Protocol.LOCAL:
        return num_servers * max_num_queued_reqs
    return max_num_queued_reqs


def accumulate(view: int, slot_value: int) -> int:
    """One read of a check: add the value read from one slot to the view."""
    return view + slot_value


# ADM-CTL-11: the fold of a one-pass read.
def _read_all(view: int, slot_values: list[int]) -> int:
    """A whole pass at once: `accumulate` (addition) folded over the values, in index
    order: the view after reading one slot after the other."""
    return view + sum(slot_values)


def admits_check_then_write(view: int, n: int, cap: int) -> bool:
    """check-then-write: a request of weight n is admitted iff view + n <= cap."""
    return view + n <= cap


def keeps_reservation(view: int, cap: int) -> bool:
    """write-then-check: the view already holds the own reservation; keep iff view <= cap."""
    return view <= cap


class TokenRule(StrEnum):
    """How a check-then-write token check decides: upstream's `ge` or the `fits` opt-in."""

    GE = "ge"  # vLLM 0.30.0: reject iff queued >= Mt (the new request's tokens not counted)
    FITS = "fits"  # queueref's opt-in: reject iff queued + t > Mt


# Members bound once: reading `Enum.MEMBER` costs about 100 ns on Python 3.11, on the
# hot path of every admission check (ADM-CTL-11).
_GE: Final = TokenRule.GE
_WRITE_THEN_CHECK: Final = Protocol.WRITE_THEN_CHECK


def admits_tokens(rule: TokenRule, view: int, tokens: int, limit: int) -> bool:
    """The token decision of check-then-write, from the queued tokens the check read;
    `tokens` is what the request adds (n samples of a prompt of p tokens add n*p)."""
    if rule is _GE or TokenRule(rule) is _GE:  # the first test spares the enum call
        return view < limit
    return admits_check_then_write(view, tokens, limit)


def admits(protocol: Protocol, view: int, n: int, cap: int) -> bool:
    """The decision step of a protocol, from the view the check read: write-then-check
    keeps its reservation; every other protocol decides as check-then-write (locked and
    local differ in what they read, not in the rule)."""
    if protocol is _WRITE_THEN_CHECK:
        return keeps_reservation(view, cap)
    return admits_check_then_write(view, n, cap)


@dataclass(frozen=True)
class Check:
    """A check in progress: the next slot to read and the view read so far."""

    n: int
    next_slot: int = 0
    view: int = 0

    def read(self, slot_value: int) -> Check:
        """Read the next slot."""
        return Check(self.n, self.next_slot + 1, accumulate(self.view, slot_value))

    def done(self, num_slots: int) -> bool:
        """Every slot has been read."""
        return self.next_slot >= num_slots
