"""What every vector case has: the format version, the case shape, the error names.

Models no vLLM file.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

#: The vector format; bumped when a field changes meaning (ORC-VEC-1).
FORMAT_VERSION = 1

Case = dict[str, Any]
Expect = dict[str, Any]

#: Python's exception names in `expect.error`; what each means elsewhere (ORC-VEC-1).
ERROR_MEANINGS = {
    "IndexError": "the queue is empty",
    "ValueError": "invalid argument (duplicate, taken id, absent request, bad limit, ...)",
    "TypeError": "the argument is not a request",
    "KeyError": "unknown internal request id",
    "QueueOverflowError": "rejected: the request limit would be exceeded (HTTP 503)",
    "MaxQueuedTokensError": "rejected: the queued prompt tokens reached the limit (HTTP 503)",
    "AdmissionCounterError": "a slot holds a value no server could have written",
}


def make_case(kind: str, name: str, requirements: Iterable[str], **fields: Any) -> Case:
    return {
        "format": FORMAT_VERSION,
        "kind": kind,
        "name": name,
        "requirements": sorted(set(requirements)),
        **fields,
    }
