"""The Prometheus text of `serve`'s `/metrics`: metric families and rejections by reason.

Models the admission rejection counter of vLLM 0.32.0
(`vllm:admission_rejections` in `vllm/v1/metrics/loggers.py`: a
`prometheus_client.Counter` with the labels `model_name` and `reason`,
`reason` one of `ADMISSION_REASONS`, one increment per rejected attempt,
whatever its `n`; absent from 0.30.0 and 0.31.0). With more than one API
server vLLM 0.32.0 serves its metrics from a multiprocess registry
(`setup_multiprocess_prometheus` in `vllm/entrypoints/cli/serve.py`), which
sums a counter over every API server process: so does `RejectionCounts`,
over one shared array with a row per server.

Deliberate divergence: `store_unavailable` is queueref's reason (a
`serve --store` node that cannot reach its store, with the `closed` policy).
"""

from __future__ import annotations

from collections.abc import Iterable, MutableSequence
from typing import Final

from queueref.errors import AdmissionRejected, MaxQueuedTokensError, QueueOverflowError

#: vLLM 0.32.0's `ADMISSION_REASONS`, then queueref's own reason.
REJECTION_REASONS: Final = ("max_num_queued_reqs", "max_num_queued_tokens", "store_unavailable")

#: The `model_name` label of the `vllm:` metrics (the completion's `model`).
MODEL_NAME: Final = "queueref-simulated"

#: A sample: its labels (in order) and its value.
Sample = tuple[dict[str, str], int]


def rejection_reason(rejection: AdmissionRejected) -> str:
    """The `reason` label of a rejection, as vLLM 0.32.0's `check_admission` records it."""
    if isinstance(rejection, QueueOverflowError):
        return REJECTION_REASONS[0]
    if isinstance(rejection, MaxQueuedTokensError):
        return REJECTION_REASONS[1]
    return REJECTION_REASONS[2]  # the store's rejection: the only other kind


def family(name: str, kind: str, help_text: str, samples: Iterable[Sample]) -> list[str]:
    """One metric family in Prometheus text: HELP, TYPE, then a line per sample.

    A counter's samples are named `<name>_total`, as `prometheus_client` writes them.
    """
    sample_name = f"{name}_total" if kind == "counter" else name
    lines = [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
    for labels, value in samples:
        rendered = ",".join(f'{key}="{text}"' for key, text in labels.items())
        lines.append(f"{sample_name}{{{rendered}}} {value}")
    return lines


class RejectionCounts:
    """Rejections by reason, one row per server in one shared array.

    `counts` holds `num_servers * len(REJECTION_REASONS)` integers (a
    `RawArray("q", ...)` the parent allocates, or a list). Each server adds
    to its own row only; `totals` sums every row, as vLLM 0.32.0's
    multiprocess registry sums a counter over the API server processes.
    """

    def __init__(self, counts: MutableSequence[int], num_servers: int, server: int) -> None:
        if len(counts) != num_servers * len(REJECTION_REASONS) or not 0 <= server < num_servers:
            raise ValueError(
                f"rejection counters: {len(counts)} counters for {num_servers} servers "
                f"of {len(REJECTION_REASONS)} reasons, server {server}"
            )
        self._counts = counts
        self._num_servers = num_servers
        self._server = server

    def add(self, reason: str) -> None:
        """Count one rejected attempt of this server."""
        width = len(REJECTION_REASONS)
        self._counts[self._server * width + REJECTION_REASONS.index(reason)] += 1

    def totals(self) -> dict[str, int]:
        """Every server's rejections, summed per reason."""
        # E2E-SRV-9: every row, as vLLM 0.32.0's multiprocess registry sums a counter.
        width = len(REJECTION_REASONS)
        return {
            reason: sum(int(self._counts[row * width + k]) for row in range(self._num_servers))
            for k, reason in enumerate(REJECTION_REASONS)
        }
