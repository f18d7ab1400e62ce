"""A breadth-first search of per-server models over states packed into one integer.

The joint model of `queueref.verify.token_compact` is written per server: a server's own
moves, and the reads of its check's next step. Searched as tuples of tuples
(`queueref.verify.search.reachable`) most of the time goes into hashing nested tuples and
building new ones. Here each distinct server state gets a small number the first time it
is seen, a global state is the numbers of its servers packed into one int, and each
server's moves are computed once per (server, its state, the values read) and kept as
differences of those numbers. The moves are the model's own functions, called
unchanged: the search visits exactly the states `reachable` visits, in a faster
representation (`tests/verify/test_token_model.py` compares the two state for state).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

L = TypeVar("L", bound=Hashable)

#: Bits per server in a packed state: at most 2**16 distinct server states.
BITS = 16


@dataclass(frozen=True)
class ServerModel(Generic[L]):
    """A model given per server (its index and its state): what the search needs."""

    servers: int
    start: L  # every server's state at the start
    own_moves: Callable[[int, L], Sequence[L]]  # moves that read no slot
    reads: Callable[[int, L], Sequence[tuple[int, int]]]  # (slot, counter)s read next
    counter: Callable[[L, int], int]  # the value of a counter of the server's slot
    read_moves: Callable[[int, L, tuple[int, ...]], Sequence[L]]  # after reading those
    scores: Sequence[Callable[[L], int]]  # per-server parts of the sums to maximise


def search_packed(
    model: ServerModel[L], *, max_states: int | None = None, too_many: str = ""
) -> tuple[int, tuple[int, ...]]:
    """(states, the largest sum over the servers of each score), over every reachable state.

    Past `max_states` states it raises `ValueError(too_many)`, as `reachable` does.
    """
    mask = (1 << BITS) - 1
    servers = range(model.servers)
    shifts = [p * BITS for p in servers]
    ids: dict[L, int] = {}
    table: list[L] = []
    counters: list[tuple[int, int]] = []
    parts: list[tuple[int, ...]] = []
    # Per (server, its state), at `p << BITS | state`: the differences its own moves make
    # to the packed state, and (shift, counter) of each slot its next step reads.
    known: list[tuple[list[int], tuple[tuple[int, int], ...]] | None] = [None] * (
        model.servers << BITS
    )
    after_read: dict[int, list[int]] = {}  # (server, state, values read) -> differences

    def number(server: L) -> int:
        found = ids.get(server)
        if found is not None:
            return found
        if len(table) > mask:
            raise ValueError(f"more than {mask + 1} distinct server states to pack")
        ids[server] = len(table)
        table.append(server)
        counters.append((model.counter(server, 0), model.counter(server, 1)))
        parts.append(tuple(score(server) for score in model.scores))
        return len(table) - 1

    def learn(p: int, mine: int) -> tuple[list[int], tuple[tuple[int, int], ...]]:
        moves = [(number(s) - mine) << shifts[p] for s in model.own_moves(p, table[mine])]
        reads = tuple((shifts[slot], counter) for slot, counter in model.reads(p, table[mine]))
        known[p << BITS | mine] = (moves, reads)
        return moves, reads

    def learn_read(p: int, mine: int, values: tuple[int, ...], key: int) -> list[int]:
        found = model.read_moves(p, table[mine], values)
        after_read[key] = [(number(s) - mine) << shifts[p] for s in found]
        return after_read[key]

    begin = 0
    for shift in shifts:
        begin |= number(model.start) << shift
    seen = {begin}
    add = seen.add
    frontier = [begin]
    best = [0] * len(model.scores)
    while frontier:
        nxt: list[int] = []
        push = nxt.append
        for state in frontier:
            locals_ = [(state >> shift) & mask for shift in shifts]
            for i, value in enumerate(
                map(sum, zip(*[parts[mine] for mine in locals_], strict=True))
            ):
                if value > best[i]:
                    best[i] = value
            for p in servers:
                mine = locals_[p]
                moves, reads = known[p << BITS | mine] or learn(p, mine)
                for step in moves:
                    new = state + step
                    if new not in seen:
                        add(new)
                        push(new)
                if not reads:
                    continue
                key = (1 << BITS | p) << BITS | mine  # the leading 1 marks the length
                for shift, counter in reads:  # a value read is a count: below 2**BITS
                    key = key << BITS | counters[(state >> shift) & mask][counter]
                after = after_read.get(key)
                if after is None:
                    values = tuple(key >> (BITS * i) & mask for i in range(len(reads)))
                    after = learn_read(p, mine, values[::-1], key)
                for step in after:
                    new = state + step
                    if new not in seen:
                        add(new)
                        push(new)
            if max_states is not None and len(seen) > max_states:
                raise ValueError(too_many)
        frontier = nxt
    return len(seen), tuple(best)
