"""`queueref bound`: the worst global count of a deployment, and the schedule that reaches it.

For N API servers (`--api-server-count`), a cap M (`--max-num-queued-reqs`) and requests
of at most W parallel samples (`--max-n`), prints the worst global unfinished count that
vLLM 0.30.0's check-then-write admission can reach, `M + (N - 1) * min(M, W)`, its ratio
to M, the worst of every other protocol at the same numbers, a hint of which keeps the
cap, and a witness: an interleaving of the servers' steps that reaches the count,
replayed through the protocol's step functions before it is printed. Small instances
take the witness from the exhaustive search (a shortest one), large ones from the
construction of the tightness proof (`queueref.verify.tight_witness`).

`--max-num-queued-tokens Mt --prompt-tokens P` adds the token limit's worst counts
(`queueref.verify.tokens.token_bound`). `--deployments` prints the table of realistic
deployments that `specs/overshoot-bound.md` and `docs/bound.md` show.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable

from queueref.admission.protocol import Protocol, bound
from queueref.cli.args import exit_codes, int_at_least
from queueref.verify.admission_models import CHECK_THEN_WRITE, StateLimitExceeded, Step
from queueref.verify.search import explore
from queueref.verify.tight_witness import (
    Phase,
    describe,
    expand,
    replay_check_then_write,
    replay_tokens,
    schedule_length,
    tight_schedule,
    token_schedule,
)
from queueref.verify.tokens import Rule, token_bound

HELP = "the worst global count of N servers sharing a cap M, and a schedule that reaches it"

EXIT_CODES = exit_codes(
    "0  the witness reaches the worst count",
    "1  it does not (a disagreement between the search, the construction and the bound)",
    "2  bad usage (one line on stderr), or --witness-from search on a search too large",
)

#: Largest inputs: the witness holds N * (N + 2) steps in its last phase.
MAX_SERVERS = 256
MAX_COUNT = 10**9
#: The longest witness the command replays before printing it (about 3 s).
REPLAY_STEPS = 10**6
#: The deployments of the table: N, M and W as a deployer sets them.
DEPLOYMENT_SERVERS = (2, 4, 8, 16)
DEPLOYMENT_CAPS = (10, 100, 1000)
DEPLOYMENT_WEIGHTS = (1, 4, 16)
#: `--witness-from auto` searches when ((w + 1) * (M + 1)) ** N is at most this
#: (about 100 to 300 times fewer than the states searched, a few seconds at most) ...
SEARCH_SIZE = 2000
#: ... and gives up on the search, for the construction, past this many states
#: (`--witness-from search`: ten times as many, then exit status 2).
SEARCH_STATES = 200_000


class UsageError(Exception):
    """A bad combination of arguments: one line on stderr, exit status 2."""


class WitnessError(Exception):
    """The witness is not a run of the protocol: one line on stderr, exit status 1."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    count = int_at_least(1, MAX_COUNT)
    parser.add_argument(
        "--servers", "--api-server-count", type=int_at_least(1, MAX_SERVERS), metavar="N",
        help=f"N: API server processes sharing the cap (1..{MAX_SERVERS})",
    )  # fmt: skip
    parser.add_argument(
        "--cap", "--max-num-queued-reqs", type=int_at_least(0, MAX_COUNT), metavar="M",
        help="M: max_num_queued_reqs, the cap shared by the servers",
    )  # fmt: skip
    parser.add_argument(
        "--weight", "--max-n", type=count, metavar="W",
        help="W: the largest n (parallel samples) of one request; each takes n slots",
    )  # fmt: skip
    parser.add_argument(
        "--max-num-queued-tokens", type=int_at_least(0, MAX_COUNT), metavar="Mt",
        help="also the token limit: max_num_queued_tokens (with --prompt-tokens)",
    )  # fmt: skip
    parser.add_argument(
        "--prompt-tokens", type=count, metavar="P",
        help="the most queued tokens one admission adds (n samples x prompt length)",
    )  # fmt: skip
    parser.add_argument(
        "--witness-from", choices=["auto", "search", "construction"], default="auto",
        help="the exhaustive search (small N, M, W only), the construction of the "
        "tightness proof, or auto: the search when it is small (default)",
    )  # fmt: skip
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--deployments", action="store_true",
        help="print the table of deployments (N = 2..16, M = 10..1000, W = 1..16) as Markdown",
    )  # fmt: skip


