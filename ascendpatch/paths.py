"""The path guard: a path from a manifest or a patch header never leaves its target tree."""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

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


def safe_join(root: Path, rel: str, *, origin: str) -> Path:
    """Join ``rel`` under ``root``; refuse when it (or a symlink on the way) leads outside."""
    pure = check_relative(rel, origin=origin)
    candidate = root.joinpath(*pure.parts)
    real_root = Path(os.path.realpath(root))
    real = Path(os.path.realpath(candidate))
    if real != real_root and real_root not in real.parents:
        raise UnsafePathError(
            f"{origin}: path {rel!r} resolves to {real}, outside the target {real_root} "
            "(a symlink leads out of the tree)"
        )
    return candidate
