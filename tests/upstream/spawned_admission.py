"""vLLM's own admission code and queueref's, side by side in spawned server processes.

The harness of `test_spawned_admission.py` (run by `make upstream`, with the
release under test first on the path). As the release's
`APIServerProcessManager` does (`vllm/v1/utils.py` of 0.30.0 to 0.33.0), the
parent allocates one `RawArray("q", SharedAdmissionStats.num_counters(N))`
from the `spawn` context -- the release's own `num_counters` -- and hands it
to N spawned processes in a client config (`mp_admission_counters`,
`client_count`, `client_index`). Each process is one API server holding two
views of its slot: queueref's `SharedAdmissionStats` (built first, from the
config, which it leaves untouched: ADM-RISK-3) and the release's own (which
pops the buffer from the config).

For every combination of the servers' requests (`COMBOS`) each server
registers its own requests with queueref's `RequestTracker` (which writes
its slot through queueref's stats); on every other combination the release's
own `set_num_requests` then writes the slot as well, last, with the count its
`OutputProcessor` writes (the unfinished requests). After a barrier, with
nothing being written, each server reads the global count through both views
and, for every point of `LIMITS` x `NS`, asks the release's
`AsyncLLM.check_admission` (on a stand-in engine that answers the counts from
the same tracker) and queueref's `AdmissionController.check_admission`
whether to admit. A second barrier ends the reads before the next writes.

A phase other than "agree" plants a divergence on queueref's side by handing
queueref's stats a wrong view of the same memory (`queueref_view`): only its
own slot ("own-slot"), or the counters as 4-byte words, which halves the
stride between slots ("int32-stride"). The processes are the same; only the
view differs.
"""

from __future__ import annotations

import ctypes
import itertools
import multiprocessing
import queue
import traceback
from types import SimpleNamespace
from typing import Any

import vllm
from vllm.v1.engine import admission_control
from vllm.v1.engine.async_llm import AsyncLLM

from queueref import AdmissionController, AdmissionRejected, RequestTracker, SharedAdmissionStats
from queueref.errors import AdmissionCounterError

SERVERS = 3  # each spawned server imports vLLM (about 10 s of CPU): few, but two others
# Each server's requests (their prompt tokens); a combination gives one to each server.
PROMPT_SETS = ((), (1,), (2, 3), (1, 1, 4, 2))
COMBOS = list(itertools.product(PROMPT_SETS, repeat=SERVERS))
# (max_num_queued_reqs, max_num_queued_tokens) x n; the global count reaches 12.
LIMITS = list(itertools.product((None, 0, 1, 2, 4, 6, 9, 12), (None, 0, 1, 5, 9)))
NS = (1, 2, 3)
PHASES = ("agree", "own-slot", "int32-stride")
DECISIONS = ("admit", "QueueOverflowError", "MaxQueuedTokensError")
BARRIER_S = 120.0  # a barrier between two combinations; a dead server breaks it
START_S = 900.0  # the first barrier waits for every server to import vLLM


def queueref_view(phase: str, counters: Any, servers: int, index: int) -> tuple[Any, int, int]:
    """The (buffer, client_count, client_index) queueref's stats are built on in `phase`."""
    if phase == "agree":
        return counters, servers, index
    if phase == "own-slot":  # the own slot alone, as if the server were the only one
        slot = SharedAdmissionStats.COUNTERS_PER_SLOT
        own = (ctypes.c_int64 * slot).from_buffer(counters, index * slot * 8)
        return own, 1, 0
    if phase == "int32-stride":  # 4-byte counters: slot i starts 32 bytes in, not 64
        words = (ctypes.c_int32 * (2 * len(counters))).from_buffer(counters)
        return words, servers, index
    raise ValueError(f"unknown phase {phase!r}; known: {', '.join(PHASES)}")


class StandInEngine(SimpleNamespace):
    """What the release's `AsyncLLM.check_admission` reads of its engine: the scheduler
    config's two limits, `admission_stats`, and the local counts (from the tracker)."""

    def _record_admission_rejection(self, reason: str) -> None:
        # 0.32.0 and later record a rejection metric; run the release's own method.
        AsyncLLM._record_admission_rejection(self, reason)


def stand_in_engine(
    stats: Any, tracker: RequestTracker, max_reqs: int | None, max_tokens: int | None
) -> StandInEngine:
    return StandInEngine(
        scheduler_config=SimpleNamespace(
            max_num_queued_reqs=max_reqs, max_num_queued_tokens=max_tokens
        ),
        admission_stats=stats,
        get_num_unfinished_requests=tracker.get_num_unfinished_requests,
        get_num_queued_tokens=tracker.get_num_queued_tokens,
        logger_manager=None,
        log_stats=False,
    )


def vllm_decision(engine: StandInEngine, n: int) -> str:
    """The release's own check_admission: "admit" or the error's class name."""
    try:
        AsyncLLM.check_admission(engine, n)
    except Exception as error:
        if type(error).__name__ not in DECISIONS:
            raise  # a crash of vLLM's code or of the harness, never a decision
        return type(error).__name__
    return "admit"


