"""Unexpected errors: a log with the traceback and versions, ready to paste into a bug report."""

from __future__ import annotations

import contextlib
import os
import platform
import stat
import sys
import tempfile
import time
import traceback
from collections.abc import Sequence
from pathlib import Path

from ascendpatch import __version__, redact

ENV_VAR = "ASCENDPATCH_LOG_DIR"


def log_dir() -> Path:
    explicit = os.environ.get(ENV_VAR)
    if explicit:
        return Path(explicit)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "ascendpatch" / "logs"


def _private_folder(folder: Path) -> Path | None:
    """``folder``, created 0700 when missing; None when it is a link or not ours to use."""
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            folder.mkdir(mode=0o700)
        info = folder.lstat()
    except OSError:
        return None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        return None  # a symlink, a file, or someone else's folder: never followed
    if info.st_mode & 0o077:
        with contextlib.suppress(OSError):
            folder.chmod(0o700)
    return folder


def write(exc: BaseException, argv: Sequence[str]) -> str:
    """Write the log, credentials masked (ascendpatch.redact), into the private log folder
    (mode 0700) with a fresh, unpredictable file (``mkstemp``: ``O_EXCL | O_NOFOLLOW``); a
    planted link is never followed. Where that folder is unusable, a fresh private folder from
    ``mkdtemp`` takes it."""
    lines = [
        f"ascendpatch {__version__}",
        f"python {sys.version.split()[0]} ({sys.executable})",
        f"platform {platform.platform()}",
        f"argv {redact.argv(argv)}",
        "",
        *traceback.format_exception(type(exc), exc, exc.__traceback__),
    ]
    # the traceback's messages can quote a URL or a NAME=value given on the command line
    text = "\n".join(redact.text(line.rstrip("\n")) for line in lines) + "\n"
    prefix = time.strftime("error-%Y%m%d-%H%M%S") + f"-{os.getpid()}-"
    folder = _private_folder(log_dir())
    try:
        if folder is None:
            folder = Path(tempfile.mkdtemp(prefix="ascendpatch-logs-"))  # 0700, fresh
        fd, name = tempfile.mkstemp(prefix=prefix, suffix=".log", dir=folder)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
    except OSError:
        return "(no writable log folder)"
    return name
