"""Requests as the queues see them: `Request`, `RequestStatus`, the ordering key.

Models `vllm/v1/request.py` (`Request`, `RequestStatus`; vLLM 0.30.0 and
0.33.0) as far as the queues and the admission path need it. Deliberate
divergences:

* `Request.__lt__` compares `(priority, arrival_time, request_id)`, as vLLM
  0.30.0 and 0.33.0 do before their last tie-break on `id()`. Request ids are
  unique within a queue here, so the key never ties and the order is total:
  two queues holding the same requests pop them in the same order.
* Equality and hash are by identity (as in vLLM, which defines no `__eq__`).
* The queues accept any object with `request_id`, `priority` and
  `arrival_time` (vLLM's own `Request` among them); `request_key` reads those
  three fields, and `check_request_shape` names the field that is missing.
"""

from __future__ import annotations

import enum
from typing import Any, Protocol, runtime_checkable

import icontract

from queueref.validators import is_int, is_int_at_least, is_real


class RequestStatus(enum.IntEnum):
    """The life of a request, as in vLLM (the order matters: finished is last)."""

    WAITING = enum.auto()
    WAITING_FOR_STRUCTURED_OUTPUT_GRAMMAR = enum.auto()
    WAITING_FOR_REMOTE_KVS = enum.auto()
    WAITING_FOR_STREAMING_REQ = enum.auto()
    RUNNING = enum.auto()
    PREEMPTED = enum.auto()
    # Everything after PREEMPTED is a finished status.
    FINISHED_STOPPED = enum.auto()
    FINISHED_LENGTH_CAPPED = enum.auto()
    FINISHED_ABORTED = enum.auto()
    FINISHED_IGNORED = enum.auto()
    FINISHED_ERROR = enum.auto()

    @staticmethod
    def is_finished(status: RequestStatus) -> bool:
        """Whether `status` is one of the FINISHED_* statuses."""
        return status > RequestStatus.PREEMPTED

    @staticmethod
    def is_blocked(status: RequestStatus) -> bool:
        """Whether `status` is one of the three WAITING_FOR_* (blocked) statuses."""
        return status in BLOCKED_STATUSES


BLOCKED_STATUSES = frozenset(
    {
        RequestStatus.WAITING_FOR_STRUCTURED_OUTPUT_GRAMMAR,
        RequestStatus.WAITING_FOR_REMOTE_KVS,
        RequestStatus.WAITING_FOR_STREAMING_REQ,
    }
)

REQUEST_FIELDS = ("request_id", "priority", "arrival_time")

RequestKey = tuple[int, float, str]


@runtime_checkable
class RequestLike(Protocol):
    """What a queue needs of a request: vLLM's `Request` fits, so does ours."""

    request_id: str
    priority: int
    arrival_time: float


def is_request_shaped(request: object) -> bool:
    """Whether `request` has the three fields a queue reads (safe on any object,
    so contracts can ask before they know what they were given).

    >>> is_request_shaped(Request("a")), is_request_shaped("a")
    (True, False)
    """
    # Spelled out rather than a loop over REQUEST_FIELDS: contracts ask on every call.
    return (
        hasattr(request, "request_id")
        and hasattr(request, "priority")
        and hasattr(request, "arrival_time")
    )


