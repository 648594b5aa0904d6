"""What the cache tests share: a real second user who owns a shared cache folder and plants
files in it, the demo release as an sdist, and a package index on 127.0.0.1 that serves it.

The second user is uid 65534 through ``setpriv`` (util-linux), so ownership and modes are
checked by the kernel, not simulated. The index speaks the PEP 691 JSON API, which pip (and
so ascendpatch, through it) reads.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import http.server
import io
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

NOBODY = 65534
SETPRIV = shutil.which("setpriv")
FIX = "fix: chown/chmod it, or point ASCENDPATCH_CACHE at a folder of your own"
PRISTINE = "a = 1\nb = 3\n"  # demo/mod.py as released: the demo fix applies
PATCHED = "a = 1\na2 = 2\nb = 3\n"  # a planted release on which the fix looks obsolete


def owned_by_nobody(path: Path) -> str:
    """How the cache check names a folder the second user owns (we are root)."""
    return f"{path} is owned by uid {NOBODY}, not by this user (uid 0)"


@contextlib.contextmanager
def shared_cache() -> Iterator[Path]:
    """A cache folder owned by uid 65534, mode 0777, in a root-owned 0755 folder the second
    user can reach (pytest's own temp folders are 0700); removed afterwards."""
    if os.geteuid() != 0 or SETPRIV is None:
        pytest.skip("needs root and setpriv (util-linux) for a real second user")
    base = Path(tempfile.mkdtemp(prefix="ascendpatch-shared-"))
    try:
        base.chmod(0o755)
        cache = base / "cache"
        cache.mkdir()
        os.chown(cache, NOBODY, NOBODY)
        cache.chmod(0o777)
        yield cache
    finally:
        shutil.rmtree(base)


def plant(path: Path, data: bytes) -> None:
    """uid 65534 writes ``data`` to ``path``, mode 0777 (its folders made 0777 on the way)."""
    assert SETPRIV is not None
    proc = subprocess.run(
        [SETPRIV, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "sh", "-c",
         'mkdir -p -m 0777 "$(dirname "$1")" && cat > "$1" && chmod 0777 "$1"', "plant",
         str(path)], input=data, capture_output=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert path.stat().st_uid == NOBODY


def demo_sdist(mod: str = PRISTINE, claimed: int | None = None) -> bytes:
    """demo 1.0's sdist (``demo-1.0/demo/mod.py`` holds ``mod``). ``claimed``: the size that
    member's header claims instead; its data is then cut short, as a crafted archive's is."""
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0) as raw, \
            tarfile.open(fileobj=raw, mode="w") as tf:  # the same bytes on every call
        for name, text in (("demo-1.0/PKG-INFO", "Name: demo\nVersion: 1.0\n"),
                           ("demo-1.0/demo/__init__.py", ""), ("demo-1.0/demo/mod.py", mod)):
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    if claimed is None:
        return out.getvalue()
    tar = bytearray(gzip.decompress(out.getvalue()))
    at = tar.index(b"demo-1.0/demo/mod.py")
    info = tarfile.TarInfo.frombuf(bytes(tar[at:at + 512]), "utf-8", "strict")
    info.size = claimed
    tar[at:at + 512] = info.tobuf(tarfile.GNU_FORMAT)
    return gzip.compress(bytes(tar), mtime=0)


class JsonIndex(http.server.BaseHTTPRequestHandler):
    """/simple/demo/ (PEP 691 JSON) lists demo-1.0.tar.gz, whose bytes are ``served``, with
    their sha256 when ``hashed``."""

    served: ClassVar[bytes] = b""
    hashed: ClassVar[bool] = True

    def do_GET(self) -> None:
        if self.path.rstrip("/") == "/simple/demo":
            entry: dict[str, object] = {"filename": "demo-1.0.tar.gz",
                                        "url": "/files/demo-1.0.tar.gz"}
            if JsonIndex.hashed:
                entry["hashes"] = {"sha256": hashlib.sha256(JsonIndex.served).hexdigest()}
            body = json.dumps({"meta": {"api-version": "1.0"}, "name": "demo",
                               "files": [entry]}).encode()
            kind = "application/vnd.pypi.simple.v1+json"
        elif self.path == "/files/demo-1.0.tar.gz":
            body, kind = JsonIndex.served, "application/octet-stream"
        else:
            self.send_response(404)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@contextlib.contextmanager
def demo_index(served: bytes, *, hashed: bool = True) -> Iterator[str]:
    """The index on 127.0.0.1 (its /simple URL), serving ``served`` as demo 1.0's sdist."""
    JsonIndex.served, JsonIndex.hashed = served, hashed
    server = http.server.HTTPServer(("127.0.0.1", 0), JsonIndex)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/simple"
    finally:
        server.shutdown()
        server.server_close()
