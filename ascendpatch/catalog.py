"""Where the bundled catalog (manifests/ and patches/) lives.

In a source checkout (and an editable install) they are the repository's top-level folders; a
built wheel carries a copy as ``ascendpatch/_bundled`` (see setup.py). ``$ASCENDPATCH_DATA_DIR``
overrides both.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_VAR = "ASCENDPATCH_DATA_DIR"


def data_root() -> Path:
    explicit = os.environ.get(ENV_VAR)
    if explicit:
        return Path(explicit)
    package = Path(__file__).resolve().parent
    bundled = package / "_bundled"
    if (bundled / "manifests").is_dir():
        return bundled
    return package.parent


def cache_dir() -> Path:
    """ascendpatch's own cache (release files, the pip-tools venv): $ASCENDPATCH_CACHE, else
    $XDG_CACHE_HOME/ascendpatch, else ~/.cache/ascendpatch. Every folder of it is used only
    through ascendpatch/cachedir.py, which checks that no one else can write it."""
    explicit = os.environ.get("ASCENDPATCH_CACHE")
    if explicit:
        return Path(explicit)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "ascendpatch"


def manifests_dir() -> Path:
    return data_root() / "manifests"
