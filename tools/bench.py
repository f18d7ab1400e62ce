"""`make bench`: queueref beside vLLM 0.33.0's own code, bare Python and the explorer.

Everything is measured in one run, side by side, in interleaved rounds: each
round runs every variant once, in its own process, one after the other, so a
change in the machine's load hits all of them alike. A cell reports the median
over the rounds and the min/max; a ratio is taken per round (queueref and vLLM
of the same round) and reported the same way.

Variants:

* `queueref-off`: queueref with contracts off (`python -O` disables icontract);
* `queueref-on`: queueref with its default contracts (deep checks off);
* `vllm`: the installed vLLM 0.33.0 (`VLLM_RELEASE`): its own
  `vllm.v1.core.sched.request_queue`, `SharedAdmissionStats` and
  `AsyncLLM.check_admission`, imported in make upstream's cache venv
  (`~/.cache/queueref/vllm`; installed as tools/upstream.py installs it when
  missing, and a failed install ends the run with one line). vLLM's own
  `check_admission` is called on a stand-in engine that carries what it reads
  (the scheduler config's limits, the admission stats, the local counts). Same
  CPython 3.11 build as queueref's venv; the child has imported vLLM and
  torch, so its heap is larger. Run under `python -O`;
* `bare`: `collections.deque` / `heapq` on the same request objects, and for
  admission the floor of any check: a precomputed strided `memoryview` over the
  counters, `sum(view) + n > M`;
* `floor`: the floor of an FCFS queue that makes queueref's checks under `-O`
  (add+pop and `prepend_requests`): a bare deque plus a dict index and the same
  tests of a request (its id a str, its priority an int, its arrival time a
  float and not NaN, its id not queued), written inline here as the cheapest
  Python for them; run under `python -O`.

Requests: every queue comparison says which request type it used --
`vllm-shaped` (the three fields and the `Request.__lt__` order of vLLM
0.30.0 to 0.33.0: priority, arrival time, request id, identity) or
queueref's own `Request` (whose `<` compares key tuples).

A benchmark, not a test: it measures and reports, it asserts nothing.
Results: `build/bench.json` and Markdown tables on stdout.
"""

from __future__ import annotations

import functools
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import upstream  # tools/upstream.py, beside this file: make upstream's cache of releases

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build"
# The release timed: the one make upstream's cache venv holds with its dependencies.
VLLM_RELEASE = upstream.DEPS_RELEASE
SIZES = (100, 10_000, 100_000)
SERVER_COUNTS = (1, 4, 16, 64)
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "5"))
BUDGET_S = float(os.environ.get("BENCH_BUDGET_S", "0.05"))  # timed seconds per cell and round
PREPEND_BATCH = 16  # a step's skipped requests, moved back with prepend_requests
VARIANTS = ("queueref-off", "queueref-on", "vllm", "bare", "floor")
ADMISSION_VARIANTS = ("queueref-off", "queueref-on", "vllm", "bare")

# --------------------------------------------------------------------------------------
# The installed vLLM


def ensure_vllm() -> str | None:
    """Install the timed release into make upstream's cache when it is missing (as
    tools/upstream.py does); None, or the one line that says what could not be installed."""
    try:
        upstream.install(upstream.cache_dir(), (VLLM_RELEASE,))
    except upstream.InstallError as error:
        return "make bench: " + str(error).removeprefix("make upstream: ")
    return None


# --------------------------------------------------------------------------------------
# Requests


class VllmShapedRequest:
    """The fields the queues use, ordered as `Request.__lt__` of vLLM 0.30.0 to 0.33.0
    orders: priority, then arrival time, then request id, then identity."""

    __slots__ = ("request_id", "priority", "arrival_time")

    def __init__(self, request_id: str, priority: int, arrival_time: float) -> None:
        self.request_id, self.priority, self.arrival_time = request_id, priority, arrival_time

    def __lt__(self, other: VllmShapedRequest) -> bool:
        if self.priority != other.priority:
            return self.priority < other.priority
        if self.arrival_time != other.arrival_time:
            return self.arrival_time < other.arrival_time
        if self.request_id != other.request_id:
            return self.request_id < other.request_id
        return id(self) < id(other)


