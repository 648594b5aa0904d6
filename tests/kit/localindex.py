"""A package index on 127.0.0.1 that serves a folder: PEP 503 pages for the files in it, each
link with its sha256, every path asked for recorded, and, when ``auth`` is set, a 401 for a
request without that Basic credential (so a test proves a password in pip's configuration
reached it). What the pip.conf tests (test_pip_config.py, test_lock_pip_conf.py) share.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

from packaging.utils import parse_sdist_filename, parse_wheel_filename


class Recorder(http.server.SimpleHTTPRequestHandler):
    """Serves a folder; records every path asked for; with ``auth`` set, answers 401 to a
    request without that Basic credential."""

    seen: ClassVar[list[str]] = []
    auth: ClassVar[str | None] = None

    def do_GET(self) -> None:
        self.seen.append(self.path)
        if self.auth is not None and self.headers.get("Authorization") != f"Basic {self.auth}":
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="index"')
            self.end_headers()
            return
        super().do_GET()

    def log_message(self, *args: object) -> None:
        pass


@contextlib.contextmanager
def serving(handler: type[http.server.BaseHTTPRequestHandler]) -> Iterator[int]:
    """``handler`` on a free port of 127.0.0.1 (the port), stopped afterwards."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def serving_folder(root: Path) -> Iterator[int]:
    """A Recorder serving ``root`` (its records and credential reset)."""
    Recorder.seen, Recorder.auth = [], None
    handler = functools.partial(Recorder, directory=str(root))
    with serving(handler) as port:  # type: ignore[arg-type]
        yield port


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _project(file: Path) -> str:
    if file.name.endswith(".whl"):
        return str(parse_wheel_filename(file.name)[0])
    return str(parse_sdist_filename(file.name)[0])


def write_pages(root: Path) -> Path:
    """root/simple/<project>/index.html (PEP 503) for every file in root/files, each link
    carrying its sha256; returns ``root``."""
    files = sorted((root / "files").iterdir())
    for project in sorted({_project(f) for f in files}):
        links = "".join(f'<a href="../../files/{f.name}#sha256={sha256(f)}">{f.name}</a>\n'
                        for f in files if _project(f) == project)
        page = root / "simple" / project / "index.html"
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(f"<!DOCTYPE html><html><body>\n{links}</body></html>\n")
    return root
