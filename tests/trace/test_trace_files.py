"""Gaps in the tests of queueref.trace.files, found by `make mutation`.

Reading a trace is strict (ORC-TR-9): every error names the file, the line and the
field, and says in one short line what is wrong. These tests pin the exact error of
each kind of bad file or folder, the boundaries of the two length limits (the 1 MiB
line of ORC-TR-12, the 200 characters an error quotes of a bad value), and the merge
of a trace folder (ORC-TR-13). Every expected value is written out by hand.
"""

from __future__ import annotations

import dataclasses
import json
import tracemalloc
from pathlib import Path

import pytest

from queueref.oracle import TraceFormatError
from queueref.trace.events import AdmissionEvent, write_jsonl
from queueref.trace.files import read_trace, read_trace_folder

MIB = 1 << 20

#: One valid event line, without its newline.
ADMIT_LINE = '{"t":1.0,"server":0,"event":"admit","request_id":"a","n":1,"view":0}'


def _admit(t: float, server: int, rid: str) -> AdmissionEvent:
    return AdmissionEvent(t, server, "admit", rid, 1, view=0)


def _folder(tmp_path: Path, files: dict[int, list[AdmissionEvent]]) -> Path:
    """A trace folder holding `server-<i>.jsonl` for each key (empty files for [])."""
    folder = tmp_path / "trace"
    folder.mkdir()
    for index, events in files.items():
        write_jsonl(events, folder / f"server-{index}.jsonl")
    return folder


# -- ORC-TR-9: what an error quotes of a bad value --------------------------------------


@pytest.mark.guard
@pytest.mark.parametrize(
    ("key", "quoted"),
    [
        ("k" * 199, "k" * 199),
        ("k" * 200, "k" * 200),  # exactly the limit: quoted whole
        ("k" * 201, "k" * 200 + "...(cut)"),  # one more: cut to the limit and marked
        ("k" * 5000, "k" * 200 + "...(cut)"),
    ],
)
def test_an_unknown_field_is_quoted_up_to_200_characters(
    key: str, quoted: str, tmp_path: Path
) -> None:
    """ORC-TR-9: the error names an unknown field by its key, quoting at most 200
    characters of it and marking a cut with "...(cut)", so the error stays one short line."""
    path = tmp_path / "bad.jsonl"
    path.write_text(ADMIT_LINE[:-1] + f',"{key}":1}}\n', encoding="utf-8")
    with pytest.raises(TraceFormatError) as caught:
        read_trace(path)
    assert (caught.value.line, caught.value.field, caught.value.problem) == (
        1,
        quoted,
        "unknown field",
    )
    assert str(caught.value) == f"{path}:1: field {quoted!r}: unknown field"


@pytest.mark.guard
def test_a_schema_error_names_the_problem_without_its_requirement_prefix(
    tmp_path: Path,
) -> None:
    """ORC-TR-9, ADM-EV-1: a field that breaks the event schema is named, and the problem
    is the schema's own words without their "ADM-EV-1: " prefix."""
    path = tmp_path / "bad.jsonl"
    path.write_text(ADMIT_LINE + "\n" + ADMIT_LINE.replace('"n":1', '"n":0') + "\n")
    with pytest.raises(TraceFormatError) as caught:
        read_trace(path)
    assert (caught.value.line, caught.value.field, caught.value.problem) == (
        2,
        "n",
        "n must be an int >= 1, got 0",
    )
    assert str(caught.value) == f"{path}:2: field 'n': n must be an int >= 1, got 0"


# -- ORC-TR-12: the longest line -------------------------------------------------------


def _padded(length: int) -> str:
    """The valid event line padded with spaces (which JSON ignores) to `length` characters."""
    return ADMIT_LINE[:-1] + " " * (length - len(ADMIT_LINE)) + "}"


def test_a_line_of_exactly_1_mib_is_read(tmp_path: Path) -> None:
    """ORC-TR-12: only a line longer than 1 MiB is malformed: a last line of exactly
    1 MiB (no newline to count or not) is read as its event."""
    path = tmp_path / "big.jsonl"
    line = _padded(MIB)
    assert len(line.encode("utf-8")) == MIB
    path.write_text("\n" + line, encoding="utf-8")
    assert read_trace(path) == ([_admit(1.0, 0, "a")], [2])


@pytest.mark.guard
def test_a_line_of_1_mib_and_one_byte_is_malformed(tmp_path: Path) -> None:
    """ORC-TR-12, ORC-TR-9: one byte over 1 MiB is a malformed line, named by its number."""
    path = tmp_path / "big.jsonl"
    path.write_text(ADMIT_LINE + "\n" + _padded(MIB + 1), encoding="utf-8")
    with pytest.raises(TraceFormatError) as caught:
        read_trace(path)
    assert str(caught.value) == f"{path}:2: line longer than 1048576 bytes"


@pytest.mark.guard
def test_a_too_long_line_is_refused_after_reading_about_1_mib_of_it(tmp_path: Path) -> None:
    """ORC-TR-12: reading stops at the limit, so a line of 8 MiB costs about 1 MiB, not
    its length. CPython's bounded `readline` peaks at about twice what it returns (the
    chunks and their join); the bound, 3 MiB, is under what reading 2 MiB would take."""
    path = tmp_path / "long.jsonl"
    path.write_text(_padded(8 * MIB) + "\n", encoding="utf-8")
    tracemalloc.start()
    try:
        with pytest.raises(TraceFormatError, match="line longer than 1048576 bytes"):
            read_trace(path)
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 3 * MIB, peak


# -- ORC-TR-13: a trace folder ---------------------------------------------------------


