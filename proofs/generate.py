"""Write the CrossHair obligation files of the admission models, and their mutants.

An obligation takes the whole state of a fixed number of servers as scalar `int` arguments
(CrossHair makes each one a symbolic integer), assumes the inductive invariant, takes one
step with the step functions of `queueref.verify.inductive` (one module per model) and
must re-establish the
invariant and the bound. Spelling out 35 to 89 parameters by hand would hide the few lines
that matter, so this script writes them; the files it writes are committed, and
`tests/verify/test_ob_proofs.py` checks that they are what this script writes.

For every obligation it also writes a mutant: the same obligation over a deliberately
broken step (an off-by-one read loop, a decision that forgets n, a second check before the
first is recorded, ...). `tools/run_proofs.py` requires CrossHair to refute every mutant,
which shows that the check of the obligation is able to fail.

Usage: `python proofs/generate.py` (writes the files), `python proofs/generate.py --check`
(lists the files that differ from what it would write; exit 1 if any).
"""

from __future__ import annotations

import ast
import json
import sys
import textwrap
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "reference"))

from queueref.admission import protocol  # noqa: E402
from queueref.verify.inductive import atomic, common, fine, write_then_check  # noqa: E402
from queueref.verify.inductive.atomic import atomic_names  # noqa: E402
from queueref.verify.inductive.fine import fine_names  # noqa: E402
from queueref.verify.inductive.write_then_check import reserve_names  # noqa: E402

sys.path.insert(0, str(ROOT / "proofs"))
from mutations import (  # noqa: E402
    BROKEN_FILES,
    STEP_MUTANTS,
    broken_file,
    broken_function,
)


def _defined_names(module: ModuleType) -> set[str]:
    """The public names a module defines at its top level (not those it imports)."""
    tree = ast.parse(Path(str(module.__file__)).read_text())
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                elements = target.elts if isinstance(target, ast.Tuple) else [target]
                names |= {t.id for t in elements if isinstance(t, ast.Name)}
    return {name for name in names if not name.startswith("_")}


ATOMIC_SERVERS = range(1, 9)
FINE_SERVERS = (2, 3, 4)
RESERVE_SERVERS = (2, 3)


@dataclass(frozen=True)
class Obligation:
    """One generated function: its name, what it checks, and its bodies."""

    name: str
    doc: str
    guard: str  # an icontract condition over the parameters, "" for none
    guard_doc: str
    params: list[str]  # after M and W
    body: str  # expression computing the post-state (the correct step)
    mutant_body: str  # the same with the deliberate bug
    mutant_doc: str
    #: False: the step must re-establish the invariant. True: the invariant must imply the
    #: bound (the body returns the state as it is; the mutant claims a cap one lower).
    checks_bound: bool = False


@dataclass(frozen=True)
class Family:
    """A file of obligations: a model at a fixed N."""

    module: str  # proofs/generated/<module>.py, mutants in proofs/generated/mutants/<module>_bad.py
    model: str  # manifest "model"
    servers: int
    requirement: str  # the OB- ID of the invariant
    title: str
    imports: list[str]
    invariant: str  # function name: (N, M, W, values) -> bool
    bound: str  # expression over `result`, `M`, `W`
    bound_doc: str
    bound_requirement: str
    names: list[str]  # state parameter names
    names_function: str  # the kernel function that lists them
    obligations: list[Obligation]


def _bound_obligation(prefix: str, requirement: str, names: list[str]) -> Obligation:
    return Obligation(
        name=f"{prefix}_bound",
        doc=f"{requirement}: every state the invariant admits is within the bound.",
        guard="",
        guard_doc="",
        params=names,
        body="STATE",
        mutant_body="STATE",
        mutant_doc="claims the bound of a cap one lower, which the invariant must not imply",
        checks_bound=True,
    )