def make_requests(kind: str, count: int, prefix: str = "r") -> list[Any]:
    if kind == "queueref":
        from queueref import Request

        return [
            Request(f"{prefix}{i}", priority=i % 10, arrival_time=float(i)) for i in range(count)
        ]
    return [VllmShapedRequest(f"{prefix}{i}", i % 10, float(i)) for i in range(count)]


# --------------------------------------------------------------------------------------
# Timing (in the child)


def _floor_check(view: memoryview, cap: int) -> bool:
    """The floor of any shared check: a precomputed strided view, summed in C."""
    return sum(view) + 1 > cap


def per_call_us(fn: Callable[[], object]) -> float:
    """CPU microseconds per call, for calls repeated until BUDGET_S has been spent.

    CPU time of this process (`time.process_time`), not wall time: the machine is
    shared, and time spent descheduled is nobody's cost."""
    count, spent = 0, 0.0
    batch = 1
    while spent < BUDGET_S:
        started = time.process_time()
        for _ in range(batch):
            fn()
        spent += time.process_time() - started
        count += batch
        batch = min(batch * 2, 4096)
    return spent / count * 1e6


def timed_us(run: Callable[[], float]) -> float:
    """`run()` returns the seconds it timed itself (its setup excluded); mean in µs, over
    runs repeated until BUDGET_S has been timed or 10 * BUDGET_S has passed (at least 3)."""
    count, spent = 0, 0.0
    began = time.process_time()
    while count < 3 or (spent < BUDGET_S and time.process_time() - began < 10 * BUDGET_S):
        spent += run()
        count += 1
    return spent / count * 1e6


class _Vllm:
    """The installed vLLM's own queues and admission code (the `vllm` variant's child runs
    in make upstream's cache venv, with VLLM_RELEASE first on the path)."""

    def __init__(self) -> None:
        import vllm
        from vllm.v1.core.sched import request_queue
        from vllm.v1.engine import admission_control
        from vllm.v1.engine.async_llm import AsyncLLM

        if vllm.__version__ != VLLM_RELEASE:
            raise RuntimeError(f"make bench: imported vllm {vllm.__version__}, not {VLLM_RELEASE}")
        self.queues = request_queue
        self.admission = admission_control
        self.engine_class = AsyncLLM


def _queue_factory(variant: str, policy: str) -> Callable[[list[Any]], Any]:
    if variant.startswith("queueref"):
        from queueref import FCFSRequestQueue, PriorityRequestQueue

        cls: Any = FCFSRequestQueue if policy == "fcfs" else PriorityRequestQueue
        return lambda requests: cls(requests)
    queues = _Vllm().queues

    def build(requests: list[Any]) -> Any:
        queue = queues.FCFSRequestQueue() if policy == "fcfs" else queues.PriorityRequestQueue()
        for request in requests:
            queue.add_request(request)
        return queue

    return build