def check_request_shape(request: object) -> None:
    """Raise naming the first field a queue cannot use.

    `TypeError` for a missing field or one of the wrong type (`request_id` a
    str, `priority` an int, `arrival_time` a real number); `ValueError` for a
    NaN arrival time, which would break the priority order silently.
    """
    try:  # the common case, cheaply: exactly the types vLLM uses
        fast = (
            type(request.request_id) is str  # type: ignore[attr-defined]
            and type(request.priority) is int  # type: ignore[attr-defined]
            and type(request.arrival_time) is float  # type: ignore[attr-defined]
            and request.arrival_time == request.arrival_time  # type: ignore[attr-defined]
        )
    except AttributeError:
        fast = False
    if fast:
        return
    for field in REQUEST_FIELDS:
        if not hasattr(request, field):
            raise TypeError(
                f"RQ-REQ-3: {type(request).__name__} object is not a request: "
                f"it has no {field!r} attribute (a request needs {', '.join(REQUEST_FIELDS)})"
            )
    fields: Any = request
    for field, valid, wanted in (
        ("request_id", lambda value: isinstance(value, str), "a str"),
        ("priority", is_int, "an int (not a bool)"),
        ("arrival_time", is_real, "a real number (not a bool)"),
    ):
        value = getattr(fields, field)
        if not valid(value):
            raise TypeError(f"RQ-REQ-3: {field} must be {wanted}, got {value!r}")
    if fields.arrival_time != fields.arrival_time:
        raise ValueError("RQ-REQ-3: arrival_time must not be NaN")


def request_key(request: Any) -> RequestKey:
    """The ordering key `(priority, arrival_time, request_id)`."""
    return (request.priority, request.arrival_time, request.request_id)


class Request:
    """A request as the scheduler's queues see it.

    >>> a = Request("a", priority=1, arrival_time=0.5)
    >>> b = Request("b", priority=0, arrival_time=2.0)
    >>> b < a
    True
    >>> a
    Request('a', priority=1, arrival_time=0.5)
    """

    __slots__ = ("request_id", "priority", "arrival_time", "status", "num_prompt_tokens", "n")

    @icontract.require(
        lambda request_id: isinstance(request_id, str),
        "RQ-REQ-4: request_id is a str",
        error=TypeError,
    )
    @icontract.require(
        lambda n: is_int_at_least(n, 1),
        "RQ-REQ-4: n (parallel samples) is an int of at least 1",
        error=ValueError,
    )
    @icontract.require(
        lambda num_prompt_tokens: is_int_at_least(num_prompt_tokens, 0),
        "RQ-REQ-4: num_prompt_tokens is an int, not negative",
        error=ValueError,
    )
    def __init__(
        self,
        request_id: str,
        priority: int = 0,
        arrival_time: float = 0.0,
        status: RequestStatus = RequestStatus.WAITING,
        num_prompt_tokens: int = 1,
        n: int = 1,
    ) -> None:
        self.request_id = request_id
        self.priority = priority
        self.arrival_time = arrival_time
        self.status = RequestStatus(status)
        self.num_prompt_tokens = num_prompt_tokens
        self.n = n
        # RQ-REQ-4: the same checks hold under `python -O`, where contracts are off.
        check_request_shape(self)
        if not is_int_at_least(n, 1):
            raise ValueError(f"RQ-REQ-4: n must be an int of at least 1, got {n!r}")
        if not is_int_at_least(num_prompt_tokens, 0):
            raise ValueError(
                f"RQ-REQ-4: num_prompt_tokens must be an int >= 0, got {num_prompt_tokens!r}"
            )

    def __lt__(self, other: Request) -> bool:
        """Order by `(priority, arrival_time, request_id)`."""
        return request_key(self) < request_key(other)

    # RQ-REQ-2: equality and hash stay object identity (no __eq__ / __hash__ here).

    def __repr__(self) -> str:
        # A valid Python expression, so a failing test prints as a runnable one.
        parts = [repr(self.request_id)]
        if self.priority != 0 or self.arrival_time != 0.0:
            parts.append(f"priority={self.priority!r}")
            parts.append(f"arrival_time={self.arrival_time!r}")
        if isinstance(self.status, RequestStatus):
            if self.status is not RequestStatus.WAITING:
                parts.append(f"status=RequestStatus.{self.status.name}")
        else:  # a status set by hand after construction: shown as it is, never a crash
            parts.append(f"status={self.status!r}")
        if self.num_prompt_tokens != 1:
            parts.append(f"num_prompt_tokens={self.num_prompt_tokens!r}")
        if self.n != 1:
            parts.append(f"n={self.n!r}")
        return f"Request({', '.join(parts)})"