def atomic_families() -> list[Family]:
    obligations_by_n = []
    for n in ATOMIC_SERVERS:
        names = atomic_names(n)
        obligations = [
            Obligation(
                name=f"atomic_n{n}_init",
                doc="OB-ATOMIC-1: the initial state (all slots 0, nothing pending) is in.",
                guard="",
                guard_doc="",
                params=[],
                body="atomic_initial(N)",
                mutant_body="_initial_stale_slot(N)",
                mutant_doc="slot 0 starts at 1: a stale counter left by a previous run",
            ),
            Obligation(
                name=f"atomic_n{n}_step",
                doc=(
                    "OB-ATOMIC-1: any step of any server -- a snapshot check of weight n, "
                    "the write of a passed check, the finish of n requests -- keeps the "
                    "invariant."
                ),
                guard="",
                guard_doc="",
                params=names + ["action", "server", "n"],
                body="atomic_step(N, M, W, STATE, action, server, n)",
                mutant_body="_step_async_gap(N, M, W, STATE, action, server, n)",
                mutant_doc=(
                    "a server may pass a second check before the first is written "
                    "(an await between check and record, OB-BROKEN-1)"
                ),
            ),
        ]
        obligations.append(_bound_obligation(f"atomic_n{n}", "OB-ATOMIC-1", names))
        obligations_by_n.append(
            Family(
                module="atomic",
                model="atomic",
                servers=n,
                requirement="OB-ATOMIC-1",
                title="atomic-snapshot check-then-write",
                imports=["atomic_bound", "atomic_initial", "atomic_invariant", "atomic_step"],
                invariant="atomic_invariant",
                bound="atomic_bound(N, M, W, result)",
                bound_doc="the global count is within M + (N-1)*min(M, W)",
                bound_requirement="OB-BOUND-1",
                names=names,
                names_function="atomic_names",
                obligations=obligations,
            )
        )
    return obligations_by_n


def fine_family(n: int) -> Family:
    names = fine_names(n)
    obligations = [
        Obligation(
            name=f"fine_n{n}_init",
            doc="OB-FINE-1: the initial state (no check ever started, all slots 0) is in.",
            guard="",
            guard_doc="",
            params=[],
            body="fine_initial(N)",
            mutant_body="_initial_stale_slot(N)",
            mutant_doc="slot 0 starts at 1: a stale counter left by a previous run",
        )
    ]
    for p in range(n):
        obligations.append(
            Obligation(
                name=f"fine_n{n}_start_{p}",
                doc=f"OB-FINE-1: idle server {p} starts a check of weight n (1 <= n <= W).",
                guard=f"lambda W, b{p}, n: (b{p} == 0) & (n >= 1) & (n <= W)",
                guard_doc=f"server {p} is idle and 1 <= n <= W",
                params=names + ["n"],
                body=f"fine_start(N, M, STATE, {p}, n)",
                mutant_body=f"_start_skipping_slot_0(N, M, STATE, {p}, n)",
                mutant_doc="the read loop starts at slot 1 (an off-by-one)",
            )
        )
        for j in range(n):
            obligations.append(
                Obligation(
                    name=f"fine_n{n}_read_{p}_{j}",
                    doc=f"OB-FINE-1: server {p} reads slot {j}, its next one.",
                    guard=f"lambda b{p}, k{p}: (b{p} == 1) & (k{p} == {j})",
                    guard_doc=f"server {p} is checking and slot {j} is the next it reads",
                    params=names,
                    body=f"fine_read(N, STATE, {p}, {j})",
                    mutant_body=f"_read_not_added(N, STATE, {p}, {j})",
                    mutant_doc="the value read is not added to the view",
                )
            )
        obligations.append(
            Obligation(
                name=f"fine_n{n}_decide_{p}",
                doc=(
                    f"OB-FINE-1: server {p} has read every slot and admits (writing its slot) "
                    "or rejects."
                ),
                guard=f"lambda b{p}, k{p}: (b{p} == 1) & (k{p} == N)",
                guard_doc=f"server {p} is checking and has read every slot",
                params=names,
                body=f"fine_decide(N, M, STATE, {p})",
                mutant_body=f"_decide_forgetting_n(N, M, STATE, {p})",
                mutant_doc="the decision compares the view with the cap and forgets n",
            )
        )
        obligations.append(
            Obligation(
                name=f"fine_n{n}_finish_{p}",
                doc=f"OB-FINE-1: one of server {p}'s requests finishes, at any time.",
                guard=f"lambda c{p}: c{p} >= 1",
                guard_doc=f"server {p} has a request",
                params=names,
                body=f"fine_finish(N, STATE, {p})",
                mutant_body=f"fine_finish(N, STATE, {(p + 1) % n})",
                mutant_doc="the finish is recorded in the next server's slot",
            )
        )
    obligations.append(_bound_obligation(f"fine_n{n}", "OB-FINE-1", names))
    return Family(
        module=f"fine_n{n}",
        model="fine",
        servers=n,
        requirement="OB-FINE-1",
        title="fine-grained check-then-write",
        imports=[
            "fine_bound",
            "fine_decide",
            "fine_finish",
            "fine_initial",
            "fine_invariant",
            "fine_read",
            "fine_start",
        ],
        invariant="fine_invariant",
        bound="fine_bound(N, M, W, result)",
        bound_doc="the global count is within M + (N-1)*min(M, W)",
        bound_requirement="OB-BOUND-1",
        names=names,
        names_function="fine_names",
        obligations=obligations,
    )


