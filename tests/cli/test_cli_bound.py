"""`queueref bound` (OB-CLI-1..4) and the deployment table of the docs (OB-DEPLOY-1).

The expected numbers are written out here (`formula`, `replay_steps`), not taken from
the code under test: each is compared with both.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest

from queueref.admission.protocol import (
    Check,
    Protocol,
    TokenRule,
    admits_check_then_write,
    admits_tokens,
    bound,
)
from queueref.cli import bound as bound_command
from queueref.cli.main import main
from queueref.verify.admission_models import CheckThenWrite, Step
from queueref.verify.search import explore, replay
from queueref.verify.tight_witness import (
    Phase,
    expand,
    replay_tokens,
    tight_schedule,
    token_schedule,
)
from queueref.verify.tokens import explore_tokens

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "specs" / "overshoot-bound.md"
DOC = ROOT / "docs" / "bound.md"
TABLE = re.compile(
    r"<!-- deployment table: queueref bound --deployments -->\n"
    r"(.*?)<!-- end of deployment table -->",
    re.S,
)


def formula(servers: int, cap: int, weight: int) -> int:
    """The worst count, written out: N * M when a request can take the whole cap."""
    return servers * cap if weight >= cap else cap + (servers - 1) * weight


def run(argv: list[str]) -> tuple[int, str, str]:
    """The exit status, stdout and stderr of `queueref ARGV`."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as stopped:
            assert isinstance(stopped.code, int)
            code = stopped.code
    return code, out.getvalue(), err.getvalue()


def report(servers: int, cap: int, weight: int, *extra: str) -> dict[str, object]:
    code, out, err = run(
        ["bound", "--servers", str(servers), "--cap", str(cap), "--weight", str(weight),
         "--json", *extra]
    )  # fmt: skip
    assert code == 0, err
    data = json.loads(out)
    assert isinstance(data, dict)
    return data


def witness_steps(data: dict[str, object]) -> list[dict[str, int | str]]:
    """The printed witness, its phases expanded."""
    witness = data["witness"]
    assert isinstance(witness, dict)
    steps: list[dict[str, int | str]] = []
    for phase in witness["phases"]:
        steps += phase["steps"] * phase["repeat"]
    return steps


def replay_steps(servers: int, cap: int, steps: list[dict[str, int | str]]) -> list[int]:
    """The slots after `steps`, run through `queueref.admission.protocol`'s `Check` and
    decision; an `AssertionError` at the first step the protocol does not allow."""
    slots = [0] * servers
    checks: dict[int, Check] = {}
    for step in steps:
        p, action = int(step["server"]), step["action"]
        if action == "start":
            assert p not in checks and int(step["n"]) >= 1, step
            checks[p] = Check(int(step["n"]))
        elif action in ("read", "reject"):
            check = checks[p]
            assert int(step["slot"]) == check.next_slot < servers, step
            check = check.read(slots[check.next_slot])
            fits = admits_check_then_write(check.view, check.n, cap)
            assert fits == (action == "read"), step
            checks[p] = check
            if not fits:
                del checks[p]
        elif action == "admit":
            check = checks.pop(p)
            assert check.done(servers) and admits_check_then_write(check.view, check.n, cap)
            slots[p] += check.n
        else:
            assert action == "finish" and slots[p] > 0, step
            slots[p] -= 1
    return slots


def table_problems(text: str) -> list[str]:
    """Every cell of a deployment table that is not the bound, the formula, the ratio or
    the bold of OB-DEPLOY-1; and any (N, M, W) of the deployments missing from it."""
    problems, seen = [], set()
    header = None
    for line in text.strip().splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if cells[0] == "N":
            header = [int(c.removeprefix("W = ")) for c in cells[2:]]
            continue
        if cells[0].startswith("---"):
            continue
        assert header is not None
        n, m = int(cells[0]), int(cells[1])
        for w, cell in zip(header, cells[2:], strict=True):
            seen.add((n, m, w))
            match = re.fullmatch(r"(\*\*)?(\d+) \(([\d.]+)x\)(\*\*)?", cell)
            if match is None:
                problems.append(f"N={n} M={m} W={w}: cannot read {cell!r}")
                continue
            worst, ratio = int(match.group(2)), Fraction(match.group(3))
            if worst != formula(n, m, w) or worst != bound(Protocol.CHECK_THEN_WRITE, n, m, w):
                problems.append(f"N={n} M={m} W={w}: {worst} is not the bound")
            if ratio != Fraction(worst, m):
                problems.append(f"N={n} M={m} W={w}: ratio {ratio} is not {worst}/{m}")
            if bool(match.group(1)) != (w >= m):
                problems.append(f"N={n} M={m} W={w}: bold only where W >= M (N * M)")
    wanted = {(n, m, w) for n in (2, 4, 8, 16) for m in (10, 100, 1000) for w in (1, 4, 16)}
    problems += [f"N={n} M={m} W={w}: missing" for n, m, w in sorted(wanted - seen)]
    return problems


