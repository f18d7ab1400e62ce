"""The admission protocols as pure step functions: one transition system.

Every place that decides an admission -- `AdmissionController`, the
Hypothesis machine of the admission tests, the exhaustive explorer and the
CrossHair obligations in `proofs/` -- is written with these functions, so the
models and the implementation take the same steps.

A server's check reads the shared slots one at a time, in index order; other
servers may act between any two reads. The view it accumulates is therefore a
sum of reads made at different moments, not a snapshot.

Two protocols:

* check-then-write (vLLM 0.30.0's, the default): read every slot, admit a request of
  weight `n` iff `view + n <= cap`, then write the new count to the own slot.
* write-then-check (queueref's opt-in `mode="reserve"`): first add `n` to the
  own slot (the reservation), then read every slot (own reservation included)
  and keep the reservation iff `view <= cap`; otherwise write it back and
  reject.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Protocol(StrEnum):
    """The admission protocols that queueref models and implements."""

    CHECK_THEN_WRITE = "check-then-write"
    WRITE_THEN_CHECK = "write-then-check"


def accumulate(view: int, slot_value: int) -> int:
    """One read of a check: add the value read from one slot to the view."""
    return view + slot_value


def admits_check_then_write(view: int, n: int, cap: int) -> bool:
    """check-then-write: a request of weight n is admitted iff view + n <= cap."""
    return view + n <= cap


def keeps_reservation(view: int, cap: int) -> bool:
    """write-then-check: the view already holds the own reservation; keep iff view <= cap."""
    return view <= cap


def admits(protocol: Protocol, view: int, n: int, cap: int) -> bool:
    """The decision step of either protocol, from the view the check read."""
    if protocol is Protocol.CHECK_THEN_WRITE:
        return admits_check_then_write(view, n, cap)
    return keeps_reservation(view, cap)


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
