"""paths.open_regular, the one way ascendpatch opens a file it reads but does not own: what is
planted there (a FIFO, a device, a folder, a link) is refused before a byte is read, and
nothing waits on a writer that never comes."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest

from ascendpatch.paths import NotRegularFileError, open_regular


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
