"""The argument conventions every `queueref` command shares (E2E-CLI-2).

Durations accept `2s`, `500ms`, `1m` or plain seconds; numbers must be
finite (`nan`, `inf` are refused); a protocol is typed by its name
(`queueref.admission.protocol.Protocol`) and nothing else; a bad value is a usage error, which
`queueref.cli.main` prints as one line and exit status 2. `EXIT_CODES` texts are
shown at the end of each command's `--help`.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Callable, Sequence

from queueref.admission.protocol import Protocol, parse_protocol

_DURATION = re.compile(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(ms|s|m)?\s*")


def parse_duration(text: str) -> float:
    """Seconds of `10s`, `500ms`, `1m` or a plain number of seconds; `ValueError` otherwise."""
    match = _DURATION.fullmatch(text)
    if match is None:
        raise ValueError(f"not a duration: {text!r} (use e.g. 2s, 500ms, 1m or plain seconds)")
    value = float(match.group(1))
    unit = match.group(2) or "s"
    seconds = value / 1000.0 if unit == "ms" else value * 60.0 if unit == "m" else value
    if not math.isfinite(seconds):
        raise ValueError(f"not a finite duration: {text!r}")
    return seconds


def duration(text: str) -> float:
    """argparse type: a duration > 0 (E2E-CLI-2)."""
    try:
        seconds = parse_duration(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text!r}")
    return seconds


def int_at_least(minimum: int, maximum: int | None = None) -> Callable[[str], int]:
    """argparse type: an integer in `minimum..maximum` (E2E-CLI-2)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        if maximum is not None and value > maximum:
            raise argparse.ArgumentTypeError(f"must be <= {maximum}, got {value}")
        return value

    return parse


def finite_float(minimum: float = 0.0) -> Callable[[str], float]:
    """argparse type: a finite number >= `minimum`; `nan` and `inf` are refused (E2E-CLI-2)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum:g}, got {text!r}")
        return value

    return parse


def _protocol(allowed: Sequence[Protocol], text: str) -> Protocol:
    """One typed protocol, by its name."""
    # E2E-CLI-5: the choices and the error are parse_protocol's.
    try:
        return parse_protocol(text.strip(), allowed)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def protocol_names(allowed: Sequence[Protocol]) -> str:
    """The names of `allowed`, comma-separated: how help, output and errors spell them."""
    return ",".join(protocol.value for protocol in allowed)


def add_protocol_argument(
    parser: argparse.ArgumentParser,
    flag: str,
    *,
    allowed: Sequence[Protocol],
    default: Protocol,
    help: str,
) -> None:
    """A flag naming one protocol of `allowed`; its value is a `Protocol` (E2E-CLI-5).

    The choices are the names of `allowed`, and `--help` shows them.
    """
    parser.add_argument(
        flag,
        type=lambda text: _protocol(allowed, text),
        choices=allowed,
        metavar="{" + protocol_names(allowed) + "}",
        default=default,
        help=f"{help} (default {default.value})",
    )


def protocol_list(allowed: Sequence[Protocol]) -> Callable[[str], tuple[Protocol, ...]]:
    """argparse type: comma-separated protocols of `allowed`, in the order given (E2E-CLI-5)."""

    def parse(text: str) -> tuple[Protocol, ...]:
        names = [name for name in text.split(",") if name.strip()]
        if not names:
            raise argparse.ArgumentTypeError(
                f"name some of {protocol_names(allowed)}, got {text!r}"
            )
        return tuple(_protocol(allowed, name) for name in names)

    return parse


def exit_codes(*lines: str) -> str:
    """The `--help` epilog listing a command's exit statuses (E2E-CLI-2)."""
    return "exit status:\n" + "\n".join(f"  {line}" for line in lines)


def add_quiet(parser: argparse.ArgumentParser) -> None:
    """`--quiet`: no progress lines on stderr (E2E-CLI-4)."""
    parser.add_argument(
        "--quiet", "-q", action="store_true", help="no progress on stderr (also off when not a tty)"
    )


def show_progress(args: argparse.Namespace) -> bool:
    """Progress goes to stderr only when it is a terminal and --quiet is not given (E2E-CLI-4)."""
    return not getattr(args, "quiet", False) and sys.stderr.isatty()


def progress_line(command: str, text: str) -> None:
    """One progress line on stderr, `queueref CMD: text` (E2E-CLI-4)."""
    print(f"queueref {command}: {text}", file=sys.stderr, flush=True)