def reserve_family(n: int) -> Family:
    names = reserve_names(n)
    obligations = [
        Obligation(
            name=f"wtc_n{n}_init",
            doc="OB-WTC-1: the initial state (no check ever started, all slots 0) is in.",
            guard="",
            guard_doc="",
            params=[],
            body="reserve_initial(N)",
            mutant_body="_initial_stale_slot(N)",
            mutant_doc="slot 0 starts at 1: a stale counter left by a previous run",
        )
    ]
    for p in range(n):
        obligations.append(
            Obligation(
                name=f"wtc_n{n}_start_{p}",
                doc=(
                    f"OB-WTC-1: idle server {p} reserves n (1 <= n <= W) in its slot and "
                    "starts reading."
                ),
                guard=f"lambda W, b{p}, n: (b{p} == 0) & (n >= 1) & (n <= W)",
                guard_doc=f"server {p} is idle and 1 <= n <= W",
                params=names + ["n"],
                body=f"reserve_start(N, STATE, {p}, n)",
                mutant_body=f"_start_without_reserving(N, STATE, {p}, n)",
                mutant_doc="the reservation is never written: this is check-then-write",
            )
        )
        for j in range(n):
            obligations.append(
                Obligation(
                    name=f"wtc_n{n}_read_{p}_{j}",
                    doc=f"OB-WTC-1: server {p} reads slot {j}, its next one.",
                    guard=f"lambda b{p}, k{p}: (b{p} == 1) & (k{p} == {j})",
                    guard_doc=f"server {p} is checking and slot {j} is the next it reads",
                    params=names,
                    body=f"reserve_read(N, STATE, {p}, {j})",
                    mutant_body=f"_read_not_added(N, STATE, {p}, {j})",
                    mutant_doc="the value read is not added to the view",
                )
            )
        obligations.append(
            Obligation(
                name=f"wtc_n{n}_decide_{p}",
                doc=(
                    f"OB-WTC-1: server {p} has read every slot and keeps its reservation or "
                    "writes it back."
                ),
                guard=f"lambda b{p}, k{p}: (b{p} == 1) & (k{p} == N)",
                guard_doc=f"server {p} is checking and has read every slot",
                params=names,
                body=f"reserve_decide(N, M, STATE, {p})",
                mutant_body=f"_decide_discounting_own(N, M, STATE, {p})",
                mutant_doc="the decision subtracts the own reservation from the view",
            )
        )
        obligations.append(
            Obligation(
                name=f"wtc_n{n}_finish_{p}",
                doc=f"OB-WTC-1: one of server {p}'s admitted requests finishes, at any time.",
                guard=f"lambda c{p}, n{p}: c{p} - n{p} >= 1",
                guard_doc=f"server {p} has an admitted request",
                params=names,
                body=f"reserve_finish(N, STATE, {p})",
                mutant_body=f"reserve_finish(N, STATE, {(p + 1) % n})",
                mutant_doc="the finish is recorded in the next server's slot",
            )
        )
    obligations.append(_bound_obligation(f"wtc_n{n}", "OB-WTC-1", names))
    return Family(
        module=f"wtc_n{n}",
        model="write-then-check",
        servers=n,
        requirement="OB-WTC-1",
        title="write-then-check (reservation)",
        imports=[
            "reserve_decide",
            "reserve_finish",
            "reserve_hard_cap",
            "reserve_initial",
            "reserve_invariant",
            "reserve_read",
            "reserve_start",
        ],
        invariant="reserve_invariant",
        bound="reserve_hard_cap(N, M, result)",
        bound_doc="the admitted global count is at most M",
        bound_requirement="OB-WTC-1",
        names=names,
        names_function="reserve_names",
        obligations=obligations,
    )


