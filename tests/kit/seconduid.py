"""A real second user for the tests: uid/gid 65534 (nobody) through ``setpriv``.

A test that proves "another user cannot read this" runs the real reader (``cat``, ascendpatch
itself) as uid 65534 with every supplementary group dropped, on files in a folder that user can
reach (pytest's own temp folder is root's 0700): :func:`open_folder`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from tests.kit import REPO

NOBODY = 65534


def require() -> str:
    """The setpriv executable; skips the test when not root or setpriv is missing."""
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv is None:
        pytest.skip("needs root and setpriv (util-linux) for a real second uid")
    return setpriv


def argv(*command: str | Path) -> list[str]:
    """``command`` run as uid/gid 65534 with no supplementary groups."""
    return [require(), f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
            *map(str, command)]


def run(*command: str | Path, env: dict[str, str] | None = None) \
        -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv(*command), capture_output=True, text=True, timeout=120,
                          check=False, stdin=subprocess.DEVNULL, env=env)


def python() -> str:
    """An interpreter of this Python's version that uid 65534 can run (this venv's may link
    into root's 0700 home); skips the test when there is none."""
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    for candidate in (sys.executable, os.path.realpath(sys.executable),
                      f"/usr/bin/python{version}", f"/usr/local/bin/python{version}"):
        said = run(candidate, "-c", "import sys; print('%d.%d' % sys.version_info[:2])")
        if said.returncode == 0 and said.stdout.strip() == version:
            return candidate
    pytest.skip(f"uid {NOBODY} can run no python{version} on this machine")


def ascendpatch(*args: str | Path, home: Path) -> subprocess.CompletedProcess[str]:
    """The real CLI (this checkout, this venv's packages) as uid 65534, with ``home`` (which
    that user can write) as its home."""
    paths = [str(REPO), *sysconfig.get_paths()["purelib"].split(os.pathsep),
             sysconfig.get_paths()["platlib"], *sys.path]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "ASCENDPATCH_LOG_DIR": str(home / "logs"),
           "ASCENDPATCH_CACHE": str(home / "cache"), "PYTHONDONTWRITEBYTECODE": "1",
           "PYTHONPATH": os.pathsep.join(dict.fromkeys(p for p in paths if p))}
    interpreter = python()
    probe = run(interpreter, "-c", "import ascendpatch, packaging, yaml", env=env)
    if probe.returncode != 0:  # e.g. a venv or checkout under a folder only root can enter
        pytest.skip(f"uid {NOBODY} cannot import ascendpatch and its packages from this "
                    f"checkout and venv: {probe.stderr.strip().splitlines()[-1:]}")
    return run(interpreter, "-m", "ascendpatch", *args, env=env)


@contextlib.contextmanager
def open_folder(prefix: str = "ascendpatch-uid-") -> Iterator[Path]:
    """A fresh folder (0755, owned by root) that uid 65534 can walk into; removed after."""
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    try:
        folder.chmod(0o755)
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def home_for_nobody(parent: Path) -> Path:
    """A home folder under ``parent`` that uid 65534 owns."""
    home = parent / "nobody-home"
    home.mkdir()
    os.chown(home, NOBODY, NOBODY)
    return home


def modes(paths: Sequence[Path]) -> list[str]:
    return [oct(p.stat().st_mode & 0o7777) for p in paths]
