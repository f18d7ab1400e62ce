"""`queueref check-queue MODULE:QUEUE`: check a request queue from outside pytest.

For CI scripts and users without a pytest suite (ORC-CLI-1): compares the
queue with queueref's reference for `--policy` (`check_request_queue`) and,
with `--laws`, checks the laws every `RequestQueue` obeys
(`check_queue_laws`). Exit status: 0 when the queue conforms, 1 with the
failing programs (each with its clause), 2 for a usage error -- one line on
stderr, no traceback (ORC-CLI-2). The current directory is put on the import
path first, as `python -m` does, so `mypkg.queues:MyQueue` imports from where
the command runs.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Callable
from typing import Any

from queueref.cli.args import exit_codes
from queueref.oracle.errors import ConformanceError, HypothesisMissing

HELP = "check a RequestQueue class against queueref's reference queue or the queue laws"

EXIT_CODES = exit_codes(
    "0  the queue conforms",
    "1  the queue does not conform: the failing programs, each with its clause",
    "2  bad usage, or the queue or factory cannot be imported (one line on stderr)",
)


class UsageError(Exception):
    """A bad argument: printed as one line, exit status 2 (ORC-CLI-2)."""


def _at_least_one(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _batch(text: str) -> tuple[int, int]:
    low, _, high = text.partition("-")
    try:
        return (int(low), int(high or low))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not N or LOW-HIGH: {text!r}") from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # The defaults are the checkers' (conformance.py), written out: importing it needs Hypothesis.
    parser.add_argument(
        "target",
        metavar="MODULE:QUEUE",
        help="the queue class (or factory), e.g. mypkg.queues:MyQueue",
    )
    parser.add_argument(
        "--policy",
        choices=("fcfs", "priority"),
        help="compare with queueref's reference queue for this policy",
    )
    parser.add_argument(
        "--laws", action="store_true", help="check the laws every RequestQueue obeys"
    )
    parser.add_argument(
        "--request-factory",
        metavar="MODULE:FACTORY",
        help="builds the requests: FACTORY(request_id, priority, arrival_time)",
    )
    parser.add_argument("--max-examples", type=_at_least_one, default=200, metavar="N")
    parser.add_argument("--max-calls", type=_at_least_one, default=20, metavar="N")
    parser.add_argument(
        "--initial-requests",
        type=_batch,
        default=(0, 0),
        metavar="LOW-HIGH",
        help="start every program by adding LOW to HIGH requests (e.g. 50-500)",
    )
    parser.add_argument("--max-failures", type=_at_least_one, default=5, metavar="N")
    parser.add_argument(
        "--ties",
        choices=("exact", "any"),
        default="exact",
        help="any: accept any order among requests of equal (priority, arrival_time)",
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="also make the calls that break a precondition and require them rejected: "
        "a request queued twice, a taken id, a queue prepended to itself or sharing a "
        "request (ValueError), and an object that is no request (TypeError)",
    )
    parser.add_argument("--json", action="store_true", help="print the verdict as JSON")


def load(target: str, what: str) -> Callable[..., Any]:
    """ORC-CLI-2: `module:attribute` -> the object, or UsageError saying what is wrong."""
    module_name, colon, attribute = target.partition(":")
    if not colon or not module_name or not attribute:
        raise UsageError(f"{what} must be MODULE:NAME (e.g. mypkg.queues:MyQueue), got {target!r}")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        found: Any = importlib.import_module(module_name)
    except Exception as error:  # the user's module may raise anything on import
        raise UsageError(f"cannot import {module_name}: {type(error).__name__}: {error}") from None
    for part in attribute.split("."):
        if not hasattr(found, part):
            raise UsageError(f"{module_name} has no attribute {attribute!r}")
        found = getattr(found, part)
    if not callable(found):
        raise UsageError(f"{target} is not callable (a queue class or factory is needed)")
    return found  # type: ignore[no-any-return]


def _report(check: str, policy: str | None, error: ConformanceError | None) -> dict[str, Any]:
    reports = error.reports if error is not None else []
    return {
        "check": check,
        "policy": policy,
        "ok": error is None,
        "failures": [
            {
                "operation": report.operation,
                "clause": report.clause,
                "summary": report.summary,
                "program": report.program,
            }
            for report in reports
        ],
        "message": str(error) if error is not None else "",
    }


def run(args: argparse.Namespace) -> int:
    """ORC-CLI-1, ORC-CLI-2: check, print the verdict, exit 0 / 1, or 2 with one line."""
    try:
        return _run(args)
    except (UsageError, HypothesisMissing, ValueError) as error:
        print(f"queueref check-queue: {error}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    if args.policy is None and not args.laws:
        raise UsageError("say what to check: --policy fcfs|priority, --laws, or both")
    factory = load(args.target, "the queue")
    request_factory = (
        load(args.request_factory, "--request-factory") if args.request_factory else None
    )
    from queueref.oracle import import_checkers, version  # ORC-INST-1: Hypothesis only now

    checkers = import_checkers()
    options: dict[str, Any] = {
        "request_factory": request_factory,
        "max_examples": args.max_examples,
        "max_calls": args.max_calls,
        "initial_requests": args.initial_requests,
        "max_failures": args.max_failures,
        "strict": args.strict,
    }
    results: list[dict[str, Any]] = []
    if args.policy is not None:
        results.append(
            _checked(
                "conformance",
                args.policy,
                lambda: checkers.check_request_queue(
                    factory, args.policy, ties=args.ties, **options
                ),
            )
        )
    if args.laws:
        results.append(
            _checked("laws", None, lambda: checkers.check_queue_laws(factory, **options))
        )
    ok = all(result["ok"] for result in results)
    if args.json:
        document = {
            "target": args.target,
            "ok": ok,
            "hypothesis_version": version(),
            "checks": results,
        }
        print(json.dumps(document, indent=2))
    else:
        for result in results:
            if result["ok"]:
                what = (
                    f"behaves like queueref's {result['policy']!r} reference queue"
                    if result["check"] == "conformance"
                    else "obeys the laws of RequestQueue"
                )
                print(f"{args.target} {what} (Hypothesis {version()})")
            else:
                print(result["message"])
    return 0 if ok else 1


def _checked(check: str, policy: str | None, call: Callable[[], None]) -> dict[str, Any]:
    try:
        call()
    except ConformanceError as error:
        return _report(check, policy, error)
    return _report(check, policy, None)
