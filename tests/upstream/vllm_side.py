"""vLLM's real `Scheduler` of the installed release, built on CPU and driven step by step.

Nothing here is vLLM's code: it builds vLLM's own objects (as vLLM's
`tests/v1/core/utils.py` does) and calls their public methods. The release is
whichever `vllm` is first on `sys.path` (tools/upstream.py puts one release's
folder there).

The world the scheduler runs in is chosen so that, of all the reasons vLLM's
waiting loop has to skip or stop at a request, only the ones queueref's
callbacks stand for can happen: no prefix caching, no encoder, no speculative
decoding, synchronous scheduling. A request with structured output waits for
its grammar (WAITING_FOR_STRUCTURED_OUTPUT_GRAMMAR) until the scenario makes
the grammar ready. Some shapes add a `LoRAConfig` with a small `max_loras`
(requests name adapters by `LoRARequest`; the scheduler only counts them, no
weights are loaded) and a KV connector (`scenario_connector.py`) whose answers
the scenario plans: "not known yet" (a skip) and asynchronous loads
(WAITING_FOR_REMOTE_KVS until a model output reports `finished_recving`).
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import vllm
from vllm.config import (
    CacheConfig,
    DeviceConfig,
    KVTransferConfig,
    LoRAConfig,
    ModelConfig,
    SchedulerConfig,
    VllmConfig,
)
from vllm.lora.request import LoRARequest
from vllm.sampling_params import SamplingParams, StructuredOutputsParams
from vllm.v1.core.sched.interface import PauseState
from vllm.v1.core.sched.scheduler import Scheduler
from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
from vllm.v1.outputs import KVConnectorOutput, ModelRunnerOutput
from vllm.v1.request import Request, RequestStatus
from vllm.v1.structured_output import StructuredOutputManager

RELEASE: str = vllm.__version__
EOS_TOKEN_ID = 2
OTHER_TOKEN_ID = 7
MAX_MODEL_LEN = 256
# vLLM 0.31.0 replaced `skipped_waiting` with `kv_holding_waiting` and `deferred_waiting`.
KV_HOLDING_LAYOUT = not hasattr(Scheduler, "_select_waiting_queue_for_scheduling")
# The LoRA cap of the waiting loop counts the adapters of every running request from
# vLLM 0.33.0 (`schedule()`: `for req in self.running`); 0.30.0-0.32.0 count those of
# the running requests scheduled this step (`for req in scheduled_running_reqs`).
LORA_COUNTS_EVERY_RUNNING = tuple(int(x) for x in RELEASE.split(".")[:2]) >= (0, 33)
# vLLM 0.31.0 added SchedulerConfig.max_num_active_seqs.
HAS_ACTIVE_SEQS = "max_num_active_seqs" in SchedulerConfig.__dataclass_fields__

_MODEL_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "num_hidden_layers": 1,
    "vocab_size": 128,
    "max_position_embeddings": MAX_MODEL_LEN,
    "torch_dtype": "float32",
    "bos_token_id": 1,
    "eos_token_id": EOS_TOKEN_ID,
}
_model_dir: Path | None = None
_model_configs: dict[bool, ModelConfig] = {}


def model_dir() -> Path:
    """A folder holding only a small config.json: no weights, no tokenizer."""
    global _model_dir
    if _model_dir is None:
        _model_dir = Path(tempfile.mkdtemp(prefix="queueref-vllm-model-"))
        (_model_dir / "config.json").write_text(json.dumps(_MODEL_CONFIG))
    return _model_dir


def model_config() -> ModelConfig:
    """Built once per process: vLLM inspects the architecture, which takes a second."""
    if True not in _model_configs:
        _model_configs[True] = ModelConfig(
            model=str(model_dir()),
            skip_tokenizer_init=True,
            dtype="float32",
            max_model_len=MAX_MODEL_LEN,
            seed=0,
        )
    return _model_configs[True]


@dataclass(frozen=True)
class SchedulerShape:
    """The limits a scenario runs under."""

    policy: str  # "fcfs" | "priority"
    num_blocks: int
    block_size: int
    max_num_seqs: int
    max_num_batched_tokens: int
    # From vLLM 0.31.0: the cap on RUNNING the waiting loop checks (None: max_num_seqs).
    max_num_active_seqs: int | None = None
    # A LoRAConfig with this max_loras (None: no LoRA).
    max_loras: int | None = None
    # The scenario's KV connector (scenario_connector.ScenarioConnector).
    kv_connector: bool = False

    @property
    def running_cap(self) -> int:
        """What the waiting loop stops at: `max_num_active_seqs` where the release has it."""
        if HAS_ACTIVE_SEQS and self.max_num_active_seqs is not None:
            return self.max_num_active_seqs
        return self.max_num_seqs


def build_scheduler(shape: SchedulerShape) -> Scheduler:
    """vLLM's Scheduler on CPU with one full-attention KV group of `num_blocks` blocks."""
    active = {"max_num_active_seqs": shape.max_num_active_seqs} if HAS_ACTIVE_SEQS else {}
    scheduler_config = SchedulerConfig(
        max_model_len=MAX_MODEL_LEN,
        is_encoder_decoder=False,
        max_num_seqs=shape.max_num_seqs,
        max_num_batched_tokens=shape.max_num_batched_tokens,
        enable_chunked_prefill=True,
        policy=shape.policy,
        async_scheduling=False,
        **active,
    )
    cache_config = CacheConfig(
        block_size=shape.block_size, enable_prefix_caching=False, cache_dtype="auto"
    )
    extra: dict[str, Any] = {}
    if shape.max_loras is not None:
        extra["lora_config"] = LoRAConfig(max_loras=shape.max_loras)
    if shape.kv_connector:
        extra["kv_transfer_config"] = KVTransferConfig(
            kv_connector="ScenarioConnector",
            kv_connector_module_path="scenario_connector",
            kv_role="kv_both",
        )
    vllm_config = VllmConfig(
        scheduler_config=scheduler_config,
        model_config=model_config(),
        cache_config=cache_config,
        device_config=DeviceConfig(device="cpu"),
        **extra,
    )
    spec = FullAttentionSpec(
        block_size=shape.block_size, num_kv_heads=1, head_size=1, dtype=torch.float32
    )
    kv_cache_config = KVCacheConfig(
        num_blocks=shape.num_blocks,
        kv_cache_tensors=[],
        kv_cache_groups=[KVCacheGroupSpec(["layer"], spec)],
    )
    cache_config.num_gpu_blocks = shape.num_blocks
    return Scheduler(
        vllm_config=vllm_config,
        kv_cache_config=kv_cache_config,
        log_stats=False,
        structured_output_manager=StructuredOutputManager(vllm_config),
        block_size=shape.block_size,
    )