def bench_queue(variant: str, policy: str, size: int, request_kind: str) -> dict[str, float]:
    """Per-operation µs of one queue at a constant size."""
    requests = make_requests(request_kind, size)
    middle = requests[size // 2]
    out: dict[str, float] = {}
    if variant == "bare":
        return _bench_bare(policy, requests, middle)
    if variant == "floor":
        return _bench_floor(policy, requests, request_kind)
    queue = _queue_factory(variant, policy)(requests)
    build_other = _queue_factory(variant, policy)

    def add_pop() -> None:
        queue.add_request(queue.pop_request())

    def remove_add() -> None:
        queue.remove_request(middle)
        queue.add_request(middle)

    out["add+pop"] = per_call_us(add_pop) / 2
    out["peek"] = per_call_us(queue.peek_request)
    out["remove+add"] = per_call_us(remove_add)
    tenth = requests[::10]

    def remove_many() -> float:
        started = time.process_time()
        queue.remove_requests(tenth)
        spent = time.process_time() - started
        for request in tenth:
            queue.add_request(request)
        return spent

    out["remove_requests 10%"] = timed_us(remove_many)
    # Urgent (priority -1), so in both policies they land in front and pops undo the move.
    batch = make_requests(request_kind, PREPEND_BATCH, prefix="skipped")
    for request in batch:
        request.priority = -1

    def prepend_many() -> float:
        other = build_other(batch)
        started = time.process_time()
        queue.prepend_requests(other)
        spent = time.process_time() - started
        for _ in batch:
            queue.pop_request()
        return spent

    out[f"prepend_requests {PREPEND_BATCH}"] = timed_us(prepend_many)

    def iterate() -> None:
        for _ in queue:
            pass

    out["iteration"] = per_call_us(iterate)
    return out


def _bench_bare(policy: str, requests: list[Any], middle: Any) -> dict[str, float]:
    import heapq
    from collections import deque

    out: dict[str, float] = {}
    if policy == "fcfs":
        items = deque(requests)
        out["add+pop"] = per_call_us(lambda: items.append(items.popleft())) / 2
        out["peek"] = per_call_us(lambda: items[0])

        def d_iterate() -> None:
            for _ in items:
                pass

        out["iteration"] = per_call_us(d_iterate)
        return out
    heap = list(requests)
    heapq.heapify(heap)
    out["add+pop"] = per_call_us(lambda: heapq.heappush(heap, heapq.heappop(heap))) / 2
    out["peek"] = per_call_us(lambda: heap[0])
    return out


def _bench_floor(policy: str, requests: list[Any], request_kind: str) -> dict[str, float]:
    """The FCFS floor with queueref's checks: what add+pop and `prepend_requests` cost at
    the least once they test every request as queueref's queue does under `-O`."""
    from collections import deque

    if policy != "fcfs":
        return {}
    items = deque(requests)
    index = {r.request_id: r for r in requests}

    def add_pop() -> None:
        request = items.popleft()
        del index[request.request_id]
        request_id = request.request_id
        arrival_time = request.arrival_time
        if not (
            type(request_id) is str
            and type(request.priority) is int
            and type(arrival_time) is float
            and arrival_time == arrival_time
            and request_id not in index
        ):
            raise ValueError("not a new request")
        items.append(request)
        index[request_id] = request

    out = {"add+pop": per_call_us(add_pop) / 2}
    batch = make_requests(request_kind, PREPEND_BATCH, prefix="skipped")

    def prepend_many() -> float:
        other = deque(batch)  # the other queue
        started = time.process_time()
        incoming = list(other)
        by_id = {}
        for request in incoming:
            request_id = request.request_id
            arrival_time = request.arrival_time
            if not (
                type(request_id) is str
                and type(request.priority) is int
                and type(arrival_time) is float
                and arrival_time == arrival_time
            ):
                raise TypeError("not a request")
            by_id[request_id] = request
        if len(by_id) != len(incoming) or not index.keys().isdisjoint(by_id):
            raise ValueError("a request id is taken")
        items.extendleft(incoming)
        index.update(by_id)
        spent = time.process_time() - started
        for _ in batch:
            del index[items.popleft().request_id]
        return spent

    out[f"prepend_requests {PREPEND_BATCH}"] = timed_us(prepend_many)
    return out


#: The token-limit variants of `check_admission` each variant measures: "" is the request
#: limit alone; queueref's two token scopes (ADM-TOK-6); the vLLM release's own token rule.
TOKEN_CASES = {
    "queueref": ("", "shared", "local"),
    "vllm": ("", "limit"),
    "bare": ("",),
}


def bench_admission(variant: str) -> dict[tuple[int, str], float]:
    """µs per `check_admission(1)` over N shared slots, every check admitting: the request
    limit alone, and with a token limit as well (never reached either)."""
    import multiprocessing

    cap = 1 << 40  # never reached: every check admits, nothing is written
    out: dict[tuple[int, str], float] = {}
    step = 8  # vLLM 0.30.0 to 0.33.0 and queueref: 8 counters per slot (one cache line)
    for servers in SERVER_COUNTS:
        counters = multiprocessing.get_context("spawn").RawArray("q", servers * step)
        for index in range(servers):
            counters[index * step] = 1
            counters[index * step + 1] = 1  # queued prompt tokens (queueref's counter 1)
        for tokens in TOKEN_CASES[variant.split("-")[0]]:
            check: Callable[[], object]
            if variant.startswith("queueref"):
                from queueref import AdmissionController, RequestTracker, SharedAdmissionStats

                stats = SharedAdmissionStats(counters, servers, 0)
                controller = AdmissionController(
                    cap,
                    max_num_queued_tokens=cap if tokens else None,
                    tracker=RequestTracker(stats),
                    shared_stats=stats,
                    token_scope=cast(Any, tokens) if tokens else None,
                )
                check = functools.partial(controller.check_admission, 1, 1)
            elif variant == "vllm":
                vllm = _Vllm()
                engine = _StandInEngine(
                    vllm.engine_class,
                    vllm.admission.SharedAdmissionStats(
                        {"mp_admission_counters": counters}, servers, 0
                    ),
                    cap,
                    cap if tokens else None,
                )
                # vLLM's own method, unbound, called on the stand-in engine.
                check = functools.partial(vllm.engine_class.check_admission, engine, 1)
            else:
                view = memoryview(counters).cast("B").cast("q")[::step]  # precomputed, strided

                check = functools.partial(_floor_check, view, cap)

            out[servers, tokens] = per_call_us(check)
    return out


class _StandInEngine:
    """What the release's `AsyncLLM.check_admission` reads of its engine: the scheduler
    config (`max_num_queued_reqs`, `max_num_queued_tokens`), the admission stats, the
    local counts, and (0.32.0 and later, on a rejection: never here) the metric recorder."""

    def __init__(self, engine_class: Any, stats: Any, cap: int, token_cap: int | None) -> None:
        self._engine_class = engine_class
        self.admission_stats = stats
        self.logger_manager = None
        self.scheduler_config = type(
            "SchedulerConfig", (), {"max_num_queued_reqs": cap, "max_num_queued_tokens": token_cap}
        )()

    def get_num_unfinished_requests(self) -> int:  # not reached: the stats are shared
        return 0

    def get_num_queued_tokens(self) -> int:
        # The release sums the prompt lengths of this process's requests in prefill
        # (OutputProcessor.get_num_queued_tokens); the stand-in has none, so its sum is 0.
        return 0

    def _record_admission_rejection(self, reason: str) -> None:
        self._engine_class._record_admission_rejection(self, reason)


def child(variant: str) -> None:
    """One round of one variant: print its cells as JSON."""
    cells: list[dict[str, Any]] = []
    for policy in ("fcfs", "priority"):
        kinds = ["vllm-shaped"] + (["queueref"] if policy == "priority" else [])
        for kind in kinds:
            for size in SIZES:
                for op, us in bench_queue(variant, policy, size, kind).items():
                    cells.append(
                        {"bench": "queue", "queue": policy, "request": kind, "size": size}
                        | {"op": op, "us": us}
                    )
    admission = bench_admission(variant) if variant in ADMISSION_VARIANTS else {}
    for (servers, tokens), us in admission.items():
        cells.append({"bench": "admission", "servers": servers, "tokens": tokens, "us": us})
    print(json.dumps(cells))


# --------------------------------------------------------------------------------------
# The parent: rounds, medians, ratios


def run_variant(variant: str) -> list[dict[str, Any]]:
    python = sys.executable
    if variant == "vllm":  # make upstream's cache venv, the release first on the path
        cache = upstream.cache_dir()
        python = str(upstream.venv_python(cache))
        env = upstream.release_env(cache, VLLM_RELEASE)
    else:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "reference"), env.get("PYTHONPATH", "")])
    env["QUEUEREF_DEEP_CHECKS"] = "0"
    optimize = variant != "queueref-on"
    argv = [python, *(["-O"] if optimize else []), __file__, "--child", variant]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, check=True)
    return list(json.loads(done.stdout.splitlines()[-1]))


