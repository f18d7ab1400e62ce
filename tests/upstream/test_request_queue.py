"""vLLM's own `create_request_queue` under queueref's oracle, with vLLM's real `Request`.

Run by `make upstream` once per installed release (tests/conftest.py). The
oracle (`queueref.oracle.check_request_queue`, ORC-CRQ-1) drives the release's
queue and queueref's reference side by side. Its teeth: a queue built on the
release's own FCFS queue whose `prepend_requests` keeps the order of its
argument (vLLM's `extendleft` reverses it, RQ-FCFS-4) is refused.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

import pytest
import vllm_side
from vllm.v1.core.sched.request_queue import (
    FCFSRequestQueue,
    RequestQueue,
    SchedulingPolicy,
    create_request_queue,
)

from queueref.oracle import ConformanceError, check_request_queue

pytestmark = pytest.mark.upstream

RELEASE = os.environ["QUEUEREF_UPSTREAM_RELEASE"]


def vllm_request(request_id: str, priority: int, arrival_time: float) -> Any:
    """vLLM's own Request: the oracle feeds the same objects to both queues."""
    return vllm_side.make_request(
        request_id,
        priority=priority,
        arrival_time=arrival_time,
        num_prompt_tokens=1,
        max_tokens=1,
        structured=False,
    )


@pytest.mark.parametrize("policy", ["fcfs", "priority"])
def test_vllm_request_queue_passes_the_oracle(policy: str) -> None:
    """ORC-CRQ-1 on the release's own queues and requests."""
    assert vllm_side.RELEASE == RELEASE

    def factory() -> RequestQueue:
        return create_request_queue(SchedulingPolicy(policy))

    check_request_queue(factory, policy, request_factory=vllm_request)  # raises on a difference


class PrependsInOrder(FCFSRequestQueue):  # type: ignore[misc]  # vLLM: untyped here
    """The release's FCFS queue with `prepend_requests` not reversing its argument."""

    def prepend_requests(self, requests: Iterable[Any]) -> None:
        self.extendleft(reversed(list(requests)))


def test_the_oracle_refuses_a_broken_vllm_queue() -> None:
    with pytest.raises(ConformanceError, match="prepend_requests"):
        check_request_queue(PrependsInOrder, "fcfs", request_factory=vllm_request)
