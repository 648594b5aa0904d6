"""Filling the test cache (``tests.kit.wheels.CACHE``) when several test processes share it.

The whole suite runs in two pytest-xdist workers (``.ci/run``), beside the Python 3.10 tier
and the background prebuild, and each may reach for the same wheel or venv at once. A file or
folder in the cache is filled under one lock per cache folder (``fcntl.flock``, released by the
kernel when a process dies), into a temp name, and renamed into place: a reader never sees a
half-written file, a killed fill leaves nothing a later run trusts, and the second process to
ask waits and then finds it done instead of filling it again.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created when missing) for the ``with`` block."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def complete(folder: Path, build: Callable[[Path], None]) -> Path:
    """``folder`` when it exists, else built by ``build(partial)`` under its parent's lock and
    renamed into place (``partial`` is ``folder`` with ``.partial`` added: a killed build's
    leftovers there are removed first)."""
    if folder.is_dir():
        return folder
    with locked(folder.parent / ".lock"):
        if folder.is_dir():  # another process built it while this one waited
            return folder
        partial = folder.with_name(folder.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        build(partial)
        partial.rename(folder)
    return folder


def downloaded(folder: Path, pattern: str, *requirements: str, deps: bool = False) -> list[Path]:
    """The files of ``folder`` matching ``pattern``, else the wheels of ``requirements`` from
    the index (``pip download --only-binary :all:``, ``--no-deps`` unless ``deps``) first.

    The download goes to a temp folder beside ``folder`` and each file is renamed in, the one
    matching ``pattern`` last, all under ``folder``'s lock: a file there is always whole, and a
    folder with a match holds everything that download brought."""
    with locked(folder / ".lock"):
        found = sorted(folder.glob(pattern))
        if found:
            return found
        with tempfile.TemporaryDirectory(dir=folder, prefix=".download-") as temp:
            subprocess.run([sys.executable, "-m", "pip", "download", "-q",
                            "--disable-pip-version-check", "--only-binary", ":all:",
                            *([] if deps else ["--no-deps"]), "-d", temp, *requirements],
                           check=True)
            fetched = sorted(Path(temp).iterdir(), key=lambda p: p.match(pattern))
            for path in fetched:
                os.replace(path, folder / path.name)
        found = sorted(folder.glob(pattern))
    assert found, f"pip download {' '.join(requirements)} brought no {pattern} into {folder}"
    return found