def _key(cell: dict[str, Any]) -> tuple[Any, ...]:
    if cell["bench"] == "queue":
        return ("queue", cell["queue"], cell["request"], cell["size"], cell["op"])
    return ("admission", cell["servers"], cell["tokens"])


def spread(values: list[float]) -> dict[str, float]:
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
    }


def collect(rounds: int) -> dict[tuple[Any, ...], dict[str, list[float]]]:
    """key -> variant -> one value per round."""
    table: dict[tuple[Any, ...], dict[str, list[float]]] = {}
    for number in range(rounds):
        for variant in VARIANTS:
            print(f"round {number + 1}/{rounds}: {variant}", file=sys.stderr)
            for cell in run_variant(variant):
                table.setdefault(_key(cell), {}).setdefault(variant, []).append(cell["us"])
    return table


def _ratio(values: dict[str, list[float]], a: str, b: str) -> dict[str, float] | None:
    if a not in values or b not in values:
        return None
    return spread([x / y for x, y in zip(values[a], values[b], strict=True)])


def _fmt_us(value: float) -> str:
    if value >= 1000:
        return f"{value / 1000:.2f} ms"
    return f"{value:.3f} µs" if value < 1 else f"{value:.2f} µs"


def _fmt_ratio(r: dict[str, float] | None) -> str:
    if r is None:
        return ""
    return f"{r['median']:.2f}x ({r['min']:.2f}-{r['max']:.2f})"