@pytest.mark.parametrize("page", [SPEC, DOC], ids=["spec", "docs"])
def test_the_deployment_table_is_the_bound_and_what_the_command_prints(page: Path) -> None:
    """OB-DEPLOY-1: every cell is the bound and the formula; the text is the command's."""
    match = TABLE.search(page.read_text(encoding="utf-8"))
    assert match is not None, f"{page.name}: no deployment table"
    assert table_problems(match.group(1)) == []
    code, out, _ = run(["bound", "--deployments"])
    assert code == 0 and match.group(1) == out


def test_a_wrong_cell_is_found() -> None:
    """OB-DEPLOY-1: the table check fails on a cell off by one, a wrong ratio, a lost
    bold, a missing row."""
    table = bound_command.deployment_table()
    assert table_problems(table) == []
    assert table_problems(table.replace("| 13 (1.3x) |", "| 12 (1.2x) |")) == [
        "N=4 M=10 W=1: 12 is not the bound"
    ]
    assert table_problems(table.replace("| 13 (1.3x) |", "| 13 (1.4x) |")) == [
        "N=4 M=10 W=1: ratio 7/5 is not 13/10"
    ]
    assert table_problems(table.replace("**40 (4x)**", "40 (4x)")) == [
        "N=4 M=10 W=16: bold only where W >= M (N * M)"
    ]
    short = "\n".join(line for line in table.splitlines() if not line.startswith("| 16 | 1000 |"))
    assert table_problems(short) == [f"N=16 M=1000 W={w}: missing" for w in (1, 4, 16)]


def test_each_deployment_is_reached_by_its_printed_witness() -> None:
    """OB-DEPLOY-1, OB-CLI-2: for each cell, the printed witness (the construction)
    replayed through the protocol's step functions ends at the worst count."""
    for n in (2, 4, 8, 16):
        for m in (10, 100, 1000):
            for w in (1, 4, 16):
                data = report(n, m, w)
                assert data["worst_total"] == formula(n, m, w)
                assert sum(replay_steps(n, m, witness_steps(data))) == formula(n, m, w)


def test_the_issue_example_is_no_better_than_no_sharing() -> None:
    """OB-CLI-1, OB-DEPLOY-1: 4 servers, cap 10, n >= 10: 40, the same as four separate caps."""
    for weight in (10, 16, 1000):
        data = report(4, 10, weight)
        assert data["worst_total"] == 40 and data["ratio"] == 4.0
        assert data["no_better_than_local"] is True
        worst = {row["protocol"]: row["worst_total"] for row in data["protocols"]}  # type: ignore[attr-defined]
        assert worst == {"check-then-write": 40, "write-then-check": 10, "locked": 10, "local": 40}
    code, out, _ = run(["bound", "--servers", "4", "--cap", "10", "--weight", "16"])
    assert code == 0
    assert "worst global count 40 = M + (N - 1) * min(M, W) = 10 + 3 * 10 (4x M)" in out
    assert "with W >= M the bound is N*M = 40" in out
    assert "write-then-check" in out and "keep the global count within M = 10" in out
    _, out, _ = run(["bound", "--servers", "4", "--cap", "10", "--weight", "9"])
    assert "N*M" not in out  # 10 + 3 * 9 = 37 < 40