def test_a_folder_of_two_servers_is_merged_in_order_of_t(tmp_path: Path) -> None:
    """ORC-TR-13: N is one more than the largest file index (2 here), and the events of
    both files come merged by `t`, each with its file and line."""
    folder = _folder(
        tmp_path,
        {0: [_admit(1.0, 0, "a"), _admit(3.0, 0, "c")], 1: [_admit(2.0, 1, "b")]},
    )
    read = read_trace_folder(folder)
    first, second = str(folder / "server-0.jsonl"), str(folder / "server-1.jsonl")
    assert read.num_servers == 2
    assert read.events == [_admit(1.0, 0, "a"), _admit(2.0, 1, "b"), _admit(3.0, 0, "c")]
    assert read.numbers == [1, 1, 2]
    assert read.files == [first, second, first]


@pytest.mark.guard
def test_a_missing_file_is_an_error_about_the_folder(tmp_path: Path) -> None:
    """ORC-TR-13: with N inferred (5, from server-4.jsonl), the missing files 1 and 3 are
    one error naming the folder itself (no line) and the field `server`."""
    folder = _folder(tmp_path, {0: [], 2: [], 4: []})
    with pytest.raises(TraceFormatError) as caught:
        read_trace_folder(folder)
    assert (caught.value.path, caught.value.line, caught.value.field) == (str(folder), 0, "server")
    assert str(caught.value) == (
        f"{folder}: field 'server': the trace files of servers [1, 3] are missing"
    )


@pytest.mark.guard
def test_a_missing_file_is_an_error_with_the_servers_given_too(tmp_path: Path) -> None:
    """ORC-TR-13: with N = 3 given (`--servers 3`), a folder of server-0.jsonl and
    server-2.jsonl lacks server 1's file: the same error naming the folder, not a silent
    read of two servers' events."""
    folder = _folder(tmp_path, {0: [_admit(1.0, 0, "a")], 2: [_admit(2.0, 2, "b")]})
    with pytest.raises(TraceFormatError) as caught:
        read_trace_folder(folder, 3)
    assert (caught.value.path, caught.value.line, caught.value.field) == (str(folder), 0, "server")
    assert str(caught.value) == (
        f"{folder}: field 'server': the trace files of servers [1] are missing"
    )


@pytest.mark.guard
def test_missing_last_files_are_an_error_with_the_servers_given(tmp_path: Path) -> None:
    """ORC-TR-13: with N = 4 given, a folder holding only server-0.jsonl and server-1.jsonl
    (its files a prefix of the four, the case `--servers` exists for) lacks the files of
    servers 2 and 3: the same error, not a read of two servers' events."""
    folder = _folder(tmp_path, {0: [_admit(1.0, 0, "a")], 1: [_admit(2.0, 1, "b")]})
    with pytest.raises(TraceFormatError) as caught:
        read_trace_folder(folder, 4)
    assert (caught.value.path, caught.value.line, caught.value.field) == (str(folder), 0, "server")
    assert str(caught.value) == (
        f"{folder}: field 'server': the trace files of servers [2, 3] are missing"
    )


@pytest.mark.guard
def test_a_file_beyond_the_servers_is_an_error_about_that_file(tmp_path: Path) -> None:
    """ORC-TR-13: with N = 4 given, server-6.jsonl (beyond N, though no file is of index
    exactly N) is an error naming that file (no line), N and the files expected."""
    folder = _folder(tmp_path, {0: [], 1: [], 2: [], 3: [], 6: [_admit(1.0, 6, "a")]})
    stray = folder / "server-6.jsonl"
    with pytest.raises(TraceFormatError) as caught:
        read_trace_folder(folder, 4)
    assert (caught.value.path, caught.value.line, caught.value.field) == (str(stray), 0, "server")
    assert str(caught.value) == (
        f"{stray}: field 'server': a trace file of server 6, but there are 4 servers "
        "(server-0.jsonl .. server-3.jsonl)"
    )


@pytest.mark.guard
def test_an_event_of_a_lower_server_in_a_file_is_refused(tmp_path: Path) -> None:
    """ORC-TR-13: an event of server 0 in the file of server 1 is an error at its file
    and line (not only a server above the file's)."""
    folder = _folder(tmp_path, {0: [], 1: [_admit(1.0, 1, "a"), _admit(2.0, 0, "b")]})
    with pytest.raises(TraceFormatError) as caught:
        read_trace_folder(folder)
    assert str(caught.value) == (
        f"{folder / 'server-1.jsonl'}:2: field 'server': server 0 in the file of server 1"
    )


def test_an_event_of_a_large_server_index_in_its_own_file_is_read(tmp_path: Path) -> None:
    """ORC-TR-13: server 300 in server-300.jsonl is in its own file: the index read from
    the event and the one read from the file name are equal numbers (not the same object)."""
    folder = _folder(tmp_path, {index: [] for index in range(301)})
    (folder / "server-300.jsonl").write_text(
        json.dumps({"t": 1.0, "server": 300, "event": "admit", "request_id": "a", "n": 1}) + "\n"
    )
    read = read_trace_folder(folder)
    assert (read.num_servers, read.numbers, read.files) == (
        301,
        [1],
        [str(folder / "server-300.jsonl")],
    )
    assert read.events == [AdmissionEvent(1.0, 300, "admit", "a", 1)]


def test_a_folder_read_is_an_immutable_value(tmp_path: Path) -> None:
    """ORC-TR-13: what was read cannot be rebound afterwards (the events, lines and files
    stay those of the folder)."""
    read = read_trace_folder(_folder(tmp_path, {0: [_admit(1.0, 0, "a")]}))
    with pytest.raises(dataclasses.FrozenInstanceError):
        read.num_servers = 2  # type: ignore[misc]
    assert read.num_servers == 1
