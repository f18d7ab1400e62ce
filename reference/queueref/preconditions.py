"""A precondition declared once, checked with contracts on and under `python -O` alike.

`require(condition, description, error=ValueError)` is `icontract.require` when
contracts are on. Under `python -O` icontract checks nothing, so there the same
condition is kept as a plain check around the function and raises the same
error type with the same description: bad input is refused in both modes by
one declaration, never by a contract plus a guard restated in the body.

    @require(lambda n: is_int_at_least(n, 1), "ADM-ALLOC-1: n is an int >= 1")
    def allocate(n: int) -> None: ...

The kept check costs one call of the condition plus a few lookups; use it for
checks that keep bad input out (what a body guard was for), not for the
whole-structure postconditions, which stay icontract-only.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

import icontract

__all__ = ["require"]

_Function = TypeVar("_Function", bound=Callable[..., Any])

_MISSING: Any = object()


def require(
    condition: Callable[..., Any], description: str, *, error: type[Exception] = ValueError
) -> Callable[[_Function], _Function]:
    """Check `condition` on the arguments it names before every call, in both modes.

    Contracts on: exactly `icontract.require(condition, description, error=error)`.
    `python -O`: the same condition, and `error(f"{description}: name was value, ...")`
    when it is false. Stacked, the top one is checked first, as icontract does.
    """
    if __debug__:
        return icontract.require(condition, description, error=error)
    return functools.partial(_kept, _Precondition(condition, description, error))


class _Precondition:
    """One condition, with the names of the arguments it reads."""

    __slots__ = ("condition", "description", "error", "names")

    def __init__(
        self, condition: Callable[..., Any], description: str, error: type[Exception]
    ) -> None:
        self.condition = condition
        self.description = description
        self.error = error
        self.names = tuple(inspect.signature(condition).parameters)


def _kept(precondition: _Precondition, function: _Function) -> _Function:
    """`function` wrapped in its kept preconditions (`python -O` only), one wrapper for all."""
    inner = getattr(function, "__kept_preconditions__", None)
    preconditions = [precondition, *(inner or ())]
    if inner is not None:
        function = function.__wrapped__  # type: ignore[attr-defined]
    parameters = list(inspect.signature(function).parameters.values())
    position = {p.name: index for index, p in enumerate(parameters)}
    default = {p.name: p.default for p in parameters if p.default is not p.empty}
    # Where each condition finds its arguments: (name, position, default).
    plan = [
        (check, [(name, position[name], default.get(name, _MISSING)) for name in check.names])
        for check in preconditions
    ]

    @functools.wraps(function)
    def checked(*args: Any, **kwargs: Any) -> Any:
        for check, where in plan:
            values = [
                kwargs[name] if name in kwargs else args[index] if index < len(args) else value
                for name, index, value in where
            ]
            if any(value is _MISSING for value in values):
                break  # an argument is missing: the call itself raises TypeError
            if not check.condition(*values):
                shown = ", ".join(
                    f"{name} was {value!r}"
                    for (name, _, _), value in zip(where, values, strict=True)
                    if name != "self"  # the whole object: too long to name the problem
                )
                raise check.error(f"{check.description}: {shown}")
        return function(*args, **kwargs)

    checked.__kept_preconditions__ = preconditions  # type: ignore[attr-defined]
    return checked  # type: ignore[return-value]
