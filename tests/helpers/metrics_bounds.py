"""What a server's records allow a scraped gauge to be (E2E-SRV-3).

A server's slot changes only inside its own records' stamps (ADM-EV-3): an
admit is stamped before its slot write, and the write is done before the
server stamps its next record (one thread, no await in between); a
departure writes between `t_before` and `t`. So at time x a slot holds at
least `low(x)` -- the admits whose next record is stamped by x, less the
departures whose `t_before` is by x -- and at most `high(x)` -- the admits
stamped by x, less the departures whose `t` is by x. A gauge scraped
between t0 and t1 read each slot at some time in [t0, t1].
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

from queueref.trace.events import AdmissionEvent

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)\{([^}]*)\} (-?\d+)$")


def samples(text: str, name: str) -> list[tuple[dict[str, str], int]]:
    """Every sample of metric `name` in Prometheus text: its labels and its value."""
    found = []
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match and match.group(1) == name:
            labels = dict(re.findall(r'([a-zA-Z_]+)="([^"]*)"', match.group(2)))
            found.append((labels, int(match.group(3))))
    return found


@dataclass(frozen=True)
class SlotSteps:
    """The changes of one slot that its records allow: (time, +-slots), sorted."""

    low: list[tuple[float, int]]
    high: list[tuple[float, int]]

    @staticmethod
    def level(steps: list[tuple[float, int]], x: float) -> int:
        """The slot's value at x after every step stamped by x."""
        return sum(delta for t, delta in steps[: bisect_right(steps, (x, float("inf")))])

    def least(self, t0: float, t1: float) -> int:
        """The least the slot can have held at some time in [t0, t1]."""
        inside = [t for t, _ in self.low if t0 < t <= t1]
        return min(self.level(self.low, x) for x in [t0, *inside])

    def most(self, t0: float, t1: float) -> int:
        """The most the slot can have held at some time in [t0, t1]."""
        inside = [t for t, _ in self.high if t0 < t <= t1]
        return max(self.level(self.high, x) for x in [t0, *inside])


def slot_steps(events: Sequence[AdmissionEvent]) -> SlotSteps:
    """The steps of one server's slot, from its records in file order."""
    low: list[tuple[float, int]] = []
    high: list[tuple[float, int]] = []
    for position, event in enumerate(events):
        if event.event == "admit":
            high.append((event.t, event.n))
            later = events[position + 1 :]
            if later:  # the write is done before the next record's first stamp
                following = later[0]
                low.append((min(following.t, following.t_before or following.t), event.n))
        elif event.event in ("finish", "abort"):
            high.append((event.t, -event.n))
            low.append((event.t_before if event.t_before is not None else event.t, -event.n))
    return SlotSteps(sorted(low), sorted(high))


def gauge_range(steps: Sequence[SlotSteps], t0: float, t1: float) -> tuple[int, int]:
    """The least and the most a sum of these slots, each read once in [t0, t1], can be."""
    return sum(s.least(t0, t1) for s in steps), sum(s.most(t0, t1) for s in steps)