@pytest.mark.parametrize(
    ("servers", "cap", "weight"), [(2, 10, 1), (4, 10, 16), (3, 2, 1), (16, 1000, 16), (5, 7, 3)]
)
def test_the_hinted_cap_is_the_largest_within_m(servers: int, cap: int, weight: int) -> None:
    """OB-CLI-1: the hint's cap keeps check-then-write within M, one more does not."""
    data = report(servers, cap, weight)
    smaller = data["cap_for_target"]
    assert isinstance(smaller, int)
    assert formula(servers, smaller, weight) <= cap < formula(servers, smaller + 1, weight)
    assert data["cap_for_target_worst"] == formula(servers, smaller, weight)


@pytest.mark.parametrize(
    ("servers", "cap", "weight"), [(2, 1, 1), (2, 4, 2), (3, 2, 1), (2, 6, 3), (1, 3, 2)]
)
def test_small_instances_take_a_shortest_witness_from_the_search(
    servers: int, cap: int, weight: int
) -> None:
    """OB-CLI-2: the search's witness, replayed through the explorer's model and through
    the protocol's step functions, reaches the count; it is no longer than the search's."""
    data = report(servers, cap, weight)
    witness = data["witness"]
    assert isinstance(witness, dict)
    assert witness["source"].startswith("exhaustive search")
    steps = witness_steps(data)
    model = CheckThenWrite(servers, cap, weight)
    states = replay(model, [Step.from_json(step) for step in steps])
    assert model.total(states[-1]) == formula(servers, cap, weight) == data["worst_total"]
    assert sum(replay_steps(servers, cap, steps)) == formula(servers, cap, weight)
    found = explore("check-then-write", servers, cap, weight, witness=True)
    assert len(steps) == len(found.witness or ()) == witness["length"]


@pytest.mark.parametrize(("servers", "cap", "weight"), [(2, 1, 1), (3, 3, 2), (4, 2, 1), (3, 2, 2)])
def test_the_construction_and_the_search_agree(servers: int, cap: int, weight: int) -> None:
    """OB-CLI-2: on instances the search covers, the construction reaches the same count."""
    data = report(servers, cap, weight, "--witness-from", "construction")
    assert data["witness"]["source"].startswith("construction")  # type: ignore[index]
    steps = witness_steps(data)
    assert sum(replay_steps(servers, cap, steps)) == formula(servers, cap, weight)
    assert explore("check-then-write", servers, cap, weight).worst_total == formula(
        servers, cap, weight
    )


def test_a_large_cap_keeps_the_witness_small() -> None:
    """OB-CLI-2: M = 10^6 is two phases in the JSON; too long to replay in the command,
    which says so; the test replays the same shape at M = 10^4 to M + (N - 1) * W."""
    data = report(8, 10**6, 4)
    witness = data["witness"]
    assert isinstance(witness, dict)
    assert [phase["repeat"] for phase in witness["phases"]] == [10**6 - 4, 1]
    assert witness["length"] == (10**6 - 4) * 10 + 8 * 10
    assert (witness["replayed"], witness["slots"], witness["total"]) == (False, None, None)
    code, out, _ = run(["bound", "--servers", "8", "--cap", str(10**6), "--weight", "4"])
    assert code == 0 and "not replayed here (more than 1000000 steps)" in out
    data = report(8, 10**4, 4)
    assert data["witness"]["replayed"] is True  # type: ignore[index]
    assert sum(replay_steps(8, 10**4, witness_steps(data))) == 10**4 + 7 * 4


def test_a_broken_construction_is_caught_before_it_is_printed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """OB-CLI-2: a schedule one alone-round short (Tightness.v's alone_count mutant) is
    reported, exit 1; a schedule with a step the protocol refuses likewise."""

    def one_short(servers: int, cap: int, weight: int) -> tuple[Phase, ...]:
        alone, together = tight_schedule(servers, cap, weight)
        return (Phase(alone.repeat - 1, alone.steps, alone.title), together)

    monkeypatch.setattr(bound_command, "tight_schedule", one_short)
    code, out, err = run(["bound", "--servers", "3", "--cap", "50", "--weight", "2"])
    assert code == 1
    assert err == "queueref bound: the witness reaches 53, not the worst count 54\n"

    def admits_early(servers: int, cap: int, weight: int) -> tuple[Phase, ...]:
        return (Phase(1, (Step("start", 0, 1), Step("admit", 0))),)

    monkeypatch.setattr(bound_command, "tight_schedule", admits_early)
    code, out, err = run(["bound", "--servers", "3", "--cap", "50", "--weight", "2"])
    assert (code, out) == (1, "")
    assert err.startswith("queueref bound: the witness is not a run of check-then-write: step 2")


