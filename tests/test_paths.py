"""paths.open_regular, the one way ascendpatch opens a file it reads but does not own: what is
planted there (a FIFO, a device, a folder, a link) is refused before a byte is read, and
nothing waits on a writer that never comes."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path, PurePosixPath

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ascendpatch.paths import (
    FileTooLargeError,
    NotRegularFileError,
    below,
    open_regular,
    read_regular,
)


def test_a_regular_file_is_opened_for_blocking_reads(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"data")
    handle, info = open_regular(path)
    with handle:
        assert os.get_blocking(handle.fileno())
        assert handle.read() == b"data" and info.st_size == 4


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(NotRegularFileError) as caught:
        open_regular(fifo)  # a blocking open would hang this test
    assert caught.value.what == "a FIFO" and not caught.value.is_folder


@pytest.mark.parametrize(("path", "what"), [("/dev/null", "a device"), ("/", "a folder")])
def test_devices_and_folders_are_refused(path: str, what: str) -> None:
    with pytest.raises(NotRegularFileError, match=f"is {what}, not a regular file") as caught:
        open_regular(path)
    assert stat.S_IFMT(caught.value.mode) != stat.S_IFREG


def test_a_link_is_refused_only_when_links_are_not_followed(tmp_path: Path) -> None:
    (tmp_path / "real").write_bytes(b"x")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    handle, _ = open_regular(tmp_path / "link")
    handle.close()
    with pytest.raises(OSError) as caught:
        open_regular(tmp_path / "link", follow_links=False)
    assert caught.value.errno == errno.ELOOP


def test_a_refusal_leaves_no_descriptor_open(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    before = len(list(Path("/proc/self/fd").iterdir()))
    for _ in range(20):
        with pytest.raises(NotRegularFileError):
            open_regular(tmp_path / "fifo")
    assert len(list(Path("/proc/self/fd").iterdir())) == before


def test_a_small_file_read_under_a_large_bound_costs_its_own_size(tmp_path: Path) -> None:
    """read_regular reads what fstat reports (+1), not the bound: a 64 MiB bound allocated
    64 MiB for each of an audit's 300 small RECORD files. A file whose size the kernel does not
    report (procfs) is still read whole, and one over the bound still refused."""
    import tracemalloc

    small = tmp_path / "RECORD"
    small.write_bytes(b"a,sha256=x,1\n" * 10)
    tracemalloc.start()
    try:
        assert read_regular(small, 64 << 20) == small.read_bytes()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, peak
    status = read_regular("/proc/self/status", 1 << 20)
    assert status.startswith(b"Name:") and b"nonvoluntary_ctxt_switches" in status  # (its end)
    with pytest.raises(FileTooLargeError):
        read_regular(small, 100)


_PART = st.sampled_from(["a", "b", "ab", ".", "..", "é", "a b", "\udcff"])
_PATHS = st.builds(lambda root, parts: PurePosixPath(root, *parts),
                   st.sampled_from(["/", "", "a", "/a"]), st.lists(_PART, max_size=5))


@given(_PATHS, _PATHS)
def test_below_answers_as_pathlib_parents_and_relative_to_do(path: PurePosixPath,
                                                             top: PurePosixPath) -> None:
    """The path guard asks paths.below instead of ``top in path.parents`` (which builds a
    Path per parent): the same answer for any two paths, absolute, relative, with ``..``
    (kept by pathlib, as realpath's results never have), and the same remaining parts."""
    expected = path.relative_to(top).parts if path == top or top in path.parents else None
    assert below(path, top) == expected
