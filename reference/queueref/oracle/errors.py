"""The errors of the oracle. No Hypothesis here: importing this is cheap."""

from __future__ import annotations


class ConformanceError(AssertionError):
    """A queue under test disagrees with the expected behaviour (ORC-CRQ-2).

    `program` is the shortest failing sequence found, as Python statements that
    paste into a test; `failures` holds one such program per distinct failure
    (ORC-CRQ-5), the first of which is `program`. The message holds them all.
    """

    def __init__(self, message: str, *, program: str = "", failures: list[str] | None = None):
        super().__init__(message)
        self.program = program
        self.failures: list[str] = list(failures) if failures is not None else [program]


class TraceFormatError(ValueError):
    """A line of a recorded trace breaks the event schema (ORC-TR-9).

    `line` is the 1-based line number (0 when the problem is the file or the
    folder itself), `field` the offending field (or None when the line is not
    a JSON object at all).
    """

    def __init__(self, path: str, line: int, field: str | None, problem: str) -> None:
        where = f"{path}:{line}" if line else path  # line 0: about the file, not a line
        what = f"field {field!r}: " if field is not None else ""
        super().__init__(f"{where}: {what}{problem}")
        self.path = path
        self.line = line
        self.field = field
        self.problem = problem


# Both are public as `queueref.oracle.ConformanceError` / `.TraceFormatError`: say so in reprs.
ConformanceError.__module__ = "queueref.oracle"
TraceFormatError.__module__ = "queueref.oracle"