HEADER = '''# fmt: off
# (laid out by the generator: one line per group of state variables)
"""{kind}: {title}, {servers_text}.

GENERATED by `proofs/generate.py` -- edit that script, not this file.

{explanation}
Run one with `PYTHONPATH=reference crosshair check --analysis_kind=icontract
--report_all {path}:LINE` (LINE: the line of its first
decorator), or all of them with `python tools/run_proofs.py`.
"""

{imports}'''


def _explanation(family: Family, mutant: bool) -> str:
    if mutant:
        return (
            "Deliberately broken copies of the obligations of "
            f"`proofs/generated/{family.module}.py`: each step\n"
            "has one bug (named in its docstring), and CrossHair must refute every one of "
            "them.\nA check that cannot fail proves nothing.\n"
        )
    return (
        f"Each function is one CrossHair obligation for {family.requirement}: it assumes the "
        "inductive\ninvariant on a state given as scalar ints, takes one step, and must "
        "re-establish the\n"
        f"invariant and {family.bound_requirement} ({family.bound_doc}).\n"
        "Confirmed over all paths, each is a proof for every cap M >= 0, weight W >= 1 and "
        "state\nat its N.\n"
    )


#: The generated signatures start a new line at these state variables.
def _breaks(names: list[str]) -> set[str]:
    out = {"G", "action"}
    for name in names:
        if name[:-1] in ("ld", "al", "sl") and name.endswith("0"):
            out.add(name)
        if name.startswith("c") and name[1:].isdigit():
            out.add(name)
        if name.startswith(("r", "a", "s")) and name.endswith("_0") and name[1].isdigit():
            out.add(name)
        if name == "p0":
            out.add(name)
    return out


def _layout(params: list[str], breaks: set[str], indent: str = "    ") -> list[str]:
    lines: list[str] = []
    current = ""
    for param in params:
        item = f"{param}: int,"
        if current and (param in breaks or len(indent + current + " " + item) > 96):
            lines.append(indent + current)
            current = ""
        current = item if not current else current + " " + item
    if current:
        lines.append(indent + current)
    return lines


def _docstring(doc: str) -> str:
    if len(doc) <= 90:
        return f'    """{doc}"""'
    wrapped = textwrap.wrap(doc, width=92, initial_indent="    ", subsequent_indent="    ")
    return '    """' + "\n".join(wrapped).lstrip() + '\n    """'


