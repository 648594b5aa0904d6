"""Headless Chromium (Debian's package, which .ci/run installs) for tests of the HTML pages:
``dump`` loads a page and returns the DOM after its scripts ran, as the browser laid it out.

``probe`` adds a script to a copy of a page that runs after the page's own and writes what it
measures (JSON) into ``<pre id="probe">``, so a test reads what the real browser computed:
layout, scroll position, which rows it paints.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
         "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync")


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.fail("chromium is not installed: .ci/run installs Debian's package")
    return found


def browse(url: str, *extra: str) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run([chromium(), *FLAGS, f"--user-data-dir={profile}", *extra, url],
                              capture_output=True, text=True, timeout=120, check=False,
                              stdin=subprocess.DEVNULL)


def probe(page: Path, script: str, fragment: str = "", *extra: str) -> dict[str, Any]:
    """Run ``script`` (JavaScript whose last statement is ``return {...}``) in ``page`` after
    the page's own script; what it returns, as JSON."""
    probed = page.with_name(f"probed-{page.name}")
    wrapped = ("<pre id=\"probe\"></pre><script>document.getElementById('probe').textContent"
               f" = JSON.stringify((function () {{ {script} }})());</script></body>")
    probed.write_text(page.read_text(encoding="utf-8").replace("</body>", wrapped, 1),
                      encoding="utf-8")
    run = browse(probed.as_uri() + fragment, "--dump-dom", *extra)
    found = re.search(r'<pre id="probe">(.*?)</pre>', run.stdout, re.S)
    assert found and found.group(1), run.stdout[-2000:] + run.stderr[-2000:]
    result = json.loads(html.unescape(found.group(1)))
    assert isinstance(result, dict)
    return result
