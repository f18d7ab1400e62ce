"""The argument checks every module shares: one definition of "an int", "a limit", ...

A `bool` is never an int here: `True` is a Python `int`, but a request of
`n=True` samples or a limit of `False` is a mistake, so every check in
queueref (queues, requests, admission, tracker, events, trace checker)
refuses it the same way. Each check is safe on any object, so contracts can
call it before the type of an argument is known.

Models no vLLM file (vLLM's own checks live in its pydantic configs).
"""

from __future__ import annotations

from typing import TypeGuard


def is_int(value: object) -> TypeGuard[int]:
    """An `int` that is not a `bool`."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_int_at_least(value: object, low: int) -> TypeGuard[int]:
    """An int (not a bool) that is `>= low`."""
    return is_int(value) and value >= low


def is_index(value: object, count: object) -> TypeGuard[int]:
    """An int (not a bool) in `range(count)`."""
    return is_int(value) and is_int(count) and 0 <= value < count


def is_limit(value: object) -> bool:
    """A limit: None (no limit) or an int (not a bool) `>= 0`."""
    return value is None or is_int_at_least(value, 0)


def is_real(value: object) -> TypeGuard[int | float]:
    """An int or a float, not a bool (NaN and infinities included)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)
