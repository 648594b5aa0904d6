"""Unexpected errors: a log with the traceback and versions, ready to paste into a bug report."""

from __future__ import annotations

import os
import platform
import sys
import tempfile
import time
import traceback
from collections.abc import Sequence
from pathlib import Path

from ascendpatch import __version__

ENV_VAR = "ASCENDPATCH_LOG_DIR"


def log_dir() -> Path:
    explicit = os.environ.get(ENV_VAR)
    if explicit:
        return Path(explicit)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "ascendpatch" / "logs"


def write(exc: BaseException, argv: Sequence[str]) -> str:
    lines = [
        f"ascendpatch {__version__}",
        f"python {sys.version.split()[0]} ({sys.executable})",
        f"platform {platform.platform()}",
        f"argv {list(argv)}",
        "",
        *traceback.format_exception(type(exc), exc, exc.__traceback__),
    ]
    text = "\n".join(line.rstrip("\n") for line in lines) + "\n"
    name = time.strftime("error-%Y%m%d-%H%M%S") + f"-{os.getpid()}.log"
    for folder in (log_dir(), Path(tempfile.gettempdir())):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / name
            path.write_text(text, encoding="utf-8")
            return str(path)
        except OSError:
            continue
    return "(no writable log folder)"
