"""A write to the real home directory during the tests is an error (a pytest plugin).

conftest points HOME at a temp dir for every test (``tests.kit.isolate``), but that only
redirects code that asks for the home *after* the switch: a path built at import time
(``Path.home()``, ``os.path.expanduser("~")`` captured in a module constant), a hard-coded
``/root/...`` or a subprocess given the machine's environment still reaches the developer's
home. pre-commit's tests guard the one place their store chooses its folder
(``dont_write_to_home_directory``); this suite guards every write instead, with an audit hook
(PEP 578) on the events that create, change or remove a file: the write raises
``WroteToRealHome`` before anything is touched, and the test fails in teardown even if the code
under test swallowed that exception.

"Real home" is both ``$HOME`` as the test run started and the user's passwd entry (CI may start
with a fresh HOME). The one place there the tests may write is the real-wheel download cache,
``$ASCENDPATCH_TEST_CACHE`` (default ``~/.cache/ascendpatch-test``, ``tests.kit.wheels.CACHE``):
it is meant to outlive the run. Where the checkout, the venv running the tests or pytest's temp
folder lie under the home (a developer's ``~/src/ascendpatch``), they are not the home's state
and are not guarded either (bytecode caches, coverage data, the tests' temp dirs).
"""

from __future__ import annotations

import os
import pwd
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kit import REPO
from tests.kit.wheels import CACHE


class WroteToRealHome(AssertionError):
    """Raised by the audit hook; an AssertionError so ``except OSError`` does not hide it."""


_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
# Audit events that change the file system, with the positions of their path arguments.
_PATH_EVENTS: dict[str, tuple[int, ...]] = {
    "os.mkdir": (0,), "os.remove": (0,), "os.rmdir": (0,), "os.rename": (0, 1),
    "os.replace": (0, 1), "os.symlink": (1,), "os.link": (1,), "os.truncate": (0,),
    "os.chmod": (0,), "os.chown": (0,), "os.utime": (0,), "shutil.rmtree": (0,),
    "shutil.copyfile": (1,), "shutil.copytree": (1,), "shutil.move": (0, 1),
    "shutil.make_archive": (0,),
}


def _homes() -> tuple[str, ...]:
    found = {str(Path("~").expanduser()), pwd.getpwuid(os.getuid()).pw_dir}
    found |= {os.path.realpath(home) for home in found}
    return tuple(sorted(home for home in found if home not in ("", "/")))


class HomeGuard:
    """The guarded folders, the allowed exceptions, and the writes seen while armed."""

    def __init__(self, homes: tuple[str, ...], allowed: tuple[str, ...]) -> None:
        self.homes = homes
        self.allowed = tuple(sorted({_full(a) for a in allowed if a}))
        self.armed = False
        self.violations: list[str] = []

    def allow(self, folder: str | os.PathLike[str]) -> None:
        self.allowed = (*self.allowed, _full(folder))

    def guarded(self, path: object) -> bool:
        if not isinstance(path, str | bytes | os.PathLike):
            return False  # a file descriptor: its open was checked
        full = _full(path)
        return (any(_under(full, home) for home in self.homes)
                and not any(_under(full, ok) for ok in self.allowed))

    def __call__(self, event: str, args: tuple[object, ...]) -> None:
        if not self.armed:
            return
        if event == "open":
            flags = args[2] if len(args) > 2 else None
            mode = args[1] if len(args) > 1 else None
            writes = (isinstance(flags, int) and flags & _WRITE_FLAGS) or \
                (isinstance(mode, str) and any(c in mode for c in "wax+"))
            paths: tuple[object, ...] = (args[0],) if writes else ()
        else:
            paths = tuple(args[i] for i in _PATH_EVENTS.get(event, ()) if i < len(args))
        for path in paths:
            if self.guarded(path) and not (event == "os.mkdir" and self.leads_to_allowed(path)):
                self.refuse(event, path)

    def leads_to_allowed(self, path: object) -> bool:
        """``~/.cache`` may be created on the way to ``~/.cache/ascendpatch-test``."""
        if not isinstance(path, str | bytes | os.PathLike):
            return False
        full = _full(path)
        return any(_under(ok, full) for ok in self.allowed)

    def refuse(self, event: str, path: object) -> None:
        message = (f"{event} {path!r}: a test wrote to the real home directory; build the "
                   "path after tests.kit.isolate (from $HOME), or under tmp_path")
        self.violations.append(message)
        raise WroteToRealHome(message)


def _full(path: str | bytes | os.PathLike[str] | os.PathLike[bytes]) -> str:
    """Absolute and normalised, without touching the disk (this runs on every open)."""
    return os.path.normpath(Path(os.fsdecode(path)).absolute())


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


GUARD = HomeGuard(_homes(), (str(CACHE), str(REPO), sys.prefix))
sys.addaudithook(GUARD)


@pytest.fixture(scope="session", autouse=True)
def _guard_armed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HomeGuard]:
    """Armed for the whole session (module fixtures too), pytest's temp folder allowed."""
    GUARD.allow(tmp_path_factory.getbasetemp())
    GUARD.armed = True
    try:
        yield GUARD
    finally:
        GUARD.armed = False


@pytest.fixture(autouse=True)
def _no_write_to_real_home(_guard_armed: HomeGuard) -> Iterator[HomeGuard]:
    """Fails the test that wrote to the real home, even if its code caught WroteToRealHome."""
    start = len(_guard_armed.violations)
    yield _guard_armed
    seen = _guard_armed.violations[start:]
    del _guard_armed.violations[start:]
    if seen:
        pytest.fail("wrote to the real home directory:\n" + "\n".join(seen), pytrace=False)


def real_home_probe() -> Path:
    """A path in the real home no test may create (for the guard's own tests)."""
    return Path(GUARD.homes[0]) / ".ascendpatch-home-guard-probe"
