"""The proof obligations of the overshoot bound: their files, their teeth, their runner.

The full CrossHair run is `python tools/run_proofs.py` (part of `make verify`); here each
kind of result is exercised once, quickly: a confirmation with its refuted mutant, a
dropped conjunct with its counterexample (replayed concretely), the natural potential's
refutation, the generated files being current, and the invariants on concrete runs.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import random
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import icontract
import pytest

from queueref.verify.inductive import atomic, fine
from queueref.verify.inductive import write_then_check as wtc

ROOT = Path(__file__).resolve().parents[2]


def _load(relative: str) -> ModuleType:
    path = ROOT / relative
    name = "ob_" + path.stem
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def run_proofs() -> ModuleType:
    return _load("tools/run_proofs.py")


def _manifest(model: str) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = json.loads(
        (ROOT / "proofs" / "generated" / "manifests" / f"{model}.json").read_text()
    )
    return entries


def test_generated_obligation_files_are_current() -> None:
    """OB-FINE-1, OB-ATOMIC-1, OB-WTC-1: the committed obligations, mutants and manifests
    are exactly what proofs/generate.py writes."""
    generate = _load("proofs/generate.py")
    assert generate.write_all(check_only=True) == []


def test_a_stale_generated_file_is_reported_and_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """OB-FINE-1: `generate.py --check` (run by `make proofs`) names a generated file that
    differs from what it would write, and does not rewrite it."""
    generate = _load("proofs/generate.py")
    path = ROOT / "proofs" / "generated" / "mutants" / "fine_n2_bad.py"
    before = path.read_text()
    stale = generate.Output(path, before.replace("st.k[p] = 1", "st.k[p] = 0"))
    monkeypatch.setattr(generate, "outputs", lambda: [stale])
    assert generate.write_all(check_only=True) == [path]
    assert path.read_text() == before


def _functions(source: str) -> dict[str, str]:
    tree = ast.parse(source)
    return {
        node.name: ast.get_source_segment(source, node) or ""
        for node in tree.body
        if isinstance(node, ast.FunctionDef)
    }


def test_broken_copies_differ_from_their_originals_only_by_their_named_changes() -> None:
    """OB-FINE-1, OB-ATOMIC-1, OB-WTC-1: every generated broken copy is its original with
    the named changes of proofs/mutations.py and nothing else; a change that no longer
    applies stops the generator with the change's name."""
    mutations = _load("proofs/mutations.py")
    for broken in mutations.BROKEN_FILES:
        original = _functions((ROOT / broken.original).read_text())
        copy = _functions((ROOT / broken.output).read_text())
        assert copy.keys() == original.keys()
        changed = {change.function for change in broken.changes}
        for name, text in original.items():
            assert (copy[name] != text) == (name in changed), name
    inductive = {
        name: text
        for kernel in mutations.KERNELS
        for name, text in _functions(
            (ROOT / mutations.INDUCTIVE / f"{kernel}.py").read_text()
        ).items()
    }
    for step_mutants in mutations.STEP_MUTANTS.values():
        for broken in step_mutants:
            copy = mutations.broken_function(broken)
            assert f"def {broken.name}(" in copy
            for change in broken.changes:
                assert change.old in inductive[broken.original] and change.new in copy
    drifted = mutations.Change("fcfs_add", "a bug that no longer applies", "no such text", "")
    with pytest.raises(mutations.ChangeDoesNotApply, match="a bug that no longer applies"):
        mutations.apply((ROOT / "reference/queueref/queues/semantics.py").read_text(), (drifted,))


