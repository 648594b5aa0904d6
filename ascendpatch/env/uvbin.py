"""The uv binary of this tool's own environment (``ascendpatch[fast]``), or why there is none.

ascendpatch runs as root on shared hosts, so the uv it runs is never looked up on ``PATH`` or
in a user's folder: only the ``uv`` package installed into the environment ascendpatch itself
runs from (``sys.prefix``) counts, through that package's own ``find_uv_bin()``, and only when
the binary and every folder above it belong to root or to the running user and no one else
can write them (a world-writable folder above is accepted only with the sticky bit, like
/tmp). Anything else is "not usable", with the reason, and the resolver stays pip.
"""

from __future__ import annotations

import importlib.util
import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Found:
    """uv's binary when usable (``path``), else ``why`` not."""

    path: Path | None
    why: str = ""


def find() -> Found:
    """The uv of this tool's environment, checked (see the module's docstring)."""
    prefix = Path(os.path.realpath(sys.prefix))
    spec = importlib.util.find_spec("uv")
    if spec is None or spec.origin is None:
        return Found(None, "uv is not installed with ascendpatch (pip install "
                           "'ascendpatch[fast]')")
    module = Path(os.path.realpath(spec.origin))
    if prefix not in module.parents:
        return Found(None, f"the uv package at {module} is not in ascendpatch's own "
                           f"environment {prefix}")
    from uv import find_uv_bin  # the package's own finder

    try:
        binary = Path(os.path.realpath(find_uv_bin()))
    except FileNotFoundError:
        return Found(None, "the uv package has no uv binary")
    if prefix not in binary.parents:
        return Found(None, f"the uv binary {binary} is not in ascendpatch's own environment "
                           f"{prefix}")
    why = unsafe(binary)
    return Found(None, why) if why else Found(binary)


def unsafe(binary: Path) -> str | None:
    """Why someone other than root or this user could replace ``binary``, if anyone can."""
    from ascendpatch.paths import untrusted  # the one rule: root's or ours, not writable

    for path in [binary, *binary.parents]:
        info = os.lstat(path)
        why = untrusted(info, sticky_ok=stat.S_ISDIR(info.st_mode))
        if why is not None:
            return f"{path} is {why}"
    return None
