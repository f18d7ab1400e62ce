"""What the queue modules' mutation-gap tests share: a request type with value equality,
its copies, the violation a clause raises, types that pass for builtins under `==`, and
someone else's queue."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import icontract
import pytest

from queueref import RequestQueue


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


class ListQueue(RequestQueue):
    """Someone else's queue: a list, front at index 0, no id index and no checks of its
    own (so a test can put into it what our queues refuse). It takes any iterable of
    requests in `prepend_requests`, removes by identity, and counts the calls to peek."""

    def __init__(self, requests: Iterable[Any] = ()) -> None:
        self.items: list[Any] = list(requests)
        self.peeks = 0

    def add_request(self, request: Any) -> None:
        self.items.append(request)

    def pop_request(self) -> Any:
        if not self.items:
            raise IndexError("empty")
        return self.items.pop(0)

    def peek_request(self) -> Any:
        self.peeks += 1
        if not self.items:
            raise IndexError("empty")
        return self.items[0]

    def prepend_request(self, request: Any) -> None:
        self.items.insert(0, request)

    def prepend_requests(self, requests: Iterable[Any]) -> None:
        for request in requests:
            self.items.insert(0, request)

    def remove_request(self, request: Any) -> None:
        for position, queued in enumerate(self.items):
            if queued is request:
                del self.items[position]
                return
        raise ValueError("not queued")

    def remove_requests(self, requests: Iterable[Any]) -> None:
        gone = {id(r) for r in requests}
        self.items = [r for r in self.items if id(r) not in gone]

    def __bool__(self) -> bool:
        return bool(self.items)

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self) -> Iterator[Any]:
        return iter(list(self.items))
