"""What the queue modules' mutation-gap tests share: a request type with value equality,
its copies, the violation a clause raises, and types that pass for builtins under `==`."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import icontract
import pytest


@dataclass(unsafe_hash=True)
class ValueRequest:
    """A foreign request type with value equality: `==` and the hash compare the three
    fields, as a dataclass's do. Ids are unique in a queue (RQ-ALL-3), so two queued
    requests never compare equal; a copy of a queued request does, yet is another object."""

    request_id: str
    priority: int = 0
    arrival_time: float = 0.0


def twin(request: Any) -> Any:
    """Another object equal to `request` (a value copy)."""
    other = copy.copy(request)
    assert other == request and other is not request  # the premise of the tests using it
    return other


def ids(queue: Iterable[Any]) -> list[str]:
    return [r.request_id for r in queue]


def violation(clause: str) -> Any:
    """`pytest.raises` for the violation naming `clause` (its ID and text)."""
    return pytest.raises(icontract.ViolationError, match=re.escape(clause))


class ClaimsToBe(type):
    """A metaclass whose classes compare equal to the builtin type named by their
    `claims` (as a proxy type might)."""

    claims: type

    def __eq__(cls, other: object) -> bool:
        return other is cls.claims or type.__eq__(cls, other)

    def __ne__(cls, other: object) -> bool:
        return not ClaimsToBe.__eq__(cls, other)

    __hash__ = type.__hash__


class NotAStr(metaclass=ClaimsToBe):
    claims = str


class NotAnInt(metaclass=ClaimsToBe):
    claims = int


class NotAFloat(metaclass=ClaimsToBe):
    claims = float
