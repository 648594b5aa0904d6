"""The one path guard: a path from a manifest, a patch header or a state file never leaves its
tree, and no write follows a link out of it.

A :class:`Root` is one tree (a distribution's install location, the target, the Hugging Face
cache). It joins a relative name under itself, tells where an absolute path really lies
(links resolved), and opens a folder of its own without following any link on the way.
:class:`Roots` is what a store guards: the target and the other trees kinds write into, minus
the store's own state folder, which a path read from state may never reach.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Sequence
from pathlib import Path

from ascendpatch.errors import UnsafePathError
from ascendpatch.paths import below, check_relative
from ascendpatch.results import Hint, Phrase

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


class Root:
    """One tree; every method refuses (or reports) what would leave it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._real: Path | None = None

    def __repr__(self) -> str:
        return f"Root({str(self.path)!r})"

    @property
    def real(self) -> Path:
        """Where the tree really is (a link to the tree is fine: only links *in* it count).
        Resolved once per Root: a run's guards and writes then all measure against the same
        tree (a catalog's apply asked this ~4,000 times, each a walk of lstat calls)."""
        if self._real is None:
            self._real = Path(os.path.realpath(self.path))
        return self._real

    def join(self, rel: str, *, origin: str) -> Path:
        """``rel`` under the tree; refused when its form is not a plain relative path or it
        (or a symlink on the way) leads outside. ``origin`` names who asked, for the message."""
        return self.locate(rel, origin=origin)[0]

    def locate(self, rel: str, *, origin: str) -> tuple[Path, tuple[str, ...]]:
        """:meth:`join`, with the parts of where the path really lies below the tree (what
        :meth:`inside` says of it: links resolved once for both)."""
        pure = check_relative(rel, origin=origin)
        candidate = self.path.joinpath(*pure.parts)
        parts = self.inside(candidate)
        if parts is None:
            raise UnsafePathError(
                f"{origin}: path {rel!r} resolves to {_real(candidate)}, outside the target "
                f"{self.real} (a symlink leads out of the tree)", fix=link_fix(candidate))
        return candidate, parts

    def inside(self, path: Path) -> tuple[str, ...] | None:
        """The parts of where ``path`` really lies (every link resolved) below the tree; ``()``
        for the tree itself, None when it lies outside (or cannot be a path at all)."""
        try:
            real = _real(path)
        except ValueError:  # an embedded NUL: no file system path
            return None
        return below(real, self.real)

    def holds(self, path: Path) -> bool:
        """``path`` is the tree or really lies in it (following links, out of it too)."""
        return self.inside(path) is not None

    def relative(self, path: Path) -> str | None:
        """``path`` spelled relative to the tree, as written (links not resolved); None when
        it is not spelled under the tree."""
        try:
            return path.relative_to(self.path).as_posix()
        except ValueError:
            return None

    def open_dir(self, folder: Path, *, create: bool = False) -> int:
        """A descriptor of ``folder``, reached from the real tree one component at a time with
        ``O_NOFOLLOW``: a folder swapped for a symlink after a guard looked (a check-then-write
        race) is refused instead of followed out of the tree; so is a file or FIFO where a
        folder should be (``O_DIRECTORY`` fails before any open could block).
        ``create``: make missing folders on the way (as ``mkdir -p`` would)."""
        real_root = self.real
        parts = self.inside(folder)
        if parts is None:
            raise UnsafePathError(f"{folder} leads outside {real_root}; not followed")
        return _walk(real_root, parts, folder, create)


def open_unlinked(folder: Path, *, create: bool = False) -> int:
    """A descriptor of ``folder`` as spelled (made absolute, ``..`` folded, no link resolved),
    reached from ``/`` one component at a time with ``O_NOFOLLOW``: every link on the way is
    refused, so a folder another uid swaps for a link after a check looked is never followed
    (the walk of :meth:`Root.open_dir`, with ``/`` as the tree)."""
    return _walk(Path("/"), as_spelled(folder).parts[1:], folder, create)


def as_spelled(path: Path) -> Path:
    """``path`` made absolute with ``..`` folded by name, no link resolved: the folders
    :func:`open_unlinked` walks."""
    return Path(os.path.normpath(path.absolute()))


