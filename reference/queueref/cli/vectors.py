"""`queueref vectors --out DIR`: write the test vectors, then replay them against the reference.

The format of the tree is in `specs/oracle.md`. After writing,
the cases are read back from disk and replayed against queueref's
reference; the exit status is 0 when every case agrees, 1 when one does not,
2 when the tree cannot be written (one line on stderr, no traceback).
"""

from __future__ import annotations

import argparse
import sys

from queueref.oracle.replay import replay_case
from queueref.oracle.vectors import read_vectors, write_vectors

HELP = "write the request-queue and admission test vectors (JSON) and replay them"

EXIT_CODES = """exit status:
  0  every case written and replayed in agreement
  1  a case disagrees with the reference
  2  bad usage, or the tree cannot be written (one line on stderr)"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, metavar="DIR", help="the directory to write")
    parser.add_argument(
        "--no-replay",
        action="store_true",
        help="only write the vectors; do not replay them against the reference",
    )


def run(args: argparse.Namespace) -> int:
    """Write, read back, replay; report in a few lines."""
    if not args.out.strip():
        # E2E-CLI-2: an empty path would write into the current folder.
        print("queueref vectors: --out must name a directory, got ''", file=sys.stderr)
        return 2
    try:
        written = write_vectors(args.out)
    except OSError as error:
        print(f"queueref vectors: cannot write {args.out}: {error.strerror}", file=sys.stderr)
        return 2
    cases = read_vectors(args.out)
    requirements = sorted({rid for case in cases for rid in case["requirements"]})
    print(
        f"wrote {len(written)} cases to {args.out} (index.json lists them), "
        f"covering {len(requirements)} requirements"
    )
    if args.no_replay:
        return 0
    failed = 0
    for case in cases:
        problems = replay_case(case)
        if problems:
            failed += 1
            print(f"MISMATCH {case['name']}: {problems[0]}")
    if failed:
        print(f"{failed} of {len(cases)} cases disagree with the reference")
        return 1
    print(f"replayed {len(cases)} cases against the reference: all agree")
    return 0
