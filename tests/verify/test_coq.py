"""The Coq runner (`tools/run_coq.py`) and what it claims: each of its checks can fail.

The full run is `make proofs-coq` (part of `make verify`). Here: the forbidden-word scan,
`Print Assumptions` on a theorem that uses an axiom, the error locator, a mutant refuted at
the lemma the manifest names (OB-BOUND-1), and the mutants the runner must NOT count as
refuted -- one that fails by a syntax error, one whose substitution does not apply, one
that fails in another lemma, one that fails in a statement; the manifest itself; the trace
mapping of the Coq theorems; and `make coq` never skipping silently.
"""

from __future__ import annotations

import importlib.util
import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load(relative: str) -> ModuleType:
    path = ROOT / relative
    name = "coq_" + path.stem
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def run_coq() -> ModuleType:
    return _load("tools/run_coq.py")


@pytest.fixture(scope="module")
def built(run_coq: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Model.v and Bound.v compiled once, as the runner compiles them."""
    directory = tmp_path_factory.mktemp("coq-src")
    sources = {
        name: (ROOT / "proofs" / "coq" / name).read_text() for name in ("Model.v", "Bound.v")
    }
    run_coq.copy_sources(directory, sources)
    results = run_coq.compile_in_order(directory, ["Model.v", "Bound.v"])
    assert all(r.ok for r in results), [r.output for r in results]
    return directory


def _mutant(
    run_coq: ModuleType,
    built: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    spec: dict[str, str],
) -> dict[str, object]:
    monkeypatch.setattr(run_coq, "BUILD", tmp_path)
    sources = {
        name: (ROOT / "proofs" / "coq" / name).read_text() for name in ("Model.v", "Bound.v")
    }
    deps = run_coq.dependencies(sources)
    order = run_coq.build_order(deps)
    result: dict[str, object] = run_coq.run_mutant(spec, sources, deps, order, built, {})
    return result


DECISION = {
    "file": "proofs/coq/Model.v",
    "replace": "Definition admits (M view n : nat) : bool := view + n <=? M.",
    "by": "Definition admits (M view n : nat) : bool := view + n <=? M + 1.",
}


def test_ob_bound_1_mutant_fails_at_the_named_proof_step(
    run_coq: ModuleType, built: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OB-BOUND-1: deciding with view + n <= M + 1 breaks the proof inside inv_admit."""
    spec = {**DECISION, "name": "decision", "fails_in": "Bound.v:inv_admit"}
    result = _mutant(run_coq, built, tmp_path, monkeypatch, spec)
    assert result["status"] == "refuted", result
    assert str(result["where"]).startswith("Bound.v:") and str(result["where"]).endswith(
        ":inv_admit"
    )


def test_a_mutant_failing_in_another_lemma_is_not_refuted(
    run_coq: ModuleType, built: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = {**DECISION, "name": "decision-elsewhere", "fails_in": "Bound.v:inv_read"}
    result = _mutant(run_coq, built, tmp_path, monkeypatch, spec)
    assert result["status"] == "not-refuted"
    assert "expected Bound.v:inv_read" in str(result["detail"])


def test_a_mutant_failing_by_a_syntax_error_is_not_refuted(
    run_coq: ModuleType, built: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = {
        "name": "syntax",
        "file": "proofs/coq/Model.v",
        "replace": "Definition admits (M view n : nat) : bool := view + n <=? M.",
        "by": "Definition admits (M view n : nat) : bool := view + n <=? M +.",
        "fails_in": "Model.v:admits",
    }
    result = _mutant(run_coq, built, tmp_path, monkeypatch, spec)
    assert result["status"] == "not-refuted"
    assert "not a proof-step error" in str(result["detail"])
    assert "Syntax error" in str(result["message"])


def test_a_mutant_whose_substitution_does_not_apply_is_not_refuted(
    run_coq: ModuleType, built: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = {
        "name": "absent",
        "file": "proofs/coq/Model.v",
        "replace": "Definition admits (M view n : nat) : bool := view + n <? M.",
        "by": "Definition admits (M view n : nat) : bool := true.",
        "fails_in": "Bound.v:inv_admit",
    }
    result = _mutant(run_coq, built, tmp_path, monkeypatch, spec)
    assert result["status"] == "bad-mutant"
    assert "applies 0 times" in str(result["detail"])
    # Twice is as bad as never: the substitution must name one place.
    with pytest.raises(ValueError, match="applies 2 times"):
        run_coq.apply_substitution("a b a", "a", "c")


def test_a_failure_in_a_statement_is_not_a_proof_step(run_coq: ModuleType) -> None:
    source = "Lemma foo : forall n, n = n.\nProof.\n  reflexivity.\nQed.\n"
    in_statement = run_coq.CoqError("X.v", 1, "The term n has type nat while it is expected")
    in_proof = run_coq.CoqError("X.v", 3, "Tactic failure: Cannot find witness.")
    assert "statement" in run_coq.judge_mutant(in_statement, {"X.v": source}, "X.v:foo")
    assert run_coq.judge_mutant(in_proof, {"X.v": source}, "X.v:foo") is None
    assert "compiled" in run_coq.judge_mutant(None, {"X.v": source}, "X.v:foo")


def test_parse_error_reads_coqc_locations(run_coq: ModuleType) -> None:
    output = (
        'File "./Bound.v", line 344, characters 10-12:\n'
        "Error: Tactic failure:  Cannot find witness.\n\n"
    )
    error = run_coq.parse_error(output)
    assert error == run_coq.CoqError("Bound.v", 344, "Tactic failure: Cannot find witness.")
    assert run_coq.parse_error("nothing located here") is None


def test_forbidden_words_are_found_outside_comments_only(run_coq: ModuleType) -> None:
    source = (
        "(* Admitted, admit and Axiom in a comment (* nested: Parameter *) are fine *)\n"
        'Definition s := "Axiom in a string".\n'
        "Definition admits := 1.\n"
        "Lemma a : True. Proof. admit. Admitted.\n"
        "Axiom ax : False.\n"
        "Parameter p : nat.\n"
        "Conjecture c : False.\n"
    )
    found = run_coq.forbidden_uses("X.v", source)
    assert found == [
        "X.v:4: admit",
        "X.v:4: Admitted",
        "X.v:5: Axiom",
        "X.v:6: Parameter",
        "X.v:7: Conjecture",
    ]
    for path in sorted((ROOT / "proofs" / "coq").glob("*.v")):
        assert run_coq.forbidden_uses(path.name, path.read_text()) == []


def test_print_assumptions_reports_an_axiom(run_coq: ModuleType, tmp_path: Path) -> None:
    """The runner's 'closed' is Coq's own answer, and it is not always closed."""
    (tmp_path / "Ax.v").write_text(
        "Axiom ax : False.\nTheorem uses_it : 1 = 2.\nProof. destruct ax. Qed.\n"
        "Theorem free : 1 = 1.\nProof. reflexivity. Qed.\n"
    )
    assert run_coq.compile_file(tmp_path, "Ax.v").ok
    assert run_coq.print_assumptions(tmp_path, "Ax.v", "free") == run_coq.CLOSED
    said = run_coq.print_assumptions(tmp_path, "Ax.v", "uses_it")
    assert said != run_coq.CLOSED and "ax : False" in said


def test_build_order_puts_the_model_first(run_coq: ModuleType) -> None:
    sources = {p.name: p.read_text() for p in (ROOT / "proofs" / "coq").glob("*.v")}
    order = run_coq.build_order(run_coq.dependencies(sources))
    assert order.index("Model.v") < order.index("Bound.v") < order.index("Atomic.v")
    with pytest.raises(ValueError, match="cycle"):
        run_coq.build_order({"A.v": {"B.v"}, "B.v": {"A.v"}})


def test_manifest_pairs_every_theorem_with_an_applicable_mutant(run_coq: ModuleType) -> None:
    """OB-BOUND-1, OB-ATOMIC-1, OB-MODEL-1: each manifest theorem exists, expects 'closed'
    and has a mutant whose substitution applies once and names an existing lemma."""
    entries = run_coq.load_manifest()
    assert {"OB-BOUND-1", "OB-ATOMIC-1", "OB-MODEL-1"} <= {e["requirement"] for e in entries}
    for entry in entries:
        assert entry["expect"] == "closed"
        assert entry["mutants"], entry["theorem"]
        for spec in entry["mutants"]:
            text = (ROOT / spec["file"]).read_text()
            assert text.count(spec["replace"]) == 1, spec["name"]
            where, _, lemma = spec["fails_in"].partition(":")
            if where != "Traces.v":  # generated by tools/coq_traces.py
                target = (ROOT / "proofs" / "coq" / where).read_text()
                assert f" {lemma} " in target or f" {lemma}\n" in target, spec["name"]


def test_trace_counts_coq_theorems_as_proofs(tmp_path: Path) -> None:
    """OB-BOUND-1 and OB-ATOMIC-1 are proved_by their Coq theorems; a manifest entry naming
    a theorem its file does not state is a trace failure."""
    trace = _load("tools/trace.py")
    proved, problems = trace.coq_proofs()
    assert problems == []
    assert "proofs/coq/Bound.v:ob_bound_1" in proved["OB-BOUND-1"]
    assert "proofs/coq/Atomic.v:atomic_bound" in proved["OB-ATOMIC-1"]
    bad = tmp_path / "theorems.json"
    bad.write_text(
        json.dumps(
            [
                {
                    "file": "proofs/coq/Bound.v",
                    "theorem": "no_such_theorem",
                    "requirement": "OB-BOUND-1",
                    "expect": "closed",
                }
            ]
        )
    )
    proved, problems = trace.coq_proofs(bad)
    assert not proved and "no_such_theorem" in problems[0]


def _fake_bin(directory: Path, name: str, script: str) -> None:
    path = directory / name
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


@pytest.mark.parametrize("uid", ["1000", "0"])
def test_make_coq_installs_or_fails_never_skips(tmp_path: Path, uid: str) -> None:
    """Without coqc: as root `make coq` runs `apt-get install -y coq` (here a stand-in that
    fails, so the step fails); otherwise one line on stderr and a failing step."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _fake_bin(bin_dir, "id", f"echo {uid}\n")
    log = tmp_path / "apt.log"
    _fake_bin(bin_dir, "apt-get", f'echo "$@" >> {log}\nexit 100\n')
    make = subprocess.run(["sh", "-c", "command -v make"], capture_output=True, text=True)
    env = {"PATH": str(bin_dir), "HOME": os.environ.get("HOME", "/tmp")}
    done = subprocess.run(
        [make.stdout.strip(), "--no-print-directory", "-C", str(ROOT), "coq"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode != 0
    if uid == "0":
        assert "install -y coq" in log.read_text()
    else:
        assert not log.exists()
        assert "coqc not found and not root" in done.stderr