def report(table: dict[tuple[Any, ...], dict[str, list[float]]]) -> tuple[str, list[Any]]:
    rows: list[dict[str, Any]] = []
    queue_lines = [
        f"| queue | requests | n | op | queueref off | queueref on | vLLM {VLLM_RELEASE} | bare "
        "| floor with checks | off / vLLM | on / vLLM | off / floor with checks |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    admission_lines = [
        f"| N | queueref off | queueref on | vLLM {VLLM_RELEASE} | floor (memoryview sum) "
        "| off / vLLM | on / vLLM | vLLM / floor |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for key, values in table.items():
        medians = {v: statistics.median(xs) for v, xs in values.items()}
        row: dict[str, Any] = {
            "key": list(key),
            "us": {v: spread(xs) for v, xs in values.items()},
            "off_over_vllm": _ratio(values, "queueref-off", "vllm"),
            "on_over_vllm": _ratio(values, "queueref-on", "vllm"),
        }
        if key[0] == "queue":
            _, policy, kind, size, op = key
            row["off_over_floor"] = _ratio(values, "queueref-off", "floor")
            cells = [_fmt_us(medians[v]) if v in medians else "" for v in VARIANTS]
            queue_lines.append(
                f"| {policy} | {kind} | {size:,} | {op} | "
                + " | ".join(cells)
                + f" | {_fmt_ratio(row['off_over_vllm'])} | {_fmt_ratio(row['on_over_vllm'])}"
                + f" | {_fmt_ratio(row['off_over_floor'])} |"
            )
        elif key[2]:
            rows.append(row)
            continue  # the token rows: their own table, below
        else:
            row["vllm_over_floor"] = _ratio(values, "vllm", "bare")
            cells = [_fmt_us(medians[v]) if v in medians else "" for v in ADMISSION_VARIANTS]
            admission_lines.append(
                f"| {key[1]} | "
                + " | ".join(cells)
                + f" | {_fmt_ratio(row['off_over_vllm'])} | {_fmt_ratio(row['on_over_vllm'])}"
                + f" | {_fmt_ratio(row['vllm_over_floor'])} |"
            )
        rows.append(row)
    text = "\n".join(
        ["### Queue operations (µs per operation; add+pop is per operation of the pair)", ""]
        + queue_lines
        + ["", "### check_admission(1) over N shared slots, every check admitting", ""]
        + admission_lines
        + ["", "### The same with a token limit as well (never reached)", ""]
        + _token_lines(table, rows)
    )
    return text, rows


def _token_lines(
    table: dict[tuple[Any, ...], dict[str, list[float]]], rows: list[dict[str, Any]]
) -> list[str]:
    """queueref's shared and local token scopes, contracts off and on, beside the vLLM
    release's token rule (its own process's queued tokens); ratios within each round."""
    lines = [
        f"| N | shared off | shared on | local off | local on | vLLM {VLLM_RELEASE} "
        "| shared off / vLLM | shared on / vLLM | local off / vLLM | local on / vLLM |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for servers in SERVER_COUNTS:
        vllm = table.get(("admission", servers, "limit"), {}).get("vllm")
        cells, ratios = [], []
        for scope in ("shared", "local"):
            values = table.get(("admission", servers, scope), {})
            for variant in ("queueref-off", "queueref-on"):
                mine = values.get(variant)
                cells.append(_fmt_us(statistics.median(mine)) if mine else "")
                if mine and vllm:
                    ratio = spread([x / y for x, y in zip(mine, vllm, strict=True)])
                    rows.append(
                        {"key": ["admission-tokens", servers, scope, variant], "over_vllm": ratio}
                    )
                    ratios.append(_fmt_ratio(ratio))
                else:
                    ratios.append("")
        lines.append(
            f"| {servers} | "
            + " | ".join(cells)
            + f" | {_fmt_us(statistics.median(vllm)) if vllm else ''} | "
            + " | ".join(ratios)
            + " |"
        )
    return lines


def bench_explorer() -> tuple[str, list[dict[str, Any]]]:
    """The explorer: the compact encoding beside the reference encoding, and the big rows,
    each compact row beside Spin on the Promela text of the same encoding (OB-TABLE-3)."""
    sys.path.insert(0, str(ROOT / "reference"))
    from queueref.verify import search as explorer
    from queueref.verify.promela import spin_worst_total

    rows: list[dict[str, Any]] = []
    lines = [
        "| instance (N, M, W) | engine | encoding | states | worst total | CPU seconds "
        "| python / spin |",
        "|---|---|---|---:|---:|---:|---:|",
    ]
    instances = [((3, 3, 2), ("reference", "compact")), ((4, 4, 2), ("compact",))]
    instances.append(((5, 2, 1), ("compact",)))
    for (servers, cap, weight), encodings in instances:
        python_cpu = 0.0
        for encoding in encodings:
            began = time.process_time()
            found = explorer.explore("check-then-write", servers, cap, weight, encoding=encoding)
            python_cpu = time.process_time() - began
            rows.append(
                {
                    "bench": "explorer",
                    "engine": "python",
                    "instance": [servers, cap, weight],
                    "encoding": encoding,
                    "states": found.states,
                    "worst_total": found.worst_total,
                    "cpu_seconds": round(python_cpu, 2),
                }
            )
            lines.append(
                f"| ({servers}, {cap}, {weight}) | python | {encoding} | {found.states:,} | "
                f"{found.worst_total} | {python_cpu:.1f} | |"
            )
        # Spin on the compact encoding: pan's CPU for the whole space (the run at the
        # worst total), then the run one below, which stops at its first violation.
        spin = spin_worst_total(servers, cap, weight)
        full, below = spin.runs[-2], spin.runs[-1]
        agree = (spin.states, spin.worst_total) == (found.states, found.worst_total)
        rows.append(
            {
                "bench": "explorer",
                "engine": "spin",
                "instance": [servers, cap, weight],
                "encoding": "compact",
                "states": spin.states,
                "worst_total": spin.worst_total,
                "cpu_seconds": round(full.result.search_seconds, 2),
                "violation_cpu_seconds": round(below.result.search_seconds, 2),
                "compile_seconds": round(full.result.compile_seconds, 2),
                "agrees_with_python": agree,
            }
        )
        lines.append(
            f"| ({servers}, {cap}, {weight}) | spin | compact | {spin.states:,} | "
            f"{spin.worst_total} | {full.result.search_seconds:.1f} | "
            f"{python_cpu / max(full.result.search_seconds, 1e-9):.2f}x |"
            + ("" if agree else " DISAGREES WITH PYTHON")
        )
    text = "\n".join(["### Explorer, check-then-write (CPU seconds, one core)", "", *lines])
    return text, rows


def main() -> int:
    failed = ensure_vllm()
    if failed is not None:
        print(failed, file=sys.stderr)
        return 1
    table = collect(ROUNDS)
    text, rows = report(table)
    print(text)
    results: dict[str, Any] = {"rounds": ROUNDS, "vllm_version": VLLM_RELEASE, "cells": rows}
    if os.environ.get("BENCH_EXPLORER", "1") != "0":
        explorer_text, results["explorer"] = bench_explorer()
        print("\n" + explorer_text)
    try:
        sys.path.insert(0, str(ROOT / "tools"))
        import bench_admission  # the protocols under load, beside this file

        results["admission_protocols"] = []
        bench_admission.run(results["admission_protocols"])
    except ImportError:
        print("(admission protocol benchmark not available)")
    import bench_store  # the multi-node store's protocols against a real Redis, beside this file

    bench_store.run(results)
    import bench_oracle  # the oracle's knobs and what each costs (ORC-SIZE-4), beside this file

    bench_oracle.run(results)
    import bench_models  # the token, joint and lease explorers, compact beside plain

    bench_models.run(results)
    BUILD.mkdir(exist_ok=True)
    (BUILD / "bench.json").write_text(json.dumps(results, indent=1))
    print("\nsaved build/bench.json")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        child(sys.argv[2])
    else:
        sys.exit(main())
