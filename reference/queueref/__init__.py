"""queueref: a formally checked reference of vLLM's request queues and admission control."""

from queueref.queues import (
    FCFSRequestQueue,
    PriorityRequestQueue,
    RequestQueue,
    SchedulingPolicy,
    create_request_queue,
)
from queueref.request import Request, RequestStatus

__version__ = "0.1.0"

__all__ = [
    "FCFSRequestQueue",
    "PriorityRequestQueue",
    "Request",
    "RequestQueue",
    "RequestStatus",
    "SchedulingPolicy",
    "create_request_queue",
]