def test_manifests_cover_every_transition_and_pair_every_confirmation(
    run_proofs: ModuleType,
) -> None:
    """OB-ATOMIC-1, OB-FINE-1, OB-WTC-1: one obligation per N (atomic N=1..8), per
    (transition, server) (fine N=2..4, write-then-check N=2..3), each confirmed one with
    a mutant of the same name; the refuted ones are the dropped conjuncts (OB-FINE-2)."""
    atomic = _manifest("atomic")
    assert {e["servers"] for e in atomic if e["target"].endswith("_step")} == set(range(1, 9))
    for model, prefix, sizes in (("fine", "fine", (2, 3, 4)), ("write-then-check", "wtc", (2, 3))):
        entries = _manifest(model)
        names = {e["target"].rpartition(":")[2] for e in entries if e["expect"] == "confirmed"}
        for n in sizes:
            expected = {f"{prefix}_n{n}_init", f"{prefix}_n{n}_bound"}
            for p in range(n):
                expected |= {f"{prefix}_n{n}_start_{p}", f"{prefix}_n{n}_decide_{p}"}
                expected |= {f"{prefix}_n{n}_finish_{p}"}
                expected |= {f"{prefix}_n{n}_read_{p}_{j}" for j in range(n)}
            assert expected <= names, sorted(expected - names)
        conjuncts = fine.FINE_CONJUNCTS if model == "fine" else wtc.RESERVE_CONJUNCTS
        dropped = {
            e["target"].rpartition("_without_")[2] for e in entries if "_without_" in e["target"]
        }
        assert dropped == set(conjuncts)
    for entry in atomic + _manifest("fine") + _manifest("write-then-check") + _manifest("queues"):
        file_part, _, function = entry["target"].rpartition(":")
        run_proofs.def_line(ROOT / file_part, function)  # raises when missing
        assert entry["expect"] in ("confirmed", "refuted")
        if entry["expect"] == "confirmed":
            mutant_file, _, mutant_function = entry["mutant"].rpartition(":")
            assert mutant_file.startswith("proofs/generated/mutants/")
            assert mutant_function == function
            run_proofs.def_line(ROOT / mutant_file, mutant_function)
            assert entry["breaks"] in run_proofs.conditions(ROOT / mutant_file, function)
        else:
            assert entry["target"].startswith(("proofs/mutants/", "proofs/generated/mutants/"))
            assert entry["breaks"] in run_proofs.conditions(ROOT / file_part, function)


@pytest.mark.contracts
def test_a_confirmed_obligation_and_its_refuted_mutant(run_proofs: ModuleType) -> None:
    """OB-FINE-1, OB-BOUND-1: CrossHair confirms fine_n2_decide_0 over all paths and refutes
    its mutant (a decision that forgets n) with a counterexample."""
    confirmed = run_proofs.run_target("proofs/generated/fine_n2.py:fine_n2_decide_0", 30)
    assert confirmed.status == "confirmed", confirmed
    mutant = run_proofs.run_target("proofs/generated/mutants/fine_n2_bad.py:fine_n2_decide_0", 30)
    assert mutant.status == "refuted" and mutant.detail.startswith("false when calling"), mutant
    found = run_proofs.refutation(mutant, "OB-FINE-1: the invariant holds after the step")
    assert found.intended, found


def _counterexample_args(detail: str, function: str) -> list[int]:
    match = re.search(rf"{function}\(([-0-9, ]*)\)", detail)
    assert match, detail
    return [int(x) for x in match.group(1).split(",")]


@pytest.mark.contracts
def test_dropping_a_conjunct_gives_a_counterexample(run_proofs: ModuleType) -> None:
    """OB-FINE-2: without the `order` conjunct the invariant is not inductive: CrossHair
    finds a state where it holds, server 0 decides, and it no longer holds. The
    counterexample is replayed concretely, and the full invariant excludes that state."""
    function = "fine_n2_decide_0_without_order"
    run = run_proofs.run_target(f"proofs/generated/mutants/fine_n2_weak.py:{function}", 30)
    assert run.status == "refuted", run
    args = _counterexample_args(run.detail, function)
    cap, weight, state = args[0], args[1], tuple(args[2:])
    weak = ("order",)
    assert fine.fine_invariant(2, cap, weight, state, drop=weak)
    st = fine.FineState(2, state)
    assert st.busy[0] == 1 and st.k[0] == 2  # the guard of the decide step
    after = fine.fine_decide(2, cap, state, 0)
    assert not fine.fine_invariant(2, cap, weight, after, drop=weak)
    assert not fine.fine_invariant(2, cap, weight, state)  # not a state the invariant allows


