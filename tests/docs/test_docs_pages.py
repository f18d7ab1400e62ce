"""The user guide in `docs/` runs as written.

Each page's blocks are taken from the Markdown and run as a reader would: shell blocks
with bash in a fresh folder, with this checkout's `.venv/bin` first on the path (the
pages say to activate it), Python blocks with this interpreter. Output a page shows is
compared with what the commands print. The blocks that serve, load and run the
experiment take half a minute each, as does the fixture file run twice under pytest;
they are marked `slow` (`make soak`).
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from environment import clean_environment
from test_oracle_guide import run_pytest, write_vllm_shaped

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
VENV_BIN = Path(sys.executable).parent
PAGES = sorted(DOCS.glob("*.md"))
_toc = importlib.util.spec_from_file_location("spec_toc", ROOT / "tools" / "spec_toc.py")
assert _toc is not None and _toc.loader is not None
spec_toc = importlib.util.module_from_spec(_toc)
_toc.loader.exec_module(spec_toc)


def blocks(page: str, language: str) -> list[str]:
    """The fenced blocks of `docs/PAGE` in `language`, in order."""
    text = (DOCS / page).read_text(encoding="utf-8")
    return re.findall(rf"^```{language}\n(.*?)^```$", text, re.S | re.M)


def environment(cwd: Path) -> dict[str, str]:
    env = clean_environment(cwd)
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    return env


def shell(
    block: str, cwd: Path, timeout: float = 120, *, venv: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run a shell block as a reader pastes it (bash, stopping at the first failure)."""
    if venv and not (cwd / ".venv").exists():
        (cwd / ".venv").symlink_to(VENV_BIN.parent)  # the pages call .venv/bin/... too
    return subprocess.run(
        ["bash", "-e", "-c", block], cwd=cwd, env=environment(cwd),
        capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip


def python(block: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", block], cwd=cwd, env=environment(cwd),
        capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip


def broken_links(page: Path) -> list[str]:
    """Relative links of `page` to a file that does not exist, or to a missing heading."""
    problems = []
    for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target):
            continue  # http(s):, mailto:
        path, _, fragment = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            problems.append(f"{page.name}: {target}: no such file")
        elif fragment and file.suffix == ".md":
            text = file.read_text(encoding="utf-8")
            titles = re.findall(r"^#{1,6} (.+?)\s*$", text, re.M)
            if fragment not in {spec_toc.anchor(title) for title in titles}:
                problems.append(f"{page.name}: {target}: no such heading")
    return problems


def test_every_page_is_in_the_index_and_every_link_resolves() -> None:
    """The index lists every page; no page links to a missing file or heading."""
    index = (DOCS / "README.md").read_text(encoding="utf-8")
    assert [p.name for p in PAGES if f"]({p.name})" not in index and p.name != "README.md"] == []
    assert [problem for page in PAGES for problem in broken_links(page)] == []


def test_a_broken_link_is_found(tmp_path: Path) -> None:
    """The link check fails on a missing file and on a missing heading."""
    (tmp_path / "a.md").write_text("# A\n\n## Two words\n", encoding="utf-8")
    page = tmp_path / "b.md"
    page.write_text(
        "[ok](a.md#two-words) [gone](c.md) [bad](a.md#three) [web](https://x.org)\n",
        encoding="utf-8",
    )
    assert broken_links(page) == ["b.md: c.md: no such file", "b.md: a.md#three: no such heading"]


def test_bound_page(tmp_path: Path) -> None:
    """docs/bound.md: `queueref bound` for the page's deployment prints its 40."""
    (block,) = blocks("bound.md", "sh")
    done = shell(block, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "worst global count 40 = M + (N - 1) * min(M, W) = 10 + 3 * 10 (4x M)" in done.stdout


def test_oracle_page_three_lines_and_the_command(tmp_path: Path) -> None:
    """docs/oracle-in-your-project.md: the three lines pass; the CI command exits 0."""
    three = blocks("oracle-in-your-project.md", "python")[0]
    done = python(three, tmp_path)
    assert done.returncode == 0 and done.stdout == "", done.stderr
    command = blocks("oracle-in-your-project.md", "sh")[-1]
    done = shell(command, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "queueref:FCFSRequestQueue behaves like queueref's 'fcfs' reference queue" in done.stdout


@pytest.mark.slow  # two pytest runs, ~40 s; the README's fixture example runs in make test
def test_oracle_page_fixtures_pass_and_catch_the_bug_the_page_names(tmp_path: Path) -> None:
    """docs/oracle-in-your-project.md: the test file passes under pytest as written; with
    the page's broken prepend_requests, the fixture fails naming RQ-FCFS-4."""
    fixtures = blocks("oracle-in-your-project.md", "python")[1]
    run_pytest = blocks("oracle-in-your-project.md", "sh")[1]
    (tmp_path / "test_my_queue.py").write_text(fixtures, encoding="utf-8")
    done = shell(run_pytest, tmp_path, timeout=300)
    assert done.returncode == 0 and "2 passed" in done.stdout, done.stdout + done.stderr
    broken = fixtures.replace(
        "self._items.extendleft(requests)", "self._items = deque([*requests, *self._items])"
    )
    assert broken != fixtures
    (tmp_path / "test_my_queue.py").write_text(broken, encoding="utf-8")
    done = shell(run_pytest, tmp_path, timeout=300)
    assert done.returncode == 1 and "1 failed, 1 passed" in done.stdout
    assert "RQ-FCFS-4: prepend_requests puts the other queue's requests in front" in done.stdout


def test_oracle_page_vectors(tmp_path: Path) -> None:
    """docs/oracle-in-your-project.md: the vectors command writes the index it names."""
    vectors = blocks("oracle-in-your-project.md", "sh")[2]
    assert vectors.startswith("queueref vectors")
    done = shell(vectors, tmp_path)
    assert done.returncode == 0 and "all agree" in done.stdout, done.stderr
    assert (tmp_path / "build" / "vectors" / "index.json").is_file()


@pytest.mark.slow  # pytest on a vLLM-shaped package, twice
def test_oracle_page_vllm_example(tmp_path: Path) -> None:
    """docs/oracle-in-your-project.md: the vLLM example passes on the vLLM-shaped queues
    of tests/docs/test_readme.py (never vLLM's code) and names RQ-FCFS-4 when FCFS loses the
    reversal."""
    example = blocks("oracle-in-your-project.md", "python")[2]
    assert "from vllm.v1.core.sched.request_queue import" in example
    for broken, verdict in ((False, "3 passed"), (True, "2 failed, 1 passed")):
        write_vllm_shaped(tmp_path, broken=broken)
        (tmp_path / "test_request_queue_oracle.py").write_text(example, encoding="utf-8")
        output = run_pytest(tmp_path, "test_request_queue_oracle.py")
        assert verdict in output, output
    assert "RQ-FCFS-4: prepend_requests puts the other queue's requests in front" in output


def test_traces_page(tmp_path: Path) -> None:
    """docs/traces.md: the hand-written trace holds its bound; the recorder's records
    check; the vLLM sketch says it is one and names the release."""
    check, check_recorded = blocks("traces.md", "sh")
    done = shell(check, tmp_path)
    assert done.returncode == 0 and "bound: 4 -- holds" in done.stdout, done.stderr
    from_python, recorder, by_hand, sketch = blocks("traces.md", "python")
    done = python(from_python, tmp_path)
    assert (done.returncode, done.stdout) == (0, "2 2 True\n"), done.stderr
    (tmp_path / "trace_recorder.py").write_text(recorder, encoding="utf-8")
    done = python(by_hand, tmp_path)
    assert done.returncode == 0, done.stderr
    done = shell(check_recorded, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "my-trace: 5 events, 2 servers, cap M=3, W=2" in done.stdout
    assert "bound: 5 -- holds" in done.stdout and done.stdout.endswith("OK\n")
    ast.parse(sketch)
    assert sketch.startswith("# queueref_vllm_recorder.py -- a SKETCH against vLLM 0.30.0")


def test_traces_page_recorder_catches_a_misplaced_stamp(tmp_path: Path) -> None:
    """docs/traces.md: the same records with the departure stamped before the admission
    it ends are refused by the checker (the page's stamping rule matters)."""
    _, recorder, by_hand, _ = blocks("traces.md", "python")
    (tmp_path / "trace_recorder.py").write_text(recorder, encoding="utf-8")
    early = by_hand.replace(
        'server0.decided("a", n=1, view=0, admitted=True)',
        'server0.departed("a", t_before=time.monotonic())\n'
        'server0.decided("a", n=1, view=0, admitted=True)',
    )
    assert early != by_hand
    assert python(early, tmp_path).returncode == 0
    done = shell(blocks("traces.md", "sh")[1], tmp_path)
    assert done.returncode == 1 and "ORC-TR-4" in done.stdout


def test_when_the_bound_breaks_page_shows_what_check_trace_prints(tmp_path: Path) -> None:
    """docs/when-the-bound-breaks.md: the report shown is the one the command prints."""
    (command,) = blocks("when-the-bound-breaks.md", "sh")
    (shown,) = blocks("when-the-bound-breaks.md", "text")
    done = shell(command, tmp_path)
    assert done.returncode == 0  # `|| echo`: the page shows the exit status itself
    assert done.stdout == shown


@pytest.mark.slow
def test_oracle_page_install_from_a_path(tmp_path: Path) -> None:
    """docs/oracle-in-your-project.md: the install lines work on a copy of this checkout
    (the `git clone` line replaced by the copy) in a fresh virtual environment."""
    install = blocks("oracle-in-your-project.md", "sh")[0]
    assert install.startswith("git clone ")
    skip = shutil.ignore_patterns(".venv", "build", ".git", "__pycache__", "*_cache")
    shutil.copytree(ROOT, tmp_path / "queueref", ignore=skip)
    rest = install.split("\n", 1)[1]
    done = shell(rest + ".venv/bin/queueref bound --servers 4 --cap 10 --weight 16\n",
                 tmp_path, timeout=600, venv=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "worst global count 40" in done.stdout


@pytest.mark.slow
@pytest.mark.e2e
def test_experiment_page_one_command(tmp_path: Path) -> None:
    """docs/experiment.md: the one command prints a row per protocol, each within its
    bound, local at N * M = 40; the plot is written."""
    one, _step_by_step = blocks("experiment.md", "sh")
    done = shell(one, tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    rows = {
        line.split("|")[1].strip(): line for line in done.stdout.splitlines() if "| yes |" in line
    }
    assert set(rows) == {"local", "check-then-write", "write-then-check"}
    assert rows["local"].startswith("| local | 40 | 40 |")
    assert (tmp_path / "build" / "experiment.png").stat().st_size > 0


@pytest.mark.slow
@pytest.mark.e2e
def test_experiment_page_step_by_step_ends_by_itself(tmp_path: Path) -> None:
    """docs/experiment.md: serve, load, curl, wait, check-trace: ends by itself, OK."""
    _one, step_by_step = blocks("experiment.md", "sh")
    done = shell(step_by_step, tmp_path, timeout=180)
    assert done.returncode == 0, done.stderr
    assert "vllm:num_requests_running" in done.stdout
    assert "bound: 13 -- holds" in done.stdout and done.stdout.endswith("OK\n")


@pytest.mark.slow
@pytest.mark.e2e
def test_several_nodes_page_one_command(tmp_path: Path) -> None:
    """docs/several-nodes.md: two nodes on one Redis, each store protocol within its bound."""
    (one,) = blocks("several-nodes.md", "sh")
    done = shell(one, tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    for protocol, bound in (("slots", 6), ("snapshot", 6), ("script", 3)):
        (row,) = [line for line in done.stdout.splitlines() if line.startswith(f"| {protocol} |")]
        assert row.split("|")[6].strip() == str(bound) and "| yes |" in row