def _function(family: Family, ob: Obligation, mutant: bool) -> str:
    req = family.requirement
    n = str(family.servers)
    is_init = ob.name.endswith("_init")
    params = ["M", "W"] + ([] if is_init else ob.params)
    names_const = f"NAMES_{n}"
    lines = [
        "",
        "",
        f'@icontract.require(lambda M, W: (M >= 0) & (W >= 1), "{req}: cap >= 0, weights >= 1")',
    ]
    if not is_init:
        lines.append(
            f'@icontract.require(BEFORE_{n}, "{req}: the invariant holds before the step")'
        )
    if ob.guard:
        lines.append(f'@icontract.require(\n    {ob.guard},\n    "{req}: {ob.guard_doc}",\n)')
    if ob.checks_bound:
        bound = family.bound
        if mutant:
            bound = bound.replace("N, M, ", "N, M - 1, ")
        lines.append(
            f"@icontract.ensure(\n    lambda M, W, result: {bound},\n"
            f'    "{family.bound_requirement}: {family.bound_doc}",\n)'
        )
    else:
        lines.append(
            f"@icontract.ensure(\n    lambda M, W, result: {family.invariant}({n}, M, W, result),\n"
            f'    "{req}: the invariant holds after the step",\n)'
        )
    lines.append(f"def {ob.name}(")
    lines += _layout(params, _breaks(params))
    lines.append(") -> tuple[Any, ...]:")
    if mutant:
        doc = f"MUTANT of {ob.name}: {ob.mutant_doc}."
        body = ob.mutant_body
    else:
        doc = ob.doc
        body = ob.body
    lines.append(_docstring(doc))
    body = body.replace("STATE", f"pack_state({names_const}, locals())")
    lines.append(f"    return {body}")
    text = "\n".join(lines)
    return text.replace("(N, ", f"({n}, ").replace("(N)", f"({n})").replace("== N)", f"== {n})")


def render(family_list: list[Family], mutant: bool) -> str:
    first = family_list[0]
    servers = [f.servers for f in family_list]
    servers_text = f"N = {servers[0]}" if len(servers) == 1 else f"N = {servers[0]}..{servers[-1]}"
    folder = "proofs/generated/mutants" if mutant else "proofs/generated"
    path = f"{folder}/{first.module}{'_bad' if mutant else ''}.py"
    body = "\n"
    for family in family_list:
        n = family.servers
        body += (
            f"NAMES_{n} = {first.names_function}({n})\n"
            f"BEFORE_{n} = state_condition({family.invariant}, {n}, NAMES_{n})\n"
        )
    if mutant:
        # The broken step functions: each is a copy of its original with a named change.
        for broken in STEP_MUTANTS[first.model]:
            body += "\n\n" + broken_function(broken)
    for family in family_list:
        for ob in family.obligations:
            body += _function(family, ob, mutant) + "\n"
    text = HEADER.format(
        kind="Proof obligations" if not mutant else "MUTANTS of the proof obligations",
        title=first.title,
        servers_text=servers_text,
        explanation=_explanation(first, mutant),
        path=path,
        imports=import_block(body),
    )
    return text + body


#: Where the names a generated file may use come from (isort order of the modules).
IMPORTABLE: dict[str, set[str]] = {
    "collections.abc": {"Sequence"},
    "functools": {"partial"},
    "typing": {"Any"},
    **{
        kernel.__name__: _defined_names(kernel)
        for kernel in (atomic, common, fine, write_then_check)
    },
    "queueref.admission.protocol": _defined_names(protocol),
}


def import_block(body: str) -> str:
    """The imports of a generated file: exactly the names its body uses, in isort's layout."""
    used = {node.id for node in ast.walk(ast.parse(body)) if isinstance(node, ast.Name)}
    lines = ["from __future__ import annotations", ""]
    stdlib = [
        f"from {module} import {', '.join(sorted(names & used))}"
        for module, names in IMPORTABLE.items()
        if not module.startswith("queueref") and names & used
    ]
    lines += stdlib + ([""] if stdlib else []) + ["import icontract", ""]
    for module, names in sorted(IMPORTABLE.items()):  # isort: modules in name order
        if module.startswith("queueref") and names & used:
            lines.append(f"from {module} import (")
            lines += [f"    {name}," for name in sorted(names & used, key=_import_key)]
            lines.append(")")
    return "\n".join(lines) + "\n"