@pytest.mark.contracts
def test_the_natural_potential_is_not_inductive(run_proofs: ModuleType) -> None:
    """OB-FINE-2: CrossHair refutes the natural potential, and the research note's
    counterexample (N=3, M=3, W=1) breaks it concretely: a finish makes it grow 5 -> 6."""
    run = run_proofs.run_target("proofs/mutants/potential_n3.py:potential_n3_finish_2", 30)
    assert run.status == "refuted", run
    potential = _load("proofs/mutants/potential_n3.py")
    c = [2, 2, 1]
    readers = [(1, 1, 2, 2), (1, 1, 2, 2), (0, 0, 0, 0)]  # busy, n, k (next slot), view
    assert potential._potential(3, c, readers) == 5
    assert potential._holds(3, 1, c, readers)
    after = [2, 2, 0]
    assert potential._potential(3, after, readers) == 6
    assert not potential._holds(3, 1, after, readers)


@pytest.mark.parametrize(
    ("returncode", "stdout", "stderr", "status"),
    [
        (
            0,
            "f.py:3: info: Confirmed over all paths.\nf.py:4: info: Confirmed over all paths.\n",
            "",
            "confirmed",
        ),
        (1, "f.py:3: error: false when calling f(1, 2) (which returns 3)\n", "", "refuted"),
        (
            1,
            "f.py:3: error: IndexError: list index out of range when calling f(0)\n",
            "",
            "refuted",
        ),
        (
            0,
            "f.py:3: info: Confirmed over all paths.\nf.py:4: info: Not confirmed.\n",
            "",
            "not-confirmed",
        ),
        (0, "", "", "not-confirmed"),
        (2, "", "Traceback (most recent call last):\nSyntaxError: bad\n", "error"),
    ],
)
def test_run_proofs_reads_crosshair_honestly(
    run_proofs: ModuleType, returncode: int, stdout: str, stderr: str, status: str
) -> None:
    """OB-FINE-1: only "Confirmed over all paths." for every condition counts as confirmed."""
    assert run_proofs.classify(returncode, stdout, stderr)[0] == status


def test_run_proofs_fails_a_confirmation_without_a_refuted_mutant(run_proofs: ModuleType) -> None:
    """OB-FINE-1: a confirmed obligation whose mutant is not refuted on the condition it
    names fails the run: not refuted, refuted on another line, timed out, or no mutant."""
    run, report = run_proofs.Run, run_proofs.Report
    target = "proofs/generated/mutants/queue_obligations_bad.py:remove_3"
    breaks = "RQ-ALL-6: exactly that request leaves; the others keep their order"
    lines = run_proofs.conditions(ROOT / target.rpartition(":")[0], "remove_3")[breaks]
    good = run("t", "confirmed", 1.0, "", "")
    entry = {"target": "t", "expect": "confirmed", "mutant": target, "breaks": breaks}

    def refuted_at(line: int, message: str = "false when calling remove_3(0, 1, 2, 0)") -> Any:
        return run(target, "refuted", 1.0, message, "", (report("f.py", line, "error", message),))

    assert run_proofs.verdict(entry, good, refuted_at(lines[0])) == []
    assert run_proofs.verdict(entry, good, refuted_at(lines[0] - 3))  # a precondition's line
    crash = "NameError: name 'x' is not defined when calling remove_3(0, 1, 2, 0)"
    assert run_proofs.verdict(entry, good, refuted_at(lines[0], crash))
    assert run_proofs.verdict(entry, good, run(target, "not-confirmed", 1.0, "timed out", ""))
    assert run_proofs.verdict(entry, good, run(target, "confirmed", 1.0, "", ""))
    assert run_proofs.verdict(entry, good, None)
    assert run_proofs.verdict({**entry, "breaks": None}, good, refuted_at(lines[0]))
    assert run_proofs.verdict(entry, run("t", "not-confirmed", 1.0, "", ""), None)


