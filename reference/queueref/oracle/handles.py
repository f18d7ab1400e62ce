"""Request handles and call outcomes: what the queue machine compares (ORC-MACH-1, ORC-CRQ-3).

Each generated request is built twice, once for the subject and once as a
`queueref.Request` for the expected side; a `Handle` holds both, and a
result is mapped back to the handle it stands for by identity. An
`Outcome` is what a call did: a value, or an exception compared by type.
Also here: the request ids the machine gives out (ORC-TIES-3) and the
Python name under which a factory appears in a failing program. No
Hypothesis here.
"""

from __future__ import annotations

import keyword
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import icontract

import queueref

#: The exceptions whose type the machine compares; any other exception is a failure.
COMPARED_ERRORS: tuple[type[Exception], ...] = (IndexError, ValueError, TypeError)


@dataclass(eq=False)
class Handle:
    """One generated request, as both sides see it: `subject` and its twin `expected`."""

    name: str
    request_id: str
    priority: int
    arrival_time: float
    subject: Any
    expected: Any
    batch_index: int | None = None  # its index in the starting batch `b`, if it is in it

    @property
    def tie_key(self) -> tuple[int, float]:
        """What a request type that leaves ties unordered compares (ORC-TIES-1)."""
        return (self.priority, self.arrival_time)


@dataclass(frozen=True)
class Outcome:
    """What a call did: returned `value`, or raised an exception named `error`."""

    value: Any = None
    error: str | None = None
    detail: str = ""


@dataclass(frozen=True)
class Unknown:
    """A value the subject returned that is none of the requests it was given."""

    text: str


def request_id_for(name: str, sorts_first: bool) -> str:
    """ORC-TIES-3: the id of the request named `name` ('r3'): its name, or 'r03'.

    Ids compare as strings (RQ-REQ-1). Named in creation order, 'r1' < 'r2'
    < ... < 'r9' follow it; `sorts_first` gives 'r03', which sorts before
    every 'rN' made so far ('0' < '1'), so a program of two requests can
    show a tie broken by creation order instead of by id. Hypothesis shrinks
    `sorts_first` to False: ids leave creation order only where a failure
    needs it.
    """
    return f"{name[0]}0{name[1:]}" if sorts_first else name


def error_name(exc: BaseException) -> str:
    """ORC-CRQ-3: how an exception is compared: one of the compared types, or its own name."""
    if isinstance(exc, icontract.ViolationError):
        return "icontract.ViolationError"
    for kind in COMPARED_ERRORS:
        if isinstance(exc, kind):
            return kind.__name__
    return type(exc).__name__


def error_detail(exc: BaseException, limit: int = 160) -> str:
    """One line saying what an exception says; for a contract, its description."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if isinstance(exc, icontract.ViolationError) and len(lines) > 1:
        lines = lines[1:]  # the first line is "File ..., line ... in ...:"
    text = lines[0].rstrip(":") if lines else ""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def call_outcome(function: Callable[[], Any]) -> Outcome:
    """Call `function`; what it returned or raised (ORC-CRQ-3)."""
    try:
        return Outcome(value=function())
    except Exception as exc:  # every exception is an outcome to compare (ORC-CRQ-3)
        return Outcome(error=error_name(exc), detail=error_detail(exc))


def _is_identifier(name: object) -> bool:
    return isinstance(name, str) and name.isidentifier() and not keyword.iskeyword(name)


def python_name(obj: object, fallback: str) -> tuple[str, str | None]:
    """The name under which `obj` appears in a failing program, and an import line for it."""
    name = getattr(obj, "__name__", None)
    if not _is_identifier(name):
        return fallback, None
    assert isinstance(name, str)
    module = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None)
    if (
        isinstance(module, str)
        and module not in ("__main__", "builtins")
        and qualname == name
        and all(_is_identifier(part) for part in module.split("."))
    ):
        if module.startswith("queueref.") and getattr(queueref, name, None) is obj:
            module = "queueref"  # a public name: import it as the docs do
        return name, f"from {module} import {name}"
    return name, None