def queueref_decision(controller: AdmissionController, n: int) -> str:
    try:
        controller.check_admission(n)
    except (AdmissionRejected, AdmissionCounterError) as error:
        return type(error).__name__
    return "admit"


def _count(stats: Any) -> int | str:
    try:
        return int(stats.get_num_requests())
    except AdmissionCounterError as error:
        return type(error).__name__


def serve(config: dict[str, Any], phases: tuple[str, ...], barrier: Any) -> dict[str, Any]:
    """One server's side of every phase: a record per phase and combination."""
    servers, index = config["client_count"], config["client_index"]
    records: dict[str, list[dict[str, Any]]] = {}
    barrier.wait(START_S)
    for phase in phases:
        client_config = dict(config)  # vLLM pops the buffer from the dict it is given
        ours = SharedAdmissionStats(
            *queueref_view(phase, config["mp_admission_counters"], servers, index)
        )
        theirs = admission_control.SharedAdmissionStats(client_config, servers, index)
        tracker = RequestTracker(ours)
        deciders = [
            (
                stand_in_engine(theirs, tracker, max_reqs, max_tokens),
                AdmissionController(
                    max_reqs, max_tokens, tracker=tracker, shared_stats=ours, token_scope="local"
                ),
            )
            for max_reqs, max_tokens in LIMITS
        ]
        rows = records[phase] = []
        for number, combo in enumerate(COMBOS):
            tracker.abort(tracker.request_ids())  # writes the slot, to 0
            for k, tokens in enumerate(combo[index]):
                tracker.add(f"c{number}-r{k}", 1, tokens)
            vllm_wrote = (index + number) % 2 == 1
            if vllm_wrote:  # as the release's OutputProcessor._update_admission_stats
                theirs.set_num_requests(tracker.get_num_unfinished_requests())
            barrier.wait(BARRIER_S)  # every slot written; nothing is written until the next
            rows.append(
                {
                    "combo": number,
                    "vllm_wrote": vllm_wrote,
                    "vllm_count": _count(theirs),
                    "queueref_count": _count(ours),
                    "decisions": [
                        (vllm_decision(engine, n), queueref_decision(controller, n))
                        for engine, controller in deciders
                        for n in NS
                    ],
                }
            )
            barrier.wait(BARRIER_S)
        tracker.abort(tracker.request_ids())
    return {"server": index, "version": vllm.__version__, "records": records}


def server_main(config: dict[str, Any], phases: tuple[str, ...], barrier: Any, out: Any) -> None:
    """The spawned process: its records, or the traceback that ended it, on `out`."""
    try:
        out.put(serve(config, phases, barrier))
    except BaseException:
        barrier.abort()  # the others stop waiting for this one
        out.put({"server": config["client_index"], "error": traceback.format_exc()})


def run(phases: tuple[str, ...] = PHASES, servers: int = SERVERS) -> list[dict[str, Any]]:
    """Spawn the servers over one buffer allocated as the release allocates it; their
    results, by server. A server that fails or dies is a `RuntimeError` naming it."""
    context = multiprocessing.get_context("spawn")
    counters = context.RawArray("q", admission_control.SharedAdmissionStats.num_counters(servers))
    barrier = context.Barrier(servers)
    out = context.Queue()
    processes = [
        context.Process(
            target=server_main,
            args=(
                {"mp_admission_counters": counters, "client_count": servers, "client_index": i},
                phases,
                barrier,
                out,
            ),
            name=f"ApiServer_{i}",
        )
        for i in range(servers)
    ]
    for process in processes:
        process.start()
    results: list[dict[str, Any]] = []
    try:
        while len(results) < servers:
            try:
                results.append(out.get(timeout=5))
            except queue.Empty:
                dead = [p for p in processes if p.exitcode not in (None, 0)]
                if dead:
                    raise RuntimeError(f"{dead[0].name} exited with {dead[0].exitcode}") from None
    finally:
        for process in processes:
            process.join(timeout=30)
            if process.is_alive():
                process.kill()
    failed = [r for r in results if "error" in r]
    if failed:
        raise RuntimeError(f"ApiServer_{failed[0]['server']} failed:\n{failed[0]['error']}")
    return sorted(results, key=lambda r: r["server"])


def differences(results: list[dict[str, Any]], phase: str) -> list[dict[str, Any]]:
    """Every (server, combination) of `phase` where the counts read are not both the sum
    of the requests the servers registered, or where a decision differs."""
    found = []
    for result in results:
        for row in result["records"][phase]:
            expected = sum(len(prompts) for prompts in COMBOS[row["combo"]])
            counts = (row["vllm_count"], row["queueref_count"])
            split = [
                (limits, n, pair)
                for (limits, n), pair in zip(
                    itertools.product(LIMITS, NS), row["decisions"], strict=True
                )
                if pair[0] != pair[1]
            ]
            if counts != (expected, expected) or split:
                found.append(
                    {
                        "server": result["server"],
                        "combo": row["combo"],
                        "expected": expected,
                        "counts": counts,
                        "decisions": split[:3],
                    }
                )
    return found
