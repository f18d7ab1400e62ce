"""Test vectors: the queue and admission semantics as JSON cases, by domain.

One module per domain: `queue` (request queues), `admission` (counter
layout and checks), `tracker` (one server's bookkeeping), `bound` (the
schedule that reaches each protocol's bound), `events` (event lines and
sweeps); `common` holds the case shape. This package writes and reads them.

`write_vectors(out)` writes a tree of JSON cases (the format is in
`specs/oracle.md`, for implementers in other languages);
`queueref.oracle.replay.replay_case(case)` runs one case against queueref's
reference and returns the mismatches. Like
the consensus-spec vectors, a case is its inputs, the operations and the
expected outcome of each; its name encodes its inputs; random cases use fixed
seeds; sizes run through 0, 1, 2, 3 and limits through the limit minus one,
the limit and the limit plus one.

The expected values are computed here, independently of the reference: queue
cases by `queueref.queues.model.ListQueueModel` (a plain list), and
admission cases by the few lines of arithmetic of `specs/admission.md`
written out below (the `expect_*` functions never call `queueref.admission.controller`
or `queueref.admission.tracker`). The replay then runs the reference, so a vector that
replays clean is an agreement between two independent statements of the
semantics. Every case lists the requirement IDs it covers.

Models no vLLM file.
"""

from __future__ import annotations

import json
from pathlib import Path

from queueref.oracle.vectors.admission import SLOT, check_cases, expect_check, layout_cases
from queueref.oracle.vectors.bound import bound_cases
from queueref.oracle.vectors.common import ERROR_MEANINGS, FORMAT_VERSION, Case, Expect, make_case
from queueref.oracle.vectors.events import event_cases
from queueref.oracle.vectors.queue import request_queue_cases
from queueref.oracle.vectors.tracker import tracker_cases

__all__ = [
    "ERROR_MEANINGS",
    "FORMAT_VERSION",
    "SLOT",
    "Case",
    "Expect",
    "all_cases",
    "bound_cases",
    "check_cases",
    "event_cases",
    "expect_check",
    "layout_cases",
    "make_case",
    "read_vectors",
    "request_queue_cases",
    "tracker_cases",
    "write_vectors",
]


def all_cases() -> list[Case]:
    """Every case, in a fixed order."""
    return [
        *request_queue_cases(),
        *layout_cases(),
        *check_cases(),
        *tracker_cases(),
        *bound_cases(),
        *event_cases(),
    ]


def write_vectors(out: str | Path) -> list[Path]:
    """Write every case to `out/<name>.json` and an `index.json`; return the paths.

    The output is deterministic: the same queueref writes the same bytes.
    """
    from queueref import __version__

    root = Path(out)
    written: list[Path] = []
    index = []
    for case in all_cases():
        path = root / f"{case['name']}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(case, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        written.append(path)
        index.append(
            {"name": case["name"], "kind": case["kind"], "requirements": case["requirements"]}
        )
    root.mkdir(parents=True, exist_ok=True)
    (root / "index.json").write_text(
        json.dumps(
            {"format": FORMAT_VERSION, "queueref": __version__, "cases": index},
            indent=1,
            sort_keys=True,
        )
        + "\n",
        encoding="utf-8",
    )
    return written


def read_vectors(root: str | Path) -> list[Case]:
    """The cases listed in `root/index.json`, in its order."""
    base = Path(root)
    index = json.loads((base / "index.json").read_text(encoding="utf-8"))
    return [
        json.loads((base / f"{entry['name']}.json").read_text(encoding="utf-8"))
        for entry in index["cases"]
    ]
