"""queueref: a formally checked reference of vLLM's request queues and admission control."""

from queueref.admission.controller import AdmissionController
from queueref.admission.shared_stats import SharedAdmissionStats, allocate_admission_counters
from queueref.admission.tracker import RequestTracker
from queueref.errors import AdmissionRejected, MaxQueuedTokensError, QueueOverflowError
from queueref.queues.base import RequestQueue
from queueref.queues.factory import SchedulingPolicy, create_request_queue
from queueref.queues.fcfs import FCFSRequestQueue
from queueref.queues.priority import PriorityRequestQueue
from queueref.request import Request, RequestStatus
from queueref.waiting.lifecycle import WaitingQueues
from queueref.waiting.places import StepDecision

__version__ = "0.1.0"

__all__ = [
    "AdmissionController",
    "AdmissionRejected",
    "FCFSRequestQueue",
    "MaxQueuedTokensError",
    "PriorityRequestQueue",
    "QueueOverflowError",
    "Request",
    "RequestQueue",
    "RequestStatus",
    "RequestTracker",
    "SchedulingPolicy",
    "SharedAdmissionStats",
    "StepDecision",
    "WaitingQueues",
    "allocate_admission_counters",
    "create_request_queue",
]
