# Runs in ascendpatch's pip-tools venv (env/pipadapter.pip_compile), never in a target:
# pip-compile, given the same command line, with one change to --generate-hashes. pip-tools
# takes a file's sha256 from the PyPI JSON API, and from an index without that API (a mirror
# in pip.conf, Nexus, pypiserver: pip-tools #1217, #1412) it downloads every file of each
# pinned version, every platform's wheels, to hash them: about 6 GB for a vllm-ascend stack
# on a mirror, and the wait of an hour on a slow link. The index's own page states each
# file's sha256 (PEP 503's #sha256= fragment, PEP 691's "hashes"): a link whose first stated
# hash is a sha256 of 64 lowercase hex digits gives it, recorded as the index states it and
# not checked against the bytes at lock time (as pip-tools records PyPI's JSON digests, and
# as uv records stated hashes); `install --lock` checks every file against the lock
# (--require-hashes), so a wrong stated hash makes it refuse that file, never install other
# bytes. Any other link (a --find-links folder, a direct URL, an index that states no hash or
# another kind) is downloaded and hashed as pip-tools does.
# pip-tools is installed unpinned: should a release move or change what is patched here, the
# stock pip-compile runs (hashing by download) and one line on stderr says so (shown by -v).
from __future__ import annotations

import re
import sys
from collections.abc import Callable
from typing import Any

_SHA256 = re.compile(r"[0-9a-f]{64}")
Hasher = Callable[..., Any]
NOTICE = ("ascendpatch: this pip-tools cannot take the hashes an index states ({why}); "
          "every file of each pin is downloaded to hash it")


def stated_first(downloaded: Hasher) -> Hasher:
    """pip-tools' ``_get_file_hash(self, link)``, answering from the link's stated sha256."""
    def stated_or_downloaded(self: Any, link: Any, *args: Any, **kwargs: Any) -> Any:
        stated = getattr(link, "hash", None)
        if getattr(link, "hash_name", None) == "sha256" and isinstance(stated, str) \
                and _SHA256.fullmatch(stated):
            return f"sha256:{stated}"
        return downloaded(self, link, *args, **kwargs)
    return stated_or_downloaded


def patch() -> str | None:
    """Patch pip-tools' hasher; why not, when it cannot be (None: patched)."""
    try:
        from piptools.repositories.pypi import PyPIRepository
    except ImportError as exc:
        return f"no piptools.repositories.pypi.PyPIRepository: {exc}"
    downloaded = getattr(PyPIRepository, "_get_file_hash", None)
    if not callable(downloaded):
        return "no PyPIRepository._get_file_hash"
    PyPIRepository._get_file_hash = stated_first(downloaded)
    return None


if __name__ == "__main__":
    from piptools.scripts.compile import cli

    not_patched = patch()
    if not_patched is not None:
        print(NOTICE.format(why=not_patched), file=sys.stderr)
    sys.exit(cli(prog_name="pip-compile"))
