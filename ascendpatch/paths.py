"""The form of a relative path from a manifest or a patch header (pure: no file system).

Where such a path really leads (links resolved) is :class:`ascendpatch.store.root.Root`'s job,
which checks the form here first."""

from __future__ import annotations

from pathlib import PurePosixPath

from ascendpatch.errors import UnsafePathError


def check_relative(rel: str, *, origin: str) -> PurePosixPath:
    """Validate the *form* of a relative path: no absolute paths, no '..', no NUL."""
    if not rel or "\0" in rel or "\\" in rel:
        raise UnsafePathError(f"{origin}: path {rel!r} is not a plain relative path")
    pure = PurePosixPath(rel)
    if pure.is_absolute() or rel.startswith("~"):
        raise UnsafePathError(f"{origin}: absolute path {rel!r} is not allowed; use a path "
                              "relative to the distribution's install location")
    if any(part == ".." for part in pure.parts):
        raise UnsafePathError(f"{origin}: path {rel!r} contains '..' and would leave the target")
    return pure