PLANTED = """
import icontract


@icontract.ensure(lambda x, result: result >= 0, "P-1: never negative")
@icontract.ensure(lambda x, result: result <= 10, "P-2: at most ten")
def correct(x: int) -> int:
    return 0


@icontract.ensure(lambda x, result: result >= 0, "P-1: never negative")
@icontract.ensure(lambda x, result: result <= 10, "P-2: at most ten")
def breaks_p1(x: int) -> int:
    return -1 if x > 100 else 0


@icontract.ensure(lambda x, result: result >= 0, "P-1: never negative")
@icontract.ensure(lambda x, result: result <= 10, "P-2: at most ten")
def crashes(x: int) -> int:
    return undefined_name if x > 100 else 0


@icontract.ensure(lambda x, result: result >= 0, "P-1: never negative")
@icontract.ensure(lambda x, result: result <= 10, "P-2: at most ten")
def breaks_p2(x: int) -> int:
    return 11 if x > 100 else 0
"""


@pytest.mark.contracts
def test_run_proofs_rejects_a_crashing_mutant_and_one_that_breaks_another_condition(
    run_proofs: ModuleType, tmp_path: Path
) -> None:
    """OB-FINE-1: planted mutants, each meant to break "P-1: never negative": one that does
    is accepted; one that raises NameError, one whose counterexample is to "P-2", and one
    whose file fails to import fail the run, and build/obligations.json says why."""
    planted = tmp_path / "planted.py"
    planted.write_text(PLANTED)
    unimportable = tmp_path / "unimportable.py"
    unimportable.write_text("import no_such_module_for_queueref\n" + PLANTED)
    mutants = {
        "intended": f"{planted}:breaks_p1",
        "crash": f"{planted}:crashes",
        "other": f"{planted}:breaks_p2",
        "import": f"{unimportable}:breaks_p1",
    }
    manifest = tmp_path / "planted.json"
    entries = [
        {"target": f"{planted}:correct", "model": "planted", "servers": None,
         "expect": "confirmed", "mutant": mutant, "breaks": "P-1: never negative"}
        for mutant in mutants.values()
    ]  # fmt: skip
    manifest.write_text(json.dumps(entries))
    output = tmp_path / "obligations.json"
    argv = ["--manifest", str(manifest), "--z3", "none", "--timeout", "10", "--output", str(output)]
    assert run_proofs.main(argv) == 1
    records = {r["mutant"]["name"]: r for r in json.loads(output.read_text())}
    assert {name: records[m]["ok"] for name, m in mutants.items()} == {
        "intended": True,
        "crash": False,
        "other": False,
        "import": False,
    }
    intended = records[mutants["intended"]]["mutant"]
    assert intended["refuted_as_intended"] and intended["refuted"] == "P-1: never negative"
    crash = records[mutants["crash"]]["mutant"]
    assert crash["status"] == "refuted" and not crash["refuted_as_intended"]
    assert "an error, not a counterexample: NameError" in crash["refuted"], crash
    other = records[mutants["other"]]["mutant"]
    assert other["status"] == "refuted" and not other["refuted_as_intended"]
    assert other["refuted"] == "another condition: P-2: at most ten", other
    failed_import = records[mutants["import"]]["mutant"]
    assert failed_import["status"] == "error" and not failed_import["refuted_as_intended"]
    assert records[mutants["import"]]["problems"], failed_import