def _walk(top: Path, parts: Sequence[str], folder: Path, create: bool) -> int:
    fd = os.open(top, _DIR_FLAGS)
    try:
        for part in parts:
            nxt = _open_part(fd, part, folder, top, create)
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_part(fd: int, part: str, folder: Path, real_root: Path, create: bool) -> int:
    flags = _DIR_FLAGS | os.O_NOFOLLOW
    try:
        return os.open(part, flags, dir_fd=fd)
    except FileNotFoundError:
        if not create:
            raise
        with contextlib.suppress(FileExistsError):
            os.mkdir(part, 0o777, dir_fd=fd)
        return os.open(part, flags, dir_fd=fd)
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
            raise
        raise UnsafePathError(
            f"{folder}: {part!r} became a symlink or a file while ascendpatch was "
            f"writing; not followed, nothing outside {real_root} was touched",
            fix=Phrase("check who else writes the target, then run '", Hint(("status",)), "'"),
        ) from None


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path))


def link_fix(path: Path | str) -> str:
    """The fix of a refusal to follow a link out of the target: which link, and what to do
    (ascendpatch changes nothing outside the target, whatever the link says)."""
    import shlex  # (quoted: a path may hold spaces or $(...), and this line is copied)

    return (f"find the link with 'namei -l {shlex.quote(str(path))}'; to have ascendpatch "
            "change that file, replace the link with a copy of what it points to")


class Roots:
    """What a store guards: the target, then the other trees kinds write into (the Hugging
    Face cache); never the store's state folder, through a path read from state or a link."""

    def __init__(self, target: Path, others: Sequence[Path] = (), *, state: Path) -> None:
        self.target = Root(target)
        self.trees = (self.target, *(Root(p) for p in others))
        self.state = Root(state)

    def rel(self, path: Path) -> str:
        """How state files spell ``path``: relative to the target, else absolute."""
        rel = self.target.relative(path)
        return str(path) if rel is None else rel

    def guard(self, raw: object, *, origin: str) -> Path:
        """A path read from state: inside the target (or another tree a kind writes into),
        never inside the state folder, never through an outward link."""
        if not isinstance(raw, str):
            raise UnsafePathError(f"{origin}: path {raw!r} is not a string")
        path = Path(raw)
        if not path.is_absolute():
            return self.outside_state(self._join(self.target, raw, origin), origin)
        for tree in self.trees:
            rel = tree.relative(path)
            if rel is not None:
                return self.outside_state(self._join(tree, rel, origin), origin)
        raise UnsafePathError(f"{origin}: path {raw!r} lies outside the target "
                              f"{self.target.path}")

    def _join(self, tree: Root, rel: str, origin: str) -> Path:
        """``rel`` under ``tree``; one whose links lead into another tree of the store is
        accepted too, as :meth:`destination` writes through such a link (so a journal the
        store wrote is always one it can read back)."""
        try:
            return tree.join(rel, origin=origin)
        except UnsafePathError:
            candidate = tree.path.joinpath(*check_relative(rel, origin=origin).parts)
            if any(other.inside(candidate) for other in self.trees):  # (): a tree itself
                return candidate
            raise

    def outside_state(self, path: Path, origin: str) -> Path:
        if self.state.holds(path):
            raise UnsafePathError(f"{origin}: path {path} is inside ascendpatch's own state "
                                  f"folder {self.state.path}")
        return path

    def destination(self, path: Path) -> Path:
        """Where the bytes for ``path`` go: an in-tree symlink stays a link (its target is
        written); one leading out of every tree, or into the state folder, is refused."""
        if not path.is_symlink():
            return path
        real = _real(path)
        origin = f"symlink {path}"
        if not any(tree.inside(real) for tree in self.trees):  # () : a tree itself, refused
            raise UnsafePathError(f"{origin} leads to {real}, outside the target; not followed",
                                  fix=link_fix(path))
        return self.outside_state(real, origin)

    def root_of(self, path: Path) -> Path:
        """The tree ``path`` is spelled in (or, for a resolved link destination, really lies
        in); a write walks from there without following links."""
        for tree in self.trees:
            if below(path, tree.path):  # (): the tree itself, not a parent
                return tree.path
        for tree in self.trees:
            if below(path, tree.real):
                return tree.path
        return path.parent
