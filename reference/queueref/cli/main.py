"""The `queueref` command: a thin dispatcher over `queueref.cli.*`.

Conventions shared by every command (E2E-CLI-2): a usage error is one line
on stderr and exit status 2; `--version` prints the version; output cut
short by a closed pipe (`queueref ... --json | head`) ends quietly.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import NoReturn

# name -> module under queueref.cli; each module has HELP, add_arguments, run
# (and optionally EXIT_CODES, shown at the end of its --help).
COMMANDS: dict[str, str] = {
    "bound": "bound",
    "bound-table": "bound_table",
    "check-trace": "check_trace",
    "check-queue": "check_queue",
    "vectors": "vectors",
    "serve": "serve",
    "load": "load",
    "experiment": "experiment",
}

#: The exit status of a usage error (E2E-CLI-2), as argparse and Unix tools use it.
USAGE_ERROR = 2


class OneLineParser(argparse.ArgumentParser):
    """An argparse parser whose usage errors are one line: `queueref CMD: message` (E2E-CLI-2)."""

    def error(self, message: str) -> NoReturn:
        name = self.prog.split()[-1] if " " in self.prog else self.prog
        prefix = "queueref" if name == "queueref" else f"queueref {name}"
        self.exit(USAGE_ERROR, f"{prefix}: {' '.join(message.split())} (see --help)\n")


def package_version() -> str:
    """The installed version of queueref."""
    try:
        return version("queueref")
    except PackageNotFoundError:  # running from a source tree that is not installed
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="queueref",
        description="Reference vLLM request queues and cross-process admission control.",
    )
    parser.add_argument("--version", action="version", version=f"queueref {package_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, module_name in COMMANDS.items():
        module = importlib.import_module(f"queueref.cli.{module_name}")
        command = sub.add_parser(
            name,
            help=module.HELP,
            description=module.HELP,
            epilog=getattr(module, "EXIT_CODES", None),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.add_arguments(command)
        command.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; its exit status (2 for a usage error, 0 after --help or --version)."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as stopped:
        return stopped.code if isinstance(stopped.code, int) else USAGE_ERROR
    try:
        code: int = args._run(args)
        sys.stdout.flush()
    except BrokenPipeError:
        # E2E-CLI-2: the reader went away (`| head`): no traceback, and no second
        # error when Python flushes stdout at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 141  # 128 + SIGPIPE, what a shell reports for a killed writer
    return code


if __name__ == "__main__":
    sys.exit(main())