def test_the_test_replay_refuses_a_witness_with_a_read_missing() -> None:
    """The replay of these tests can fail: one read left out of the witness."""
    steps = witness_steps(report(3, 5, 2))
    reads = [i for i, step in enumerate(steps) if step["action"] == "read"]
    with pytest.raises(AssertionError):
        replay_steps(3, 5, steps[: reads[-1]] + steps[reads[-1] + 1 :])


def test_the_token_limit_worst_counts() -> None:
    """OB-CLI-3: rule ge Mt - 1 + N * P, rule fits Mt + (N - 1) * min(Mt, P), and Mt
    admitted under write-then-check; ge agrees with the exhaustive token search."""
    data = report(4, 10, 2, "--max-num-queued-tokens", "8192", "--prompt-tokens", "4096")
    tokens = data["tokens"]
    assert isinstance(tokens, dict)
    assert {key: value for key, value in tokens.items() if key != "witness"} == {
        "max_num_queued_tokens": 8192, "prompt_tokens": 4096,
        "ge": 8191 + 4 * 4096, "fits": 8192 + 3 * 4096, "write-then-check": 8192,
    }  # fmt: skip
    small = report(2, 2, 1, "--max-num-queued-tokens", "2", "--prompt-tokens", "2")
    searched = explore_tokens(2, 2, 2, "ge", "check-then-write", 10**6)
    assert small["tokens"]["ge"] == searched.worst_tokens == 2 - 1 + 2 * 2  # type: ignore[index]
    code, out, _ = run(
        ["bound", "--servers", "4", "--cap", "10", "--weight", "2",
         "--max-num-queued-tokens", "8192", "--prompt-tokens", "4096"]
    )  # fmt: skip
    assert code == 0 and "worst queued tokens 24575 (rule ge, vLLM 0.30.0)" in out


