"""A scheduler-side KV connector whose answers the scenario chooses.

vLLM loads a connector named in `KVTransferConfig(kv_connector=...,
kv_connector_module_path=...)` from any importable module; `vllm_side.py` names
this one. It subclasses vLLM's own `KVConnectorBase_V1` (imported from the
installed release, not copied) and answers `get_num_new_matched_tokens` from
`PLANS`, which the harness fills per request before each scenario:

* `unknown_asks`: the first that many asks answer `(None, False)` -- "not known
  yet", which makes vLLM's waiting loop skip the request for the step;
* `async_load`: the first ask after those answers `(num_tokens - 1, True)`, an
  asynchronous KV load of all but the last prompt token; the request goes to
  WAITING_FOR_REMOTE_KVS until a model output reports it in `finished_recving`.

Every other ask answers `(0, False)`: nothing external. `ASKED` records each
ask with its answer, so the harness can tell queueref's side which requests
vLLM's loop skipped for the connector, and which it sent to load KV. Nothing
on the worker side runs: there is no worker.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vllm.distributed.kv_transfer.kv_connector.v1.base import (
    KVConnectorBase_V1,
    KVConnectorMetadata,
)


@dataclass
class Plan:
    unknown_asks: int = 0
    async_load: bool = False


PLANS: dict[str, Plan] = {}
# (request_id, answer) for each ask, in order; the harness clears it.
ASKED: list[tuple[str, str]] = []


def reset() -> None:
    PLANS.clear()
    ASKED.clear()


class ScenarioConnector(KVConnectorBase_V1):
    """The scheduler side only; the worker-side methods are never called."""

    def get_num_new_matched_tokens(
        self, request: Any, num_computed_tokens: int
    ) -> tuple[int | None, bool]:
        plan = PLANS.get(request.request_id)
        if plan is not None and plan.unknown_asks > 0:
            plan.unknown_asks -= 1
            ASKED.append((request.request_id, "unknown"))
            return None, False
        if plan is not None and plan.async_load and request.num_tokens > 1:
            plan.async_load = False  # once: after a preemption it recomputes
            ASKED.append((request.request_id, "async"))
            return request.num_tokens - 1 - num_computed_tokens, True
        ASKED.append((request.request_id, "none"))
        return 0, False

    def update_state_after_alloc(self, request: Any, blocks: Any, num_external_tokens: int) -> None:
        return None

    def build_connector_meta(self, scheduler_output: Any) -> KVConnectorMetadata:
        return KVConnectorMetadata()

    def request_finished(self, request: Any, block_ids: Any) -> tuple[bool, dict[str, Any] | None]:
        return False, None

    # Worker side: never called (no worker runs).
    def start_load_kv(self, forward_context: Any, **kwargs: Any) -> None:
        raise AssertionError("worker-side method called")

    def wait_for_layer_load(self, layer_name: str) -> None:
        raise AssertionError("worker-side method called")

    def save_kv_layer(
        self, layer_name: str, kv_layer: Any, attn_metadata: Any, **kwargs: Any
    ) -> None:
        raise AssertionError("worker-side method called")

    def wait_for_save(self) -> None:
        raise AssertionError("worker-side method called")
