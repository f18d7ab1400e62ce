"""The replayable program: how the queue machine writes what it did (ORC-CRQ-2, ORC-SIZE-2).

Every call made to the subject is recorded as a Python statement; a failure
ends the program with the statement that failed and a comment saying what
the subject did instead. Here: how values, expectations and outcomes are
written, the starting batch as one list, and the header of imports. No
Hypothesis here.
"""

from __future__ import annotations

import reprlib
from collections.abc import Sequence
from typing import Any, Literal

from queueref.oracle.handles import Handle, Outcome, Unknown

ResultKind = Literal["none", "request", "value"]

#: The name of the list that holds the requests of a starting batch (ORC-SIZE-2).
BATCH = "b"

short_repr = reprlib.Repr()
short_repr.maxstring = 120
short_repr.maxother = 120


def batch_keys(pattern: Sequence[tuple[int, float]], size: int) -> list[tuple[int, float]]:
    """ORC-SIZE-2: the (priority, arrival_time) of a batch: `pattern` repeated to `size`."""
    return [pattern[index % len(pattern)] for index in range(size)]


def batch_keys_literal(pattern: Sequence[tuple[int, float]], size: int) -> str:
    """ORC-SIZE-2: `[(0, 0.0)] * 64` or `([(0, 0.0), (-1, 1.0)] * 33)[:65]`: the batch's keys."""
    listed = "[" + ", ".join(repr(key) for key in pattern) + "]"
    if len(pattern) == 1:
        return f"{listed} * {size}"
    repeats = -(-size // len(pattern))
    whole = f"{listed} * {repeats}"
    return whole if repeats * len(pattern) == size else f"({whole})[:{size}]"


def render(view: Any) -> str:
    """A result as the program writes it: a request by its name, a list of them as a list."""
    if isinstance(view, Handle):
        return view.name
    if isinstance(view, Unknown):
        return f"{view.text} (not one of the requests it was given)"
    if isinstance(view, tuple):
        return "[" + ", ".join(_render_items(view)) + "]"
    return repr(view)


def _render_items(items: tuple[Any, ...]) -> list[str]:
    """The items of a list; consecutive requests of the batch as `*b[i:j]` (ORC-SIZE-2)."""
    parts: list[str] = []
    index = 0
    while index < len(items):
        first = items[index]
        end = index + 1
        if isinstance(first, Handle) and first.batch_index is not None:
            while (
                end < len(items)
                and isinstance(items[end], Handle)
                and items[end].batch_index == first.batch_index + (end - index)
            ):
                end += 1
        if end - index > 2:
            start = first.batch_index
            parts.append(f"*{BATCH}[{start}:{start + end - index}]")
        else:
            parts.extend(render(item) for item in items[index:end])
        index = end
    return parts


def expectation(call: str, kind: ResultKind, expected: Outcome) -> list[str]:
    """The statements that make `call` and check what the reference did."""
    if expected.error is not None:
        return [f"with pytest.raises({expected.error}):", f"    {call}"]
    view = expected.value
    if kind == "none":
        return [call]
    if kind == "request":
        return [f"assert {call} is {render(view)}"]
    if view is True or view is False:
        return [f"assert {call}" if view else f"assert not {call}"]
    return [f"assert {call} == {render(view)}"]


def describe_outcome(outcome: Outcome, kind: ResultKind) -> str:
    """What a call did, for a `# FAILS:` comment and a summary."""
    if outcome.error is not None:
        return f"raises {outcome.error}: {outcome.detail}" if outcome.detail else outcome.error
    if kind == "none":
        return "returns without raising"
    return f"gives {render(outcome.value)}"


def assemble_program(
    imports: Sequence[str], queue_name: str, request_name: str, body: Sequence[str]
) -> str:
    """The statements as a pasteable test body: imports, then `body`."""
    header = list(imports)
    if any("pytest.raises" in line for line in body):
        header.insert(0, "import pytest")
    if queue_name == "factory":
        header.append("# factory: the queue factory given to the checker")
    if request_name == "request_factory":
        header.append("# request_factory: the request factory given to the checker")
    return "\n".join([*header, "", *body] if header else list(body))