def _import_key(name: str) -> tuple[int, str]:
    # ruff/isort order: CONSTANTS, then Classes, then functions
    if name.isupper():
        return (0, name)
    if name[0].isupper():
        return (1, name)
    return (2, name)


@dataclass(frozen=True)
class Output:
    path: Path
    text: str


def outputs() -> list[Output]:
    """Every generated file (obligations, mutants, manifests), with its content."""
    out: list[Output] = []
    atomic = atomic_families()
    groups: list[list[Family]] = [atomic]
    groups += [[fine_family(n)] for n in FINE_SERVERS]
    groups += [[reserve_family(n)] for n in RESERVE_SERVERS]
    manifests: dict[str, list[dict[str, object]]] = {
        "atomic": [],
        "fine": [],
        "write-then-check": [],
    }
    for group in groups:
        first = group[0]
        base = ROOT / "proofs" / "generated"
        out.append(Output(base / f"{first.module}.py", render(group, mutant=False)))
        out.append(Output(base / "mutants" / f"{first.module}_bad.py", render(group, True)))
        for family in group:
            for ob in family.obligations:
                manifests[family.model].append(
                    {
                        "target": f"proofs/generated/{family.module}.py:{ob.name}",
                        "model": family.model,
                        "servers": family.servers,
                        "expect": "confirmed",
                        "mutant": f"proofs/generated/mutants/{family.module}_bad.py:{ob.name}",
                        "breaks": _postcondition(family, ob.checks_bound),
                    }
                )
    for family in (fine_family(2), reserve_family(2)):
        weak = f"proofs/generated/mutants/{family.module}_weak.py"
        out.append(Output(ROOT / weak, render_weak(family)))
        prefix = family.module.split("_")[0]
        for conjunct, step in DROPS[family.model].items():
            manifests[family.model].append(
                {
                    "target": f"{weak}:{prefix}_n2_{step}_without_{conjunct}",
                    "model": family.model,
                    "servers": 2,
                    "expect": "refuted",
                    "mutant": None,
                    "breaks": _postcondition(family, step == "bound"),
                }
            )
    manifests["queues"] = queue_manifest()
    for broken in BROKEN_FILES:
        out.append(Output(ROOT / broken.output, broken_file(broken)))
    for model, entries in manifests.items():
        entries += EXTRA_MANIFEST_ENTRIES.get(model, [])
        text = json.dumps(entries, indent=1) + "\n"
        out.append(Output(ROOT / "proofs" / "generated" / "manifests" / f"{model}.json", text))
    return out


#: Obligations that must be refuted. Each `*_without_*` drops one conjunct of an invariant
#: at N = 2 (in the assumption and in the conclusion), so that the rest is not inductive;
#: the step named is one that CrossHair refutes. `potential_n3` is the natural potential.
DROPS: dict[str, dict[str, str]] = {
    "fine": {
        "type": "read_0_0",
        "rank": "start_0",
        "view": "decide_0",
        "read": "start_0",
        "own": "decide_0",
        "order": "decide_0",
        "drift": "decide_0",
        "lead": "bound",
        "stale": "decide_0",
    },
    "write-then-check": {
        "type": "start_0",
        "rank": "start_0",
        "view": "decide_0",
        "lead": "bound",
        "reader": "decide_0",
    },
}

EXTRA_MANIFEST_ENTRIES: dict[str, list[dict[str, object]]] = {
    "fine": [
        {
            "target": "proofs/mutants/potential_n3.py:potential_n3_finish_2",
            "model": "fine",
            "servers": 3,
            "expect": "refuted",
            "mutant": None,
            "breaks": "the natural potential is within the bound after the step",
        }
    ]
}


def _postcondition(family: Family, checks_bound: bool) -> str:
    """The description of the one `ensure` of an obligation: what its mutant must break."""
    if checks_bound:
        return f"{family.bound_requirement}: {family.bound_doc}"
    return f"{family.requirement}: the invariant holds after the step"


