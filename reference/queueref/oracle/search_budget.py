"""What a queue check may spend, counted in calls, and its progress line (ORC-SIZE-4, ORC-SIZE-5).

Long programs are slow to shrink: every attempt replays the program, and a
program of 200 calls that needs 33 adds shrinks for minutes. So the work is
counted in calls made to the subject (a starting batch counts one call per
request), never in seconds, and a check stops shrinking a failure after
`SHRINK_CALLS` calls and stops looking for more failures after
`EXTRA_SEARCH_CALLS`: the verdict and the programs stay the same on every
run (ORC-CRQ-4), however fast the machine. A check that runs longer than
`PROGRESS_AFTER_SECONDS` says on stderr what it is doing; that line is the
only thing the clock decides. No Hypothesis here.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

#: Calls spent shrinking one failure before its smallest program so far is taken.
SHRINK_CALLS = 8_000
#: Calls spent looking for (and shrinking) failures after the first one.
EXTRA_SEARCH_CALLS = 16_000
#: A check that runs longer than this prints progress on stderr ...
PROGRESS_AFTER_SECONDS = 3.0
#: ... at most this often.
PROGRESS_EVERY_SECONDS = 5.0


class BudgetSpent(KeyboardInterrupt):
    """The calls a round may spend are spent (ORC-SIZE-4).

    A KeyboardInterrupt, the one exception Hypothesis lets through at once
    at every stage without taking it for a failure of the queue or replaying
    the program; the checker catches this subclass alone, so a real Ctrl-C
    still stops the check.
    """


class WorkMeter:
    """Counts the calls of one check and stops a round whose limit is spent (ORC-SIZE-4).

    A round starts with `start_round(limit)` (None: no limit until a failure);
    once a failure is seen, `failure_seen()` caps what is left at
    `SHRINK_CALLS`. `spend()` raises `BudgetSpent` past the limit.
    """

    def __init__(self, stream: TextIO | None = None, clock: float | None = None) -> None:
        self.stream = sys.stderr if stream is None else stream
        self.started = time.monotonic() if clock is None else clock
        self.next_report = self.started + PROGRESS_AFTER_SECONDS
        self.total = 0  # calls over the whole check
        self.round = 0
        self.programs = 0  # programs run in this round
        self.failures = 0  # distinct failures found in earlier rounds
        self.shrinking = False
        self.round_calls = 0
        self.limit: int | None = None

    def start_round(self, limit: int | None) -> None:
        """A new Hypothesis run, which may spend `limit` calls (None: no limit yet)."""
        self.round += 1
        self.programs = 0
        self.round_calls = 0
        self.shrinking = False
        self.limit = limit

    def failure_seen(self) -> None:
        """The round found its failure: from now on Hypothesis shrinks it (ORC-SIZE-4)."""
        if not self.shrinking:
            self.shrinking = True
            left = SHRINK_CALLS if self.limit is None else self.limit - self.round_calls
            self.limit = self.round_calls + min(SHRINK_CALLS, left)

    def program_started(self) -> None:
        self.programs += 1
        self.spend(0)

    def spend(self, calls: int = 1) -> None:
        """Count `calls`; past the round limit raise BudgetSpent; now and then report progress."""
        self.total += calls
        self.round_calls += calls
        if self.limit is not None and self.round_calls > self.limit:
            raise BudgetSpent
        now = time.monotonic()
        if now >= self.next_report:
            self.next_report = now + PROGRESS_EVERY_SECONDS
            self.report(now)

    def report(self, now: float) -> None:
        """ORC-SIZE-5: one line on stderr: time, round, programs, failures, what it does."""
        doing = "shrinking a failure" if self.shrinking else "looking for a failure"
        count = self.failures + (1 if self.shrinking else 0)
        found = f"{count} failure{'s' if count != 1 else ''} found"
        print(
            f"queueref oracle: {now - self.started:.0f} s: round {self.round}, "
            f"{self.programs} programs, {self.total} calls, {found}, {doing}",
            file=self.stream,
            flush=True,
        )