def _walk_fine(
    servers: int, cap: int, weight: int, steps: int, rnd: random.Random
) -> list[tuple[Any, ...]]:
    state = fine.fine_initial(servers)
    states = [state]
    for _ in range(steps):
        st = fine.FineState(servers, state)
        p = rnd.randrange(servers)
        if rnd.random() < 0.2 and st.c[p] >= 1:
            state = fine.fine_finish(servers, state, p)
        elif st.busy[p] == 0:
            state = fine.fine_start(servers, cap, state, p, rnd.randint(1, weight))
        elif st.k[p] < servers:
            state = fine.fine_read(servers, state, p, st.k[p])
        else:
            state = fine.fine_decide(servers, cap, state, p)
        states.append(state)
    return states


def test_the_invariants_hold_on_concrete_runs_and_imply_the_bound() -> None:
    """OB-FINE-1, OB-WTC-1, OB-ATOMIC-1, OB-BOUND-1: on random runs of the step functions
    every state satisfies the invariant and the bound (the invariant is not too strong)."""
    rnd = random.Random(5)
    for trial in range(60):
        servers, cap, weight = 2 + trial % 3, trial % 5, 1 + trial % 3
        for state in _walk_fine(servers, cap, weight, 150, rnd):
            assert fine.fine_invariant(servers, cap, weight, state)
            assert fine.fine_bound(servers, cap, weight, state)
        state = wtc.reserve_initial(servers)
        for _ in range(150):
            rs = wtc.ReserveState(servers, state)
            p = rnd.randrange(servers)
            if rnd.random() < 0.2 and rs.c[p] - rs.n[p] >= 1:
                state = wtc.reserve_finish(servers, state, p)
            elif rs.busy[p] == 0:
                state = wtc.reserve_start(servers, state, p, rnd.randint(1, weight))
            elif rs.k[p] < servers:
                state = wtc.reserve_read(servers, state, p, rs.k[p])
            else:
                state = wtc.reserve_decide(servers, cap, state, p)
            assert wtc.reserve_invariant(servers, cap, weight, state)
            assert wtc.reserve_hard_cap(servers, cap, state)
        state = atomic.atomic_initial(servers)
        for _ in range(100):
            action, server = rnd.randrange(3), rnd.randrange(servers)
            state = atomic.atomic_step(
                servers, cap, weight, state, action, server, rnd.randint(1, weight)
            )
            assert atomic.atomic_invariant(servers, cap, weight, state)
            assert atomic.atomic_bound(servers, cap, weight, state)


@pytest.mark.contracts
def test_the_obligation_functions_check_their_contracts_on_concrete_runs() -> None:
    """OB-FINE-1: the generated obligations, called on reachable states, pass icontract's
    runtime checks -- the contracts are wired to the right parameters."""
    module = _load("proofs/generated/fine_n3.py")
    names = fine.fine_names(3)
    rnd = random.Random(7)
    calls = 0
    for state in _walk_fine(3, 3, 2, 300, rnd):
        st = fine.FineState(3, state)
        kwargs = dict(zip(names, state, strict=True))
        p = rnd.randrange(3)
        if st.busy[p] == 1 and st.k[p] < 3:
            function = getattr(module, f"fine_n3_read_{p}_{st.k[p]}")
        elif st.busy[p] == 1:
            function = getattr(module, f"fine_n3_decide_{p}")
        else:
            function = module.fine_n3_bound
        result = function(3, 2, **kwargs)
        assert fine.fine_invariant(3, 3, 2, result)
        calls += 1
    assert calls == 301
    # ... and they do check: a state outside the invariant is refused before the step.
    bad = dict(zip(names, fine.fine_initial(3), strict=True))
    bad["c0"] = 1  # a slot no check ever wrote
    with pytest.raises(icontract.ViolationError, match="OB-FINE-1"):
        module.fine_n3_bound(3, 2, **bad)


def test_ob_fine_1_z3_proves_every_step_and_refutes_every_dropped_conjunct() -> None:
    """OB-FINE-1, OB-WTC-1, OB-FINE-2: the z3 harness proves every step at N = 3 and finds
    a counterexample for every dropped conjunct at N = 2."""
    harness = _load("proofs/z3_inductive.py")
    assert harness.main(["--servers", "3", "--teeth"]) == 0
