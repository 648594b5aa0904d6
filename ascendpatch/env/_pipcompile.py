# Runs in ascendpatch's pip-tools venv (env/pipadapter.pip_compile), never in a target:
# pip-compile, given the same command line, with one change to --generate-hashes. pip-tools
# takes a file's sha256 from the PyPI JSON API, and from an index without that API (a mirror
# in pip.conf, Nexus, pypiserver: pip-tools #1217, #1412) it downloads every file of each
# pinned version, every platform's wheels, to hash them: about 6 GB for a vllm-ascend stack
# on a mirror, and the wait of an hour on a slow link. The index's own page already states
# each file's sha256 (PEP 503's #sha256= fragment, PEP 691's "hashes"); pip checks the bytes
# it downloads against that same stated hash, and uv writes it into its locks. So a link that
# states a well-formed sha256 gives it; any other link (a --find-links folder, a direct URL,
# an index that states no hash or another kind) is downloaded and hashed as pip-tools does.
# Should pip-tools no longer have the method, pip-compile runs as it is.
from __future__ import annotations

import re
import sys
from collections.abc import Callable
from typing import Any

from piptools.repositories.pypi import PyPIRepository
from piptools.scripts.compile import cli

_SHA256 = re.compile(r"[0-9a-f]{64}")
Hasher = Callable[[Any, Any], Any]


def stated_first(downloaded: Hasher) -> Hasher:
    """pip-tools' ``_get_file_hash(self, link)``, answering from the link's stated sha256."""
    def stated_or_downloaded(self: Any, link: Any) -> Any:
        stated = getattr(link, "hash", None)
        if getattr(link, "hash_name", None) == "sha256" and isinstance(stated, str) \
                and _SHA256.fullmatch(stated):
            return f"sha256:{stated}"
        return downloaded(self, link)
    return stated_or_downloaded


_downloaded = getattr(PyPIRepository, "_get_file_hash", None)
if callable(_downloaded):
    PyPIRepository._get_file_hash = stated_first(_downloaded)

sys.exit(cli(prog_name="pip-compile"))
