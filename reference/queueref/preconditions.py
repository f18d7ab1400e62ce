"""A precondition declared once, checked with contracts on and under `python -O` alike.

`require(condition, description, error=ValueError)` is `icontract.require` when
contracts are on. Under `python -O` icontract checks nothing, so there the same
condition is kept as a plain check around the function and raises the same
error type with the same description: bad input is refused in both modes by
one declaration, never by a contract plus a guard restated in the body.

    @require(lambda n: is_int_at_least(n, 1), "ADM-ALLOC-1: n is an int >= 1")
    def allocate(n: int) -> None: ...

The kept check costs one call of the condition; use it for
checks that keep bad input out (what a body guard was for), not for the
whole-structure postconditions, which stay icontract-only.

Contracts may also be declared beside the logic, in a module the logic does not
import: `original(owner)` under the decorators hands them the real function of
the same name, and `install(owner)` above them puts the checked function back.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar, cast

import icontract

__all__ = ["install", "original", "require"]

_Function = TypeVar("_Function", bound=Callable[..., Any])


def require(
    condition: Callable[..., Any], description: str, *, error: type[Exception] = ValueError
) -> Callable[[_Function], _Function]:
    """Check `condition` on the arguments it names before every call, in both modes.

    Contracts on: exactly `icontract.require(condition, description, error=error)`.
    `python -O`: the same condition, and `error(f"{description}: name was value, ...")`
    when it is false. Stacked, the bottom one (nearest the function) is checked first,
    as icontract does: both modes name the same condition for the same bad call.
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


class _Source:
    """A default value written into the generated wrapper by name (its repr is the name)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


def _kept(precondition: _Precondition, function: _Function) -> _Function:
    """`function` wrapped in its kept preconditions (`python -O` only), one wrapper for all.

    The wrapper is generated with `function`'s own parameters, so that each
    condition is called with its arguments directly: about the cost of the body
    guard it replaces, not of binding the arguments on every call.
    """
    inner = getattr(function, "__kept_preconditions__", None)
    preconditions = [*(inner or ()), precondition]  # applied bottom-up: the bottom first
    if inner is not None:
        function = function.__wrapped__  # type: ignore[attr-defined]
    parameters = list(inspect.signature(function).parameters.values())
    namespace: dict[str, Any] = {"_function": function, "_refuse": _refuse}
    header, forwarded = [], []
    for parameter in parameters:
        default = parameter.default
        if default is not parameter.empty:
            namespace[f"_default_{parameter.name}"] = default
            default = _Source(f"_default_{parameter.name}")
        header.append(parameter.replace(annotation=parameter.empty, default=default))
        name = parameter.name
        if parameter.kind is parameter.KEYWORD_ONLY:
            forwarded.append(f"{name}={name}")
        elif parameter.kind is parameter.VAR_POSITIONAL:
            forwarded.append(f"*{name}")
        elif parameter.kind is parameter.VAR_KEYWORD:
            forwarded.append(f"**{name}")
        else:
            forwarded.append(name)
    lines = [f"def checked{inspect.Signature(header)}:"]
    for index, check in enumerate(preconditions):
        namespace[f"_check_{index}"] = check
        arguments = ", ".join(check.names)
        lines.append(f"    if not _check_{index}.condition({arguments}):")
        lines.append(f"        _refuse(_check_{index}, {arguments})")
    lines.append(f"    return _function({', '.join(forwarded)})")
    exec("\n".join(lines), namespace)  # noqa: S102 -- the source is built above, from names
    checked: Any = functools.wraps(function)(namespace["checked"])
    checked.__kept_preconditions__ = preconditions
    return cast(_Function, checked)


def _refuse(check: _Precondition, *values: Any) -> None:
    """Raise the error of a precondition that does not hold, naming the arguments."""
    shown = ", ".join(
        f"{name} was {value!r}"
        for name, value in zip(check.names, values, strict=True)
        if name != "self"  # the whole object: too long to name the problem
    )
    raise check.error(f"{check.description}: {shown}")


def original(owner: Any) -> Callable[[Any], Any]:
    """The real `owner.<name>` (a class's own function, or a module's) for a stub named so."""

    def take(stub: Any) -> Any:
        found = vars(owner)[stub.__name__]
        return found.__func__ if isinstance(found, classmethod) else found

    return take


def install(owner: Any) -> Callable[[_Function], _Function]:
    """Put the checked function back on `owner` under its own name (a classmethod stays one)."""

    def put(checked: _Function) -> _Function:
        name = inspect.unwrap(checked).__name__
        kept: Any = checked
        if isinstance(vars(owner)[name], classmethod):
            kept = classmethod(checked)
        setattr(owner, name, kept)
        return checked

    return put
