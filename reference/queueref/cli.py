"""The `queueref` command: a thin dispatcher over `queueref.commands.*`."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# name -> module under queueref.commands; each module has HELP, add_arguments, run.
COMMANDS: dict[str, str] = {
    "bound-table": "bound_table",
    "check-trace": "check_trace",
    "check-queue": "check_queue",
    "vectors": "vectors",
    "serve": "serve",
    "load": "load",
    "experiment": "experiment",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="queueref",
        description="Reference vLLM request queues and cross-process admission control.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, module_name in COMMANDS.items():
        module = importlib.import_module(f"queueref.commands.{module_name}")
        command = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(command)
        command.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    code: int = args._run(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
