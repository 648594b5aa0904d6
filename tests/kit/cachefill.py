"""Filling the test cache (``tests.kit.wheels.CACHE``) when several test processes share it.

The whole suite runs in two pytest-xdist workers (``.ci/run``), beside the background
prebuild, and each may reach for the same wheel or venv at once. A file or folder in the cache
is filled under a lock (``fcntl.flock`` on a ``.lock`` file: a download under its own folder's,
a built folder under its parent's, released by the kernel when a process dies), into a temp
name, and renamed into place: a reader never sees a half-written file, a killed fill leaves
nothing a later run trusts, and the second process to ask waits and then finds it done instead
of filling it again. The locks are not re-entrant: taking one this process already holds is an
error, not a hang.

``building_the_checkout`` is the lock of another shared thing: a build of the checkout itself
(``pip install``/``pip wheel`` of it, ``install.sh``, ``bundle``), which setuptools does in the
checkout's ``build/`` and ``ascendpatch.egg-info``: two at once delete each other's files.
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

_HELD: set[Path] = set()  # the locks this process holds (flock on a second open would hang)


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created when missing) for the ``with`` block."""
    key = path.absolute()
    if key in _HELD:
        raise RuntimeError(f"{path} is already locked by this process: a fill inside a fill "
                           "of the same folder would wait for itself")
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        _HELD.add(key)
        try:
            yield
        finally:
            _HELD.discard(key)
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextlib.contextmanager
def building_the_checkout() -> Iterator[None]:
    """Hold the lock every test takes around a build of the checkout (see the docstring)."""
    from tests.kit.wheels import CACHE

    with locked(CACHE / ".checkout-build.lock"):
        yield


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

    The download goes to a temp folder inside ``folder`` (one a killed download left is
    removed first) and each file is renamed in, the one matching ``pattern`` last, under
    ``folder``'s lock: a file there is always whole, and a folder with a match holds
    everything that download brought (so a match found without the lock is enough)."""
    found = sorted(folder.glob(pattern))
    if found:
        return found
    with locked(folder / ".lock"):
        found = sorted(folder.glob(pattern))
        if found:  # another process downloaded it while this one waited
            return found
        for stale in folder.glob(".download-*"):
            shutil.rmtree(stale, ignore_errors=True)
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
