"""What a cold machine downloads for the integration tier, fetched in the background while lint,
mypy and the first tests run: ``python -m tests.kit.prebuild``, which ``.ci/run`` starts before
lint. It prints one line, ``[OK]``, ``[SKIP]`` or ``[WARN]`` (the tests then fetch it
themselves, as before), and exits 0 only for ``[OK]``.

What it builds: the real vLLM server's venv, model and PIT1 plugin (tests/kit/realserver.py),
3 GB of wheels, under the kit's own build lock (the first server test waits on it, then finds
it built), inside ``tests.kit.isolated`` as a test runs (a temp HOME, the machine's pip
configuration and ``PIP_*`` variables dropped, PyPI only), so that the venv is the one a test
would have built.

Not prefetched, measured: the stack locks' downloads (tests/test_resolvers.py; pip-compile
installs arctic-inference's build requirements, torch 2.7.0 and its CUDA libraries, 3.3 GB,
into a build environment per stack). pip could only take them from its HTTP cache, and on this
machine's network nothing lands there: the proxy in front of the index answers without
Cache-Control, ETag or Last-Modified (``x-cache-status: BYPASS``), so pip caches no response,
and every pip run downloads again (at about 130 MB/s here).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import pytest

from tests.kit import isolated, realserver


def run() -> str:
    try:
        with tempfile.TemporaryDirectory() as home, isolated(Path(home)):
            return realserver.prebuild()
    except pytest.skip.Exception as skipped:
        return f"[SKIP] real vLLM server kit: {skipped}"
    except Exception as exc:  # the tests then build it themselves: a line, never a traceback
        return f"[WARN] real vLLM server kit not prebuilt: {type(exc).__name__}: {str(exc)[:300]}"


if __name__ == "__main__":
    line = run()
    sys.stdout.write(line + "\n")
    sys.exit(0 if line.startswith("[OK]") else 1)
