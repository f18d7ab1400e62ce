"""The errors of the oracle. No Hypothesis here: importing this is cheap."""

from __future__ import annotations

from queueref.oracle.clauses import describe

FailureKey = tuple[str, str]  # (operation, clause): what makes two failures distinct

#: The command that installs what the queue checks need (ORC-INST-1): the range of
#: the `oracle` extra. queueref itself is not on the package index, so the line
#: names Hypothesis, which is.
INSTALL_ORACLE = "pip install 'hypothesis>=6.100,<7'"


class ConformanceFailure(AssertionError):
    """The subject disagreed with the expected side (raised inside the machine).

    `kind` is "call" (an operation's result or exception differed) or "law"
    (the contents or a law checked after a step failed); `program` is the
    failing program; `summary` says in one line what went wrong; `operation`
    is the call it concerns and `clause` the requirement broken (ORC-CLAUSE-1);
    `hint` is a further line, or "" (ORC-TIES-2); `tie_only` says the
    comparison parted only on a tie (the hint is then the tie line), and
    `shrunk` is False when shrinking stopped at its budget (ORC-SIZE-4).
    """

    def __init__(
        self,
        kind: str,
        program: str,
        summary: str,
        *,
        operation: str = "",
        clause: str = "ORC-MACH-1",
        hint: str = "",
        tie_only: bool = False,
    ) -> None:
        super().__init__(f"{summary}\n{describe(clause)}\n\n{program}")
        self.kind = kind
        self.program = program
        self.summary = summary
        self.operation = operation
        self.clause = clause
        self.hint = hint
        self.tie_only = tie_only
        self.shrunk = True

    @property
    def key(self) -> FailureKey:
        """ORC-MANY-1: failures are distinct by the operation and the clause."""
        return (self.operation, self.clause)


class ConformanceError(AssertionError):
    """A queue under test disagrees with the expected behaviour (ORC-CRQ-2).

    `program` is the shortest failing sequence found, as Python statements that
    paste into a test; `failures` holds one such program per distinct failure
    (ORC-CRQ-5), the first of which is `program`. The message holds them all.

    `reports` holds, for each failure in the same order, the failure itself:
    its `operation`, `clause` (the requirement broken, ORC-CLAUSE-1),
    `summary` and `program` (ORC-MANY-1); `hypothesis_version` is the version
    of Hypothesis that found them, on which the verdict depends (ORC-CRQ-4).
    """

    def __init__(
        self,
        message: str,
        *,
        program: str = "",
        failures: list[str] | None = None,
        reports: list[ConformanceFailure] | None = None,
        hypothesis_version: str = "",
    ):
        super().__init__(message)
        self.program = program
        self.failures: list[str] = list(failures) if failures is not None else [program]
        self.reports: list[ConformanceFailure] = list(reports) if reports is not None else []
        self.hypothesis_version = hypothesis_version


class HypothesisMissing(ModuleNotFoundError):
    """The queue checks need Hypothesis, which is not installed (ORC-INST-1)."""

    def __init__(self) -> None:
        super().__init__(
            f"queueref's queue checks need Hypothesis, which is not installed: {INSTALL_ORACLE}",
            name="hypothesis",
        )


# Public as `queueref.oracle.ConformanceError` and `.HypothesisMissing`: say so in reprs.
ConformanceError.__module__ = "queueref.oracle"
HypothesisMissing.__module__ = "queueref.oracle"