def ratio(worst: int, cap: int) -> float | None:
    """worst / cap rounded to three decimals (the JSON's `ratio`), None for a cap of 0."""
    return None if cap == 0 else round(worst / cap, 3)


def ratio_text(worst: int, cap: int) -> str:
    """worst / cap to at most three decimals, `-` for a cap of 0."""
    if cap == 0:
        return "-"
    return f"{worst / cap:.3f}".rstrip("0").rstrip(".")


def times_m(worst: int, cap: int) -> str:
    """` (1.3x M)`, or nothing for a cap of 0 (nothing is admitted)."""
    return f" ({ratio_text(worst, cap)}x M)" if cap else ""


def cap_within(servers: int, target: int, weight: int) -> int:
    """The largest cap whose check-then-write worst count is at most `target`."""
    low, high = 0, target  # the bound is at least the cap and grows with it
    while low < high:
        middle = (low + high + 1) // 2
        if bound(Protocol.CHECK_THEN_WRITE, servers, middle, weight) <= target:
            low = middle
        else:
            high = middle - 1
    return low


def deployment_table() -> str:
    """The Markdown table of `--deployments`: per (N, M) and W, the worst count and
    its ratio to M, in bold where it is N * M (no better than no sharing)."""
    # OB-DEPLOY-1: the table of the spec and of docs/bound.md, printed by the code.
    header = "| N | M | " + " | ".join(f"W = {w}" for w in DEPLOYMENT_WEIGHTS) + " |"
    lines = [header, "|---:|---:|" + "---:|" * len(DEPLOYMENT_WEIGHTS)]
    for n in DEPLOYMENT_SERVERS:
        for m in DEPLOYMENT_CAPS:
            cells = []
            for w in DEPLOYMENT_WEIGHTS:
                worst = bound(Protocol.CHECK_THEN_WRITE, n, m, w)
                text = f"{worst} ({ratio_text(worst, m)}x)"
                cells.append(f"**{text}**" if worst == n * m else text)
            lines.append(f"| {n} | {m} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def find_witness(servers: int, cap: int, weight: int, source: str) -> tuple[str, tuple[Phase, ...]]:
    """(where the witness comes from, its phases) for `--witness-from source`."""
    # OB-CLI-2: a shortest witness of the search when small, else the construction.
    w = min(cap, weight)
    small = cap >= 1 and ((w + 1) * (cap + 1)) ** servers <= SEARCH_SIZE
    if source == "search" or (source == "auto" and small):
        # A forced search may take ten times the states (about a minute).
        limit = SEARCH_STATES * (10 if source == "search" else 1)
        try:
            found = explore(CHECK_THEN_WRITE, servers, cap, weight, witness=True, max_states=limit)
        except StateLimitExceeded:
            if source == "search":
                raise UsageError(
                    f"N={servers} M={cap} W={weight} is too large for the exhaustive search: "
                    "use --witness-from construction"
                ) from None
        else:
            steps = found.witness or ()
            return "exhaustive search (a shortest witness)", (Phase(1, steps),)
    return "construction of the tightness proof (proofs/coq/Tightness.v)", tight_schedule(
        servers, cap, weight
    )


def replayed_witness(
    source: str, phases: tuple[Phase, ...], replay: Callable[[Iterable[Step]], tuple[int, ...]]
) -> dict[str, object]:
    """The JSON of a witness, with the counts its replay ends at (None when too long)."""
    # OB-CLI-2: replayed before it is shown. Past REPLAY_STEPS the replay would take
    # seconds per million steps: the construction is proved to reach the count for every
    # N, M, W (Tightness.v), and the output says it was not run.
    length = schedule_length(phases)
    slots: list[int] | None = None
    if length <= REPLAY_STEPS:
        try:
            slots = list(replay(expand(phases)))
        except ValueError as error:
            raise WitnessError(f"the witness is not a run of check-then-write: {error}") from None
    return {
        "source": source, "length": length, "replayed": slots is not None,
        "phases": [phase.to_json() for phase in phases],
        "slots": slots, "total": None if slots is None else sum(slots),
    }  # fmt: skip


def report(args: argparse.Namespace) -> dict[str, object]:
    """Everything `queueref bound` prints, as JSON-ready data."""
    # OB-CLI-1: the worst count is the protocol's bound; every protocol's worst beside it.
    n, m, w = int(args.servers), int(args.cap), int(args.weight)
    worst = bound(Protocol.CHECK_THEN_WRITE, n, m, w)
    source, phases = find_witness(n, m, w, str(args.witness_from))
    # OB-CLI-2: the witness is replayed through the step functions before it is shown.
    witness = replayed_witness(
        source, phases, lambda steps: replay_check_then_write(n, m, w, steps).slots
    )
    protocols = [
        {"protocol": p.value, "worst_total": bound(p, n, m, w),
         "ratio": ratio(bound(p, n, m, w), m), "keeps_cap": bound(p, n, m, w) <= m}
        for p in Protocol
    ]  # fmt: skip
    out: dict[str, object] = {
        "servers": n, "cap": m, "weight": w, "protocol": CHECK_THEN_WRITE,
        "worst_total": worst, "ratio": ratio(worst, m),
        "formula": "M + (N - 1) * min(M, W)",
        "no_better_than_local": n > 1 and m >= 1 and worst == n * m,
        "protocols": protocols,
        "cap_for_target": cap_within(n, m, w),
        "cap_for_target_worst": bound(Protocol.CHECK_THEN_WRITE, n, cap_within(n, m, w), w),
        "witness": witness,
    }  # fmt: skip
    if args.max_num_queued_tokens is not None:
        # OB-CLI-3: the token limit's worst counts, from the bounds of OB-TOK-1..3.
        mt, p = int(args.max_num_queued_tokens), int(args.prompt_tokens)
        out["tokens"] = {
            "max_num_queued_tokens": mt, "prompt_tokens": p,
            "ge": token_bound(Rule.GE, False, n, mt, p),
            "fits": token_bound(Rule.FITS, False, n, mt, p),
            "write-then-check": token_bound(Rule.FITS, True, n, mt, p),
            "witness": replayed_witness(
                "construction (rule ge)", token_schedule(n, mt, p, Rule.GE),
                lambda steps: replay_tokens(n, mt, p, Rule.GE, steps).slots,
            ),
        }  # fmt: skip
    return out


def hint(data: dict[str, object]) -> list[str]:
    """What to do about the numbers: which protocol keeps the cap, which cap keeps it."""
    n, m, worst = data["servers"], data["cap"], data["worst_total"]
    assert isinstance(n, int) and isinstance(m, int) and isinstance(worst, int)
    if worst <= m:
        return ["check-then-write keeps the cap here (one server, or a cap of 0)"]
    lines = []
    smaller = data["cap_for_target"]
    assert isinstance(smaller, int)
    if smaller >= 1:
        tighter = (
            f"with check-then-write, --max-num-queued-reqs {smaller} keeps the worst within "
            f"{m} (worst {data['cap_for_target_worst']})"
        )
    else:
        tighter = (
            f"with check-then-write, no cap keeps the worst within {m}: a cap of 1 reaches {n}"
        )
    if data["no_better_than_local"]:
        lines.append(
            f"with W >= M the bound is N*M = {n * m}: the shared cap protects no better "
            "than no sharing at all (each server capping only itself)"
        )
    lines += [
        'write-then-check (reserve, then check: queueref\'s mode="write-then-check") and an '
        f"atomic check-and-write (locked) keep the global count within M = {m}",
        tighter,
    ]
    return lines


def print_text(data: dict[str, object]) -> None:
    n, m, w = data["servers"], data["cap"], data["weight"]
    assert isinstance(n, int) and isinstance(m, int) and isinstance(w, int)
    worst = data["worst_total"]
    print(f"check-then-write (vLLM 0.30.0), N={n} servers, M={m}, W={w}:")
    print(
        f"  worst global count {worst} = M + (N - 1) * min(M, W) = {m} + {n - 1} * {min(m, w)}"
        + times_m(int(str(worst)), m)
    )
    print("every protocol at these numbers:")
    for row in data["protocols"]:  # type: ignore[attr-defined]
        keeps = "keeps the cap" if row["keeps_cap"] else "over the cap"
        times = times_m(row["worst_total"], m)
        print(f"  {row['protocol']:<17} {row['worst_total']:>10} {times}  {keeps}")
    for line in hint(data):
        print(f"hint: {line}")
    tokens = data.get("tokens")
    if isinstance(tokens, dict):
        print(
            f"tokens, max_num_queued_tokens={tokens['max_num_queued_tokens']}, at most "
            f"{tokens['prompt_tokens']} per admission: worst queued tokens {tokens['ge']} "
            f"(rule ge, vLLM 0.30.0), {tokens['fits']} (rule fits), "
            f"{tokens['write-then-check']} (write-then-check)"
        )
    witness = data["witness"]
    assert isinstance(witness, dict)
    print(f"witness: {witness['length']} steps, from the {witness['source']}:")
    print_witness(witness)
    if isinstance(tokens, dict):
        token_witness = tokens["witness"]
        print(f"token witness (rule ge): {token_witness['length']} steps, queued tokens:")
        print_witness(token_witness)


def print_witness(witness: dict[str, object]) -> None:
    """The phases, a line a step (a server's reads of every slot on one line)."""
    number = 0
    phases = witness["phases"]
    assert isinstance(phases, list)
    for entry in phases:
        phase = Phase.from_json(entry)
        if phase.title:
            times = f", {phase.repeat} times" if phase.repeat > 1 else ""
            print(f"  {phase.title}{times}:")
        for line in describe(phase.steps):
            number += 1
            print(f"  {number:>4}. {line}")
    if witness["replayed"]:
        print(f"  slots {witness['slots']}, global count {witness['total']}")
    else:
        print(
            f"  not replayed here (more than {REPLAY_STEPS} steps): the construction reaches "
            "the count for every N, M and W (Tightness.v:tight_schedule_reaches_bound)"
        )


def run(args: argparse.Namespace) -> int:
    """Print the report; exit 0, 1 (the witness misses the count) or 2 (bad usage)."""
    if args.deployments:
        print(deployment_table(), end="")
        return 0
    try:
        missing = [f for f in ("servers", "cap", "weight") if getattr(args, f) is None]
        if missing:
            # OB-CLI-4: one line, exit status 2.
            raise UsageError(
                "give --servers N, --cap M and --weight W (missing: "
                + ", ".join(f"--{f}" for f in missing)
                + ")"
            )
        if (args.max_num_queued_tokens is None) != (args.prompt_tokens is None):
            raise UsageError("--max-num-queued-tokens and --prompt-tokens go together")
        data = report(args)
    except UsageError as error:
        print(f"queueref bound: {error} (see --help)", file=sys.stderr)
        return 2
    except WitnessError as error:  # OB-CLI-2: never printed as if it were a witness
        print(f"queueref bound: {error}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(data, indent=1))
    else:
        print_text(data)
    witness = data["witness"]
    assert isinstance(witness, dict)
    pairs = [(witness, data["worst_total"], "the worst count")]
    tokens = data.get("tokens")
    if isinstance(tokens, dict):
        pairs.append((tokens["witness"], tokens["ge"], "the worst queued tokens"))
    for found, wanted, what in pairs:
        if found["replayed"] and found["total"] != wanted:
            print(
                f"queueref bound: the witness reaches {found['total']}, not {what} {wanted}",
                file=sys.stderr,
            )
            return 1
    return 0
