"""Every deliberately broken copy the checks must catch, as a named change to its original.

A broken copy is never written by hand: `proofs/generate.py` takes the original's source,
applies the changes listed here (each replaces one exact piece of text inside one named
function, and must match exactly once) and writes the result. When an original changes so
that a change no longer applies, generation fails with the change's name, and
`tests/verify/test_ob_proofs.py::test_generated_obligation_files_are_current` fails while a
generated file is stale -- so a broken copy cannot drift from what it breaks.

* `STEP_MUTANTS`: broken step functions of the kernels in `queueref.verify.inductive`
  (one module per model), copied into the
  mutant obligation files of `proofs/mutants/` (one list per model);
* `BROKEN_FILES`: whole broken copies of a file (a bug in some of its functions).

How to add an obligation with its mutant: CONTRIBUTING.md, "Proof obligations".
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: The inductive kernels, one module per model; a broken step is copied from the one that
#: defines its original.
INDUCTIVE = "reference/queueref/verify/inductive"
KERNELS = ("atomic", "fine", "write_then_check")


class ChangeDoesNotApply(ValueError):
    """A named change whose text is not found exactly once where it must apply."""


@dataclass(frozen=True)
class Change:
    """Replace `old` by `new` inside top-level `function` (exactly one occurrence)."""

    function: str
    bug: str  # what goes wrong, in a few words
    old: str
    new: str


@dataclass(frozen=True)
class BrokenFunction:
    """A copy of `original` (a function of a kernel in `INDUCTIVE`) named `name`, with
    `changes` applied."""

    name: str
    original: str
    changes: tuple[Change, ...]


@dataclass(frozen=True)
class BrokenFile:
    """A copy of `original` written to `output` with `changes` applied."""

    original: str
    output: str
    changes: tuple[Change, ...]
    purpose: str  # the check that must catch it


def function_span(source: str, function: str) -> tuple[int, int]:
    """The character offsets of top-level `def function` (decorators included)."""
    tree = ast.parse(source)
    starts = [0]
    for line in source.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == function:
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            end = node.end_lineno or node.lineno
            return starts[first - 1], starts[end]
    raise ChangeDoesNotApply(f"no top-level function {function!r}")


def apply(source: str, changes: tuple[Change, ...]) -> str:
    """`source` with every change applied; each must match exactly once in its function."""
    for change in changes:
        start, end = function_span(source, change.function)
        body = source[start:end]
        count = body.count(change.old)
        if count != 1:
            raise ChangeDoesNotApply(
                f"{change.function}: {change.bug!r}: {change.old!r} found {count} times"
            )
        source = source[:start] + body.replace(change.old, change.new) + source[end:]
    return source


def kernel_source(function: str) -> tuple[str, str]:
    """The kernel module (`fine`, ...) that defines top-level `function`, and its source."""
    for kernel in KERNELS:
        source = (ROOT / INDUCTIVE / f"{kernel}.py").read_text()
        if any(
            isinstance(node, ast.FunctionDef) and node.name == function
            for node in ast.parse(source).body
        ):
            return kernel, source
    raise ChangeDoesNotApply(f"no kernel in {INDUCTIVE} defines {function!r}")


def broken_function(broken: BrokenFunction) -> str:
    """The source of a broken step function: the original, renamed, its docstring naming
    the bug, the changes applied."""
    kernel, source = kernel_source(broken.original)
    start, end = function_span(source, broken.original)
    text = apply(source[start:end], broken.changes)
    node = ast.parse(text).body[0]
    assert isinstance(node, ast.FunctionDef)
    lines = text.splitlines()
    bugs = "; ".join(change.bug for change in broken.changes)
    doc = textwrap.wrap(
        f'"""BROKEN copy of inductive.{kernel}.{broken.original}: {bugs}."""',
        width=92,
        initial_indent="    ",
        subsequent_indent="    ",
        break_on_hyphens=False,
    )
    first_doc = node.body[0]
    if isinstance(first_doc, ast.Expr) and isinstance(first_doc.value, ast.Constant):
        end_doc = first_doc.end_lineno or first_doc.lineno
        lines[first_doc.lineno - 1 : end_doc] = doc
    end_sig = node.body[0].lineno - 1  # the lines before the docstring: the signature
    head = "\n".join(lines[:end_sig]).replace(f"def {broken.original}(", f"def {broken.name}(", 1)
    if max(len(line) for line in head.splitlines()) > 100:
        # The longer name no longer fits on one line: one parameter per line, as ruff would.
        params = [ast.get_source_segment(text, a) for a in node.args.args]
        returns = ast.get_source_segment(text, node.returns) if node.returns else "None"
        head = "\n".join(
            [f"def {broken.name}("] + [f"    {p}," for p in params] + [f") -> {returns}:"]
        )
    return head + "\n" + "\n".join(lines[end_sig:]) + "\n"


STEP_MUTANTS: dict[str, tuple[BrokenFunction, ...]] = {
    "atomic": (
        BrokenFunction(
            "_initial_stale_slot",
            "atomic_initial",
            (
                Change(
                    "atomic_initial",
                    "slot 0 starts at 1, a counter never cleared",
                    "return (0,) * (2 * servers)",
                    "return (1,) + (0,) * (2 * servers - 1)",
                ),
            ),
        ),
        BrokenFunction(
            "_step_async_gap",
            "atomic_step",
            (
                Change(
                    "atomic_step",
                    "a second check does not wait for the first one's write",
                    "# One check at a time per server: a second check waits for the write.\n"
                    "                if pend[q] == 0 and 1 <= n <= weight:",
                    "# BUG: a second check does not wait for the write.\n"
                    "                if 1 <= n <= weight:",
                ),
                Change(
                    "atomic_step",
                    "and adds to what is pending",
                    "pend[q] = n",
                    "pend[q] = pend[q] + n",
                ),
            ),
        ),
    ),
    "fine": (
        BrokenFunction(
            "_initial_stale_slot",
            "fine_initial",
            (
                Change(
                    "fine_initial",
                    "slot 0 starts at 1, a counter never cleared",
                    "    return st.pack()",
                    "    st.c[0] = 1\n    return st.pack()",
                ),
            ),
        ),
        BrokenFunction(
            "_start_skipping_slot_0",
            "fine_start",
            (
                Change(
                    "fine_start",
                    "the read loop starts at slot 1 (an off-by-one)",
                    "    st.G = st.G + 1\n",
                    "    st.G = st.G + 1\n    st.k[p] = 1\n",
                ),
            ),
        ),
        BrokenFunction(
            "_read_not_added",
            "fine_read",
            (
                Change(
                    "fine_read",
                    "the value read is not added to the view",
                    "accumulate(st.v[p], st.c[j])",
                    "accumulate(st.v[p], 0)",
                ),
            ),
        ),
        BrokenFunction(
            "_decide_forgetting_n",
            "fine_decide",
            (
                Change(
                    "fine_decide",
                    "the decision compares the view with the cap and forgets n",
                    "admits_check_then_write(st.v[p], st.n[p], cap)",
                    "admits_check_then_write(st.v[p], 0, cap)",
                ),
            ),
        ),
    ),
    "write-then-check": (
        BrokenFunction(
            "_initial_stale_slot",
            "reserve_initial",
            (
                Change(
                    "reserve_initial",
                    "slot 0 starts at 1, a counter never cleared",
                    "    return st.pack()",
                    "    st.c[0] = 1\n    return st.pack()",
                ),
            ),
        ),
        BrokenFunction(
            "_start_without_reserving",
            "reserve_start",
            (
                Change(
                    "reserve_start",
                    "the reservation is never written: this is check-then-write",
                    "    st.c[p] = st.c[p] + n\n",
                    "",
                ),
            ),
        ),
        BrokenFunction(
            "_read_not_added",
            "reserve_read",
            (
                Change(
                    "reserve_read",
                    "the value read is not added to the view",
                    "accumulate(st.v[p], st.c[j])",
                    "accumulate(st.v[p], 0)",
                ),
            ),
        ),
        BrokenFunction(
            "_decide_discounting_own",
            "reserve_decide",
            (
                Change(
                    "reserve_decide",
                    "the decision subtracts the own reservation from the view",
                    "keeps_reservation(st.v[p], cap)",
                    "keeps_reservation(st.v[p] - st.n[p], cap)",
                ),
            ),
        ),
    ),
}


BROKEN_FILES: tuple[BrokenFile, ...] = (
    BrokenFile(
        original="proofs/queue_obligations.py",
        output="proofs/generated/mutants/queue_obligations_bad.py",
        purpose="`tools/run_proofs.py`: CrossHair must refute each obligation here",
        changes=(
            Change(
                "fcfs_prepend_all_3_2",
                "the other queue lands in front in its own order",
                "fcfs_prepend_all((a, b, c), (x, y))",
                "fcfs_prepend_all((a, b, c), (y, x))",
            ),
            Change(
                "fcfs_double_reversal_3",
                "the gathered requests are reversed once more",
                "fcfs_prepend_all((old,), step_skipped)",
                "fcfs_prepend_all((old,), step_skipped[::-1])",
            ),
            Change(
                "fcfs_fifo_3",
                "the pops are recorded back to front",
                "out.append(request)",
                "out.insert(0, request)",
            ),
            Change(
                "priority_add_3",
                "the new key is appended, not put in key order",
                "return priority_add((a, b, c), k)",
                "return (a, b, c) + (k,)",
            ),
            Change(
                "priority_pop_order_3",
                "the pops are recorded largest key first",
                "out.append(request)",
                "out.insert(0, request)",
            ),
            Change(
                "remove_3",
                "the next request is removed instead",
                "remove(queue, queue[which])",
                "remove(queue, queue[(which + 1) % 3])",
            ),
        ),
    ),
    BrokenFile(
        original="reference/queueref/queues/semantics.py",
        output="proofs/generated/broken/queue_semantics_broken.py",
        purpose="`tests/queues/test_queue_semantics.py`: CrossHair must refute both",
        changes=(
            Change(
                "fcfs_prepend",
                "prepends at the back",
                "return (request,) + queue",
                "return queue + (request,)",
            ),
            Change(
                "remove",
                "drops a neighbour too",
                "queue[position + 1 :]",
                "queue[position + 2 :]",
            ),
        ),
    ),
)


def broken_file(broken: BrokenFile) -> str:
    """The broken copy: the original with a docstring naming the changes, then the changes."""
    source = (ROOT / broken.original).read_text()
    tree = ast.parse(source)
    first = tree.body[0]
    assert isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
    lines = source.splitlines(keepends=True)
    bugs = "".join(f"* `{c.function}`: {c.bug}\n" for c in broken.changes)
    doc = (
        f'"""BROKEN copy of `{broken.original}`, with these changes:\n\n{bugs}\n'
        "GENERATED by `proofs/generate.py` from the changes in `proofs/mutations.py` --\n"
        "edit those, not this file.\n\n"
        f"Checked by {broken.purpose}.\n"
        '"""\n'
    )
    end = first.end_lineno or first.lineno
    text = "".join(lines[: first.lineno - 1]) + doc + "".join(lines[end:])
    return apply(text, broken.changes)
