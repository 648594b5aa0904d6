"""A small file system of the test's own, for disk-full and read-only faults (as root)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kit import unmount


def skip_saying(reason: str) -> None:
    sys.stderr.write(f"SKIP: {reason}\n")  # the reason is printed, not only recorded
    pytest.skip(reason)


@contextlib.contextmanager
def small_fs(where: Path, size_kb: int = 1024) -> Iterator[Path]:
    """A small file system of its own at ``where``: tmpfs, else a loop-mounted ext4 file."""
    if os.geteuid() != 0:
        skip_saying("mounting a small file system needs root (disk-full and read-only faults)")
    where.mkdir()
    tmpfs = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kb}k,mode=0755",
                            "tmpfs", str(where)], capture_output=True, text=True, check=False)
    if tmpfs.returncode != 0:
        image = where.with_suffix(".img")
        with image.open("wb") as handle:
            handle.truncate(max(size_kb, 2048) * 1024)
        made = subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], capture_output=True,
                              text=True, check=False)
        loop = subprocess.run(["mount", "-o", "loop", str(image), str(where)],
                              capture_output=True, text=True, check=False)
        if made.returncode != 0 or loop.returncode != 0:
            skip_saying(f"cannot mount a tmpfs ({tmpfs.stderr.strip()}) nor a loop file "
                  f"({(made.stderr or loop.stderr).strip()})")
    try:
        yield where
    finally:
        unmount(where)