def queue_manifest() -> list[dict[str, object]]:
    """`proofs/generated/manifests/queues.json`: each obligation of `proofs/queue_obligations.py`,
    whose broken copy must break its one postcondition."""
    tree = ast.parse((ROOT / "proofs" / "queue_obligations.py").read_text())
    entries: list[dict[str, object]] = []
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        ensures = [
            d.args[1].value
            for d in node.decorator_list
            if isinstance(d, ast.Call)
            and isinstance(d.func, ast.Attribute)
            and d.func.attr == "ensure"
            and isinstance(d.args[1], ast.Constant)
        ]
        assert len(ensures) == 1, f"{node.name}: one postcondition per obligation"
        entries.append(
            {
                "target": f"proofs/queue_obligations.py:{node.name}",
                "model": "queue",
                "servers": None,
                "expect": "confirmed",
                "mutant": f"proofs/generated/mutants/queue_obligations_bad.py:{node.name}",
                "breaks": ensures[0],
            }
        )
    return entries


WEAK_HEADER = '''# fmt: off
"""Weakened invariants: {title}, N = {servers}.

Every obligation here MUST be refuted.

GENERATED by `proofs/generate.py` -- edit that script, not this file.

Each function is an obligation of `proofs/generated/{module}.py` with one conjunct of
{requirement}'s invariant left out (in the assumption and in the conclusion). CrossHair
refutes each: no conjunct can be dropped, the invariant is not stronger than it needs to be
by accident. `tests/verify/test_ob_proofs.py` runs one of them and reads the counterexample.
"""

{imports}'''


def render_weak(family: Family) -> str:
    by_name = {ob.name: ob for ob in family.obligations}
    n = family.servers
    text = f"\nNAMES_{n} = {family.names_function}({n})\n"
    prefix = family.module.split("_")[0]
    for conjunct, step in DROPS[family.model].items():
        ob = by_name[f"{prefix}_n{n}_{step}"]
        weak = f"WITHOUT_{conjunct.upper()}"
        text += (
            f"\n{weak} = partial({family.invariant}, drop=({conjunct!r},))\n"
            f"BEFORE_{conjunct.upper()} = state_condition({weak}, {n}, NAMES_{n})\n"
        )
        weakened = replace(ob, doc=f"WEAKENED (no {conjunct!r} conjunct): {ob.doc}")
        body = _function(family, weakened, mutant=False)
        body = body.replace(f"BEFORE_{n}", f"BEFORE_{conjunct.upper()}")
        body = body.replace(
            f"{family.invariant}({n}, M, W, result)",
            f"{family.invariant}({n}, M, W, result, drop=({conjunct!r},))",
        )
        body = body.replace(f"def {ob.name}(", f"def {ob.name}_without_{conjunct}(")
        text += body + "\n"
    header = WEAK_HEADER.format(
        title=family.title,
        servers=family.servers,
        module=family.module,
        requirement=family.requirement,
        imports=import_block(text),
    )
    return header + text


def write_all(check_only: bool = False) -> list[Path]:
    """Write every generated file; with `check_only`, return those that differ instead."""
    import tempfile

    stale: list[Path] = []
    with tempfile.TemporaryDirectory() as tmp:
        staged: list[tuple[Path, Path]] = []
        for output in outputs():
            staged_path = Path(tmp) / output.path.relative_to(ROOT)
            staged_path.parent.mkdir(parents=True, exist_ok=True)
            staged_path.write_text(output.text)
            staged.append((output.path, staged_path))
        for final, staged_path in staged:
            text = staged_path.read_text()
            if not final.exists() or final.read_text() != text:
                stale.append(final)
                if not check_only:
                    final.parent.mkdir(parents=True, exist_ok=True)
                    final.write_text(text)
    return stale


def main() -> int:
    check_only = "--check" in sys.argv[1:]
    stale = write_all(check_only=check_only)
    for path in stale:
        print(("stale: " if check_only else "wrote: ") + str(path.relative_to(ROOT)))
    return 1 if (check_only and stale) else 0


if __name__ == "__main__":
    sys.exit(main())