def make_request(
    request_id: str,
    *,
    priority: int,
    arrival_time: float,
    num_prompt_tokens: int,
    max_tokens: int,
    structured: bool,
    resumable: bool = False,
    lora_id: int = 0,
) -> Request:
    """A vLLM Request; with `structured` it waits for its grammar; `resumable`: a
    streaming session (given again under its id: the session's next chunk);
    `lora_id` > 0: it names that LoRA adapter (never loaded: no worker runs)."""
    params = SamplingParams(
        max_tokens=max_tokens,
        stop_token_ids=[EOS_TOKEN_ID],
        structured_outputs=StructuredOutputsParams(regex="[ab]+") if structured else None,
    )
    return Request(
        request_id=request_id,
        prompt_token_ids=[OTHER_TOKEN_ID] * num_prompt_tokens,
        sampling_params=params,
        pooling_params=None,
        arrival_time=arrival_time,
        priority=priority,
        resumable=resumable,
        lora_request=LoRARequest(f"lora{lora_id}", lora_id, "/nonexistent") if lora_id else None,
    )


class ReadyGrammar:
    """A compiled grammar that accepts every token (the scenario's tokens are not checked)."""

    def accept_tokens(self, request_id: str, tokens: list[int]) -> bool:
        return True

    def validate_tokens(self, tokens: list[int]) -> list[int]:
        return tokens

    def is_terminated(self) -> bool:
        return False

    def rollback(self, num_tokens: int) -> None:
        return None

    def reset(self) -> None:
        return None

    def fill_bitmask(self, bitmask: Any, batch_index: int) -> None:
        return None


def make_grammar_ready(request: Request) -> None:
    """What StructuredOutputManager.grammar_init does once compilation finishes."""
    request.structured_output_request.grammar = ReadyGrammar()


def model_output(
    scheduler: Scheduler,
    num_scheduled_tokens: dict[str, int],
    stops: set[str],
    finished_recving: set[str] | None = None,
) -> ModelRunnerOutput:
    """One token for each request whose prompt is computed (EOS for those in `stops`);
    `finished_recving`: the async KV loads the worker reports done."""
    sampled: list[list[int]] = []
    for request_id in num_scheduled_tokens:
        request = scheduler.requests[request_id]
        if request.num_computed_tokens < request.num_tokens:
            sampled.append([])  # a prefill chunk: nothing sampled
        else:
            sampled.append([EOS_TOKEN_ID if request_id in stops else OTHER_TOKEN_ID])
    return ModelRunnerOutput(
        req_ids=list(num_scheduled_tokens),
        req_id_to_index={r: i for i, r in enumerate(num_scheduled_tokens)},
        sampled_token_ids=sampled,
        kv_connector_output=(
            KVConnectorOutput(finished_recving=finished_recving) if finished_recving else None
        ),
    )


def ids(requests: Any) -> list[str]:
    return [r.request_id for r in requests]


def snapshot(scheduler: Scheduler, requests: dict[str, Request]) -> dict[str, Any]:
    """Every place vLLM keeps a request, in order, every request's status and
    `get_num_unfinished_requests()` (0.30.0-0.33.0 each have it)."""
    state: dict[str, Any] = {"running": ids(scheduler.running), "waiting": ids(scheduler.waiting)}
    if KV_HOLDING_LAYOUT:
        state["kv_holding_waiting"] = ids(scheduler.kv_holding_waiting)
        state["deferred_waiting"] = sorted(ids(scheduler.deferred_waiting))
    else:
        state["skipped_waiting"] = ids(scheduler.skipped_waiting)
    state["statuses"] = {rid: r.status.name for rid, r in requests.items()}
    state["finished"] = sorted(rid for rid, r in requests.items() if r.is_finished())
    state["paused_sessions"] = scheduler.num_waiting_for_streaming_input
    state["num_unfinished"] = scheduler.get_num_unfinished_requests()
    return state


__all__ = [
    "EOS_TOKEN_ID",
    "KV_HOLDING_LAYOUT",
    "PauseState",
    "RELEASE",
    "Request",
    "RequestStatus",
    "Scheduler",
    "SchedulerShape",
    "build_scheduler",
    "make_grammar_ready",
    "make_request",
    "model_output",
    "snapshot",
]
