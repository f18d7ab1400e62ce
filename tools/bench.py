"""`make bench`: per-operation cost of the queues (and of admission), in one run.

Queues: both reference queues with contracts on (the default: cheap
contracts only) and off (`python -O`, which disables icontract), beside the
bare `collections.deque` / `heapq` structures on the same request objects, at
100, 10 000 and 100 000 queued requests. `remove` is compared with vLLM's
upstream removal (`deque.remove`; `list.remove` + `heapify`).

A benchmark, not a test: it measures and reports, it asserts nothing.
Results: `build/bench.json` and a Markdown table on stdout.
"""

from __future__ import annotations

import heapq
import json
import os
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SIZES = (100, 10_000, 100_000)
REPEAT = 2_000  # operations timed per cell


def per_op(fn: Callable[[], None], count: int) -> float:
    """Microseconds per call, best of three rounds."""
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        for _ in range(count):
            fn()
        best = min(best, (time.perf_counter() - started) / count)
    return best * 1e6


def bench_queue(kind: str, size: int) -> dict[str, float]:
    """add+pop cycle, peek, and remove+re-add of a request in the middle."""
    from queueref import FCFSRequestQueue, PriorityRequestQueue, Request

    requests = [Request(f"r{i}", priority=i % 10, arrival_time=float(i)) for i in range(size)]
    middle = requests[size // 2]
    out: dict[str, float] = {}
    if kind in ("fcfs", "priority"):
        queue: Any = (
            FCFSRequestQueue(requests) if kind == "fcfs" else PriorityRequestQueue(requests)
        )

        def add_pop() -> None:
            request = queue.pop_request()
            queue.add_request(request)

        def remove() -> None:
            queue.remove_request(middle)
            queue.add_request(middle)

        out["add+pop"] = per_op(add_pop, REPEAT)
        out["peek"] = per_op(queue.peek_request, REPEAT)
        out["remove+add"] = per_op(remove, REPEAT if size <= 10_000 else 200)
        return out
    if kind == "deque":
        items = deque(requests)

        def d_add_pop() -> None:
            items.append(items.popleft())

        def d_peek() -> None:
            items[0]  # noqa: B018

        def d_remove() -> None:
            items.remove(middle)
            items.append(middle)

        out["add+pop"] = per_op(d_add_pop, REPEAT)
        out["peek"] = per_op(d_peek, REPEAT)
        out["remove+add"] = per_op(d_remove, REPEAT if size <= 10_000 else 200)
        return out
    heap = list(requests)
    heapq.heapify(heap)

    def h_add_pop() -> None:
        heapq.heappush(heap, heapq.heappop(heap))

    def h_peek() -> None:
        heap[0]  # noqa: B018

    def h_remove() -> None:  # vLLM's PriorityRequestQueue.remove_request
        heap.remove(middle)
        heapq.heapify(heap)
        heapq.heappush(heap, middle)

    out["add+pop"] = per_op(h_add_pop, REPEAT)
    out["peek"] = per_op(h_peek, REPEAT)
    out["remove+add"] = per_op(h_remove, REPEAT if size <= 10_000 else 50)
    return out


def child() -> None:
    """Measure one configuration in this process; print JSON rows."""
    rows = []
    for kind in sys.argv[2].split(","):
        for size in SIZES:
            rows.append({"kind": kind, "size": size, "us": bench_queue(kind, size)})
    print(json.dumps(rows))


def measure(kinds: str, optimize: bool) -> list[dict[str, Any]]:
    env = dict(os.environ, QUEUEREF_DEEP_CHECKS="0")
    argv = [sys.executable, *(["-O"] if optimize else []), __file__, "--child", kinds]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, check=True)
    return list(json.loads(done.stdout))


def main() -> int:
    results: dict[str, Any] = {"queues": []}
    on = measure("fcfs,priority", optimize=False)
    off = measure("fcfs,priority", optimize=True)
    bare = measure("deque,heapq", optimize=True)
    bare_of = {"fcfs": "deque", "priority": "heapq"}
    lines = [
        "| queue | n | op | contracts on (µs) | contracts off (µs) | bare (µs) | off / bare |",
        "|---|---:|---|---:|---:|---:|---:|",
    ]
    for row_on, row_off in zip(on, off, strict=True):
        row_bare = next(
            r for r in bare if r["kind"] == bare_of[row_on["kind"]] and r["size"] == row_on["size"]
        )
        for op in row_on["us"]:
            cell = {
                "queue": row_on["kind"],
                "size": row_on["size"],
                "op": op,
                "contracts_on_us": round(row_on["us"][op], 3),
                "contracts_off_us": round(row_off["us"][op], 3),
                "bare_us": round(row_bare["us"][op], 3),
            }
            results["queues"].append(cell)
            ratio = cell["contracts_off_us"] / max(cell["bare_us"], 1e-9)
            lines.append(
                f"| {cell['queue']} | {cell['size']:,} | {op} | {cell['contracts_on_us']:.2f} |"
                f" {cell['contracts_off_us']:.2f} | {cell['bare_us']:.2f} | {ratio:.1f}x |"
            )
    print("\n".join(lines))
    try:
        sys.path.insert(0, str(ROOT / "tools"))
        import bench_admission  # written beside this file

        results["admission"] = []
        bench_admission.run(results["admission"])
    except ImportError:
        print("(admission benchmark not available)")
    (ROOT / "build").mkdir(exist_ok=True)
    (ROOT / "build" / "bench.json").write_text(json.dumps(results, indent=1))
    print("\nsaved build/bench.json")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child()
    else:
        sys.exit(main())
