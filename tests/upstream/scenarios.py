"""Seeded scenarios for the differential run: the events both sides are given.

A scenario is a scheduler shape (policy, KV blocks, `max_num_seqs`,
`max_num_active_seqs` from vLLM 0.31.0, token budget) and a list of events,
all drawn from `random.Random(seed)`, so a seed names a scenario everywhere
(reports, tests). Events:

* `Arrive(requests)`: new requests, with priorities 0-2 and arrival times drawn
  from a few values (ties in `(priority, arrival_time)` are common); about one
  in four has structured output and waits for its grammar.
* `GrammarReady(request_id)`: the grammar of that request is compiled.
* `Step(stop_draws)`: one `schedule()` and one `update_from_output`; each
  scheduled request whose prompt is computed samples one token, EOS when its
  draw is below `STOP_CHANCE` (a finish, FINISHED_STOPPED), else another token
  (FINISHED_LENGTH_CAPPED at `max_tokens`).
* `Abort(request_ids)`: `finish_requests(ids, FINISHED_ABORTED)`, ids of any
  place (an unknown or finished id included now and then).
* `StreamUpdate(request_id, num_prompt_tokens)`: the next input chunk of a
  streaming session (a resumable request; about one in five of the others),
  or with `None` the end of its stream. The chunk keeps the session's arrival
  time: queueref deliberately keeps it where vLLM sets the update's
  (`reference/queueref/waiting/lifecycle.py`, "Deliberate divergences").

About a third of the scenarios run with a `LoRAConfig` of `max_loras` 1 or 2
(most of their requests name one of three adapters), and about a third with
the scenario's KV connector (`scenario_connector.py`): a request's first asks
may answer "not known yet" (vLLM skips it for the step) and about one in three
loads its KV asynchronously (WAITING_FOR_REMOTE_KVS) until a step's model
output reports the load finished (a draw per step, `recv_draws`). These are
drawn from a second generator seeded from the seed, so the draws above are
those of the scenarios without them.

About two in five scenarios pause: `Pause(state)` sets the scheduler's pause
state ("paused_new", "paused_all" or back to "unpaused", queueref's
`PauseState` values) between the other events, and every pause is lifted
before the steps that end the scenario. These come from a third generator, so
the other draws stay those of the scenarios without pauses.

Small KV pools (6-24 blocks of 4 tokens against prompts of up to 20 tokens
and up to 16 outputs) make running requests preempt each other.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from vllm_side import SchedulerShape

STOP_CHANCE = 0.15
POLICIES = ("fcfs", "priority")


@dataclass(frozen=True)
class RequestSpec:
    request_id: str
    priority: int
    arrival_time: float
    num_prompt_tokens: int
    max_tokens: int
    structured: bool
    resumable: bool = False
    lora_id: int = 0  # > 0: the LoRA adapter it names
    unknown_asks: int = 0  # the connector answers "not known yet" this many times
    async_load: bool = False  # the connector loads its KV asynchronously


@dataclass(frozen=True)
class Arrive:
    requests: tuple[RequestSpec, ...]


@dataclass(frozen=True)
class GrammarReady:
    request_id: str


@dataclass(frozen=True)
class Step:
    # One draw per request id, looked up for the requests that sample a token.
    stop_draws: tuple[tuple[str, float], ...]
    # One draw per request id: an async KV load in flight finishes when below 0.5.
    recv_draws: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class Abort:
    request_ids: tuple[str, ...]


@dataclass(frozen=True)
class StreamUpdate:
    request_id: str
    num_prompt_tokens: int | None  # None: the stream ends


@dataclass(frozen=True)
class Pause:
    state: str  # a queueref PauseState value: "unpaused", "paused_new", "paused_all"


Event = Arrive | GrammarReady | Step | Abort | StreamUpdate | Pause


@dataclass(frozen=True)
class Scenario:
    seed: int
    shape: SchedulerShape
    events: tuple[Event, ...]


def scenario(seed: int, policy: str | None = None) -> Scenario:
    """The scenario of `seed` (the policy drawn unless given)."""
    rng = random.Random(seed)
    features = random.Random(f"{seed}/lora-and-connector")
    pauses = random.Random(f"{seed}/pause")
    pausing = pauses.random() < 0.4
    paused = False
    max_loras = features.choice((None, None, 1, 2))
    kv_connector = features.random() < 0.35
    max_num_seqs = rng.randint(1, 6)
    shape = SchedulerShape(
        policy=policy if policy is not None else rng.choice(POLICIES),
        num_blocks=rng.randint(6, 24),
        block_size=4,
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=rng.choice((8, 12, 16, 24, 32, 64)),
        # Used by vLLM 0.31.0 and later only.
        max_num_active_seqs=rng.choice((None, rng.randint(1, max_num_seqs))),
        max_loras=max_loras,
        kv_connector=kv_connector,
    )
    events: list[Event] = []
    ids: list[str] = []
    structured: list[str] = []
    resumable: list[str] = []
    for _ in range(rng.randint(12, 40)):
        if pausing and pauses.random() < (0.3 if paused else 0.12):
            state = (
                "unpaused" if paused else pauses.choice(("paused_new", "paused_new", "paused_all"))
            )
            paused = not paused
            events.append(Pause(state))
        roll = rng.random()
        if roll < 0.3 or not ids:
            arrivals = []
            for _ in range(rng.randint(1, 3)):
                request_id = f"r{len(ids)}"
                kind = rng.random()
                spec = RequestSpec(
                    request_id=request_id,
                    priority=rng.randint(0, 2),
                    arrival_time=float(rng.randint(0, 4)),
                    num_prompt_tokens=rng.randint(1, 20),
                    max_tokens=rng.randint(1, 16),
                    structured=kind < 0.25,
                    resumable=kind >= 0.8,
                    lora_id=features.choice((0, 1, 2, 3, 3)) if max_loras else 0,
                    unknown_asks=features.choice((0, 0, 0, 1, 2)) if kv_connector else 0,
                    async_load=kv_connector and features.random() < 0.35,
                )
                ids.append(request_id)
                if spec.structured:
                    structured.append(request_id)
                if spec.resumable:
                    resumable.append(request_id)
                arrivals.append(spec)
            events.append(Arrive(tuple(arrivals)))
        elif roll < 0.4 and structured:
            events.append(GrammarReady(structured.pop(rng.randrange(len(structured)))))
        elif roll < 0.5 and resumable:
            request_id = rng.choice(resumable)
            if rng.random() < 0.2:
                resumable.remove(request_id)
                events.append(StreamUpdate(request_id, None))
            else:
                events.append(StreamUpdate(request_id, rng.randint(1, 8)))
        elif roll < 0.57:
            chosen = rng.sample(ids, rng.randint(1, min(2, len(ids))))
            if rng.random() < 0.1:
                chosen.append("unknown")
            events.append(Abort(tuple(chosen)))
        else:
            events.append(_step(rng, features if kv_connector else None, ids))
    if paused:
        events.append(Pause("unpaused"))
    for _ in range(5):  # let the queues drain a little at the end
        events.append(_step(rng, features if kv_connector else None, ids))
    return Scenario(seed, shape, tuple(events))


def _step(rng: random.Random, features: random.Random | None, ids: list[str]) -> Step:
    """`features`: the second generator, in scenarios with the KV connector only."""
    stops = tuple((request_id, rng.random()) for request_id in ids)
    if features is None:
        return Step(stops)
    return Step(stops, tuple((request_id, features.random()) for request_id in ids))
