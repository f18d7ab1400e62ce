"""What the inductive kernels share: the flag type, the bound, the state packing.

Every condition is written with `&` and `|` on comparison results instead of `and`, `or`
and `if`, so that under CrossHair a whole invariant is one symbolic boolean (one solver
query) instead of an exponential number of paths. On plain ints the functions are ordinary
Python and return `bool`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

# Values are `int` at run time and CrossHair's symbolic ints under analysis; the conditions
# are `bool` or CrossHair's symbolic bools. `Any` keeps both usable under mypy --strict.
Flag = Any

IDLE_RANK = -1


def within_bound(servers: int, cap: int, weight: int, total: Any) -> Flag:
    # total <= cap + (servers-1)*min(cap, weight), without a branch on min().
    return (total <= cap + (servers - 1) * cap) & (total <= cap + (servers - 1) * weight)


def all_of(flags: Sequence[Flag]) -> Flag:
    result: Flag = True
    for flag in flags:
        result = result & flag
    return result


Invariant = Callable[[int, int, int, Sequence[Any]], Flag]


def pack_state(names: Sequence[str], arguments: Mapping[str, Any]) -> tuple[Any, ...]:
    """The state tuple from an obligation's arguments (its `locals()` on entry), by name."""
    return tuple(arguments[name] for name in names)


def state_condition(
    invariant: Invariant, servers: int, names: Sequence[str]
) -> Callable[..., Flag]:
    """An icontract condition: `invariant` over the parameters M, W and `names`.

    icontract passes a condition exactly the arguments its signature names, so the
    condition carries an explicit signature instead of a 90-parameter lambda.
    """

    def condition(**arguments: Any) -> Flag:
        return invariant(servers, arguments["M"], arguments["W"], pack_state(names, arguments))

    parameters = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY) for name in ["M", "W", *names]
    ]
    setattr(condition, "__signature__", inspect.Signature(parameters))  # noqa: B010
    condition.__name__ = f"{getattr(invariant, '__name__', 'invariant')}_n{servers}"
    return condition