@pytest.mark.guard
@pytest.mark.parametrize(
    ("argv", "names"),
    [
        (["--servers", "0", "--cap", "10", "--weight", "1"], "--servers"),
        (["--servers", "-2", "--cap", "10", "--weight", "1"], "--servers"),
        (["--servers", "2", "--cap", "-1", "--weight", "1"], "--cap"),
        (["--servers", "2", "--cap", "10", "--weight", "0"], "--weight"),
        (["--servers", "2", "--cap", "ten", "--weight", "1"], "not an integer"),
        (["--servers", "2.5", "--cap", "10", "--weight", "1"], "not an integer"),
        (["--servers", "257", "--cap", "10", "--weight", "1"], "<= 256"),
        (["--servers", "2", "--cap", "10"], "missing: --weight"),
        (["--servers", "2", "--cap", "10", "--weight", "1", "--prompt-tokens", "5"], "go together"),
        (
            ["--servers", "2", "--cap", "10", "--weight", "1", "--witness-from", "guess"],
            "--witness-from",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv: list[str], names: str) -> None:
    """OB-CLI-4: one line on stderr naming the problem, nothing on stdout, exit 2."""
    code, out, err = run(["bound", *argv])
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and err.startswith("queueref bound: ") and names in err


@pytest.mark.guard
def test_a_search_too_large_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """OB-CLI-4: --witness-from search past its state limit: one line, exit 2."""
    monkeypatch.setattr(bound_command, "SEARCH_STATES", 10)
    code, out, err = run(
        ["bound", "--servers", "3", "--cap", "3", "--weight", "1", "--witness-from", "search"]
    )
    assert (code, out) == (2, "")
    assert err == (
        "queueref bound: N=3 M=3 W=1 is too large for the exhaustive search: "
        "use --witness-from construction (see --help)\n"
    )


def test_help_and_a_real_process() -> None:
    """OB-CLI-1, OB-CLI-4: --help names the flags and the exit statuses; a bad value in a
    real process is one line without a traceback."""
    code, out, _ = run(["bound", "--help"])
    assert code == 0
    for flag in ("--api-server-count", "--max-num-queued-reqs", "--max-n", "--json",
                 "--max-num-queued-tokens", "--prompt-tokens", "exit status:"):  # fmt: skip
        assert flag in out
    done = subprocess.run(
        [sys.executable, "-m", "queueref", "bound", "--servers", "x", "--cap", "1",
         "--weight", "1"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


def test_the_spec_witness_is_what_the_command_prints() -> None:
    """OB-CLI-2: the witness beside the race diagram in the spec cannot drift."""
    argv = "bound --servers 2 --cap 3 --weight 2 --witness-from construction"
    text = SPEC.read_text(encoding="utf-8")
    block = re.search(rf"<!-- witness: queueref {argv} -->\n```\n(.*?)```\n", text, re.S)
    assert block is not None
    code, out, _ = run(argv.split())
    assert code == 0 and out[out.index("witness:") :] == block.group(1)
    assert "```mermaid\nsequenceDiagram" in text


def replay_token_steps(
    servers: int, limit: int, rule: TokenRule, steps: list[dict[str, int | str]]
) -> list[int]:
    """The queued tokens after `steps`, with the protocol's `Check` and token decision."""
    queued = [0] * servers
    checks: dict[int, Check] = {}
    for step in steps:
        p, action = int(step["server"]), step["action"]
        if action == "start":
            assert p not in checks, step
            checks[p] = Check(int(step["n"]))
        elif action == "read":
            assert int(step["slot"]) == checks[p].next_slot, step
            checks[p] = checks[p].read(queued[int(step["slot"])])
        else:
            check = checks.pop(p)
            assert action == "admit" and check.done(servers), step
            assert admits_tokens(rule, check.view, check.n, limit), step
            queued[p] += check.n
    return queued


@pytest.mark.parametrize(
    ("servers", "limit", "prompt"), [(4, 8192, 4096), (3, 10, 4), (16, 1000, 3)]
)
def test_the_token_witness_reaches_the_worst_queued_tokens(
    servers: int, limit: int, prompt: int
) -> None:
    """OB-CLI-3: the printed token witness (rule ge), replayed, ends at Mt - 1 + N * P."""
    data = report(servers, 10, 1, "--max-num-queued-tokens", str(limit),
                  "--prompt-tokens", str(prompt))  # fmt: skip
    tokens = data["tokens"]
    assert isinstance(tokens, dict)
    steps = witness_steps({"witness": tokens["witness"]})
    worst = limit - 1 + servers * prompt
    assert sum(replay_token_steps(servers, limit, TokenRule.GE, steps)) == worst
    assert tokens["witness"]["total"] == tokens["ge"] == worst


@pytest.mark.parametrize(
    ("servers", "limit", "prompt"), [(2, 1, 1), (2, 3, 2), (3, 2, 1), (2, 2, 3)]
)
@pytest.mark.parametrize("rule", [TokenRule.GE, TokenRule.FITS])
def test_the_token_constructions_reach_the_exhaustive_worst(
    servers: int, limit: int, prompt: int, rule: TokenRule
) -> None:
    """OB-CLI-3: both rules' constructions replay to the exhaustive search's worst."""
    searched = explore_tokens(servers, limit, prompt, rule.value, "check-then-write")
    replayed = replay_tokens(
        servers, limit, prompt, rule, expand(token_schedule(servers, limit, prompt, rule))
    )
    assert replayed.total == searched.worst_tokens == searched.bound


def test_a_broken_token_construction_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """OB-CLI-3: a token schedule one alone-admission too long is refused (the servers'
    checks then read Mt, which rule ge rejects), exit 1 and one line."""

    def one_more(servers: int, limit: int, prompt: int, rule: TokenRule) -> tuple[Phase, ...]:
        phases = token_schedule(servers, limit, prompt, rule)
        extra = Phase(1, (Step("start", 0, 1), *(Step("read", 0, k) for k in range(servers)),
                          Step("admit", 0)))  # fmt: skip
        return (*phases[:-1], extra, phases[-1])

    monkeypatch.setattr(bound_command, "token_schedule", one_more)
    code, out, err = run(["bound", "--servers", "2", "--cap", "10", "--weight", "1",
                          "--max-num-queued-tokens", "10", "--prompt-tokens", "4"])  # fmt: skip
    assert (code, out) == (1, "")
    assert err.startswith("queueref bound: the witness is not a run of check-then-write: step ")
    assert err.count("\n") == 1
