"""hashing: the one implementation of a file's SHA-256 and of RECORD's digest form.

References we did not write: coreutils ``sha256sum`` for file digests, the stdlib's
``base64.urlsafe_b64encode`` for RECORD's form (PEP 376 / the wheel spec: url-safe base64,
no padding)."""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ascendpatch.hashing import (
    CHUNK,
    file_digest,
    hex_to_record,
    read_digest,
    record_form,
    record_to_hex,
    sha256_file,
)
from tests.kit import make_demo_target, run_cli

SIZES = [0, 1, 2047, 2048, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK + 5]


@pytest.mark.skipif(shutil.which("sha256sum") is None, reason="coreutils sha256sum not found")
def test_file_digests_agree_with_sha256sum(tmp_path: Path) -> None:
    paths = []
    for size in SIZES:
        path = tmp_path / f"f{size}"
        path.write_bytes(os.urandom(size))
        paths.append(path)
    out = subprocess.run(["sha256sum", *map(str, paths)], capture_output=True, text=True,
                         check=True).stdout
    want = {line.split(None, 1)[1].strip(): line.split()[0] for line in out.splitlines()}
    assert {str(p): sha256_file(p) for p in paths} == want
    shared = bytearray(CHUNK)  # a thread's reused buffer gives the same digests
    assert {str(p): file_digest(p, shared).hex() for p in paths} == want
    odd = bytearray(12345)  # any buffer size works
    assert {str(p): file_digest(str(p), odd).hex() for p in paths} == want


def test_a_file_that_grew_since_the_stat_is_read_to_its_end(tmp_path: Path) -> None:
    """The audit reads a small file with one read of the size its stat saw: a file that grew
    in between is still hashed whole, never cut at the old size."""
    data = os.urandom(3 * CHUNK)
    path = tmp_path / "grown"
    path.write_bytes(data)
    for seen in (0, 10, CHUNK - 1, CHUNK):
        fd = os.open(path, os.O_RDONLY)
        try:
            assert read_digest(fd, seen) == hashlib.sha256(data).digest()
        finally:
            os.close(fd)


def test_record_form_is_urlsafe_base64_without_padding() -> None:
    for size in range(40):  # every padding length, and digests with '+' and '/' in base64
        raw = hashlib.sha256(bytes(range(size))).digest()
        want = "sha256=" + base64.urlsafe_b64encode(raw).decode().rstrip("=")
        assert record_form(raw) == want == hex_to_record(raw.hex())
        assert record_to_hex(want) == raw.hex()


def test_record_to_hex_refuses_other_algorithms_and_garbage() -> None:
    assert record_to_hex("md5=abc") is None
    assert record_to_hex("sha256=") is None
    assert record_to_hex("sha256=a") is None  # not a whole number of base64 bytes


def test_one_apply_hashes_each_content_a_bounded_number_of_times(
        site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Content carries its digest, computed once. Applying the two-file demo patch hashes, per
    file, what the kind and the engine see (the original, the patched content, and the
    re-check's re-read file and its reversal: 4) and what the store hashes for its journal and
    backup (3): 14 in all. Before the digest was carried it was 22."""
    manifest = make_demo_target(site, tmp_path)
    assert run_cli("--site-packages", site, "--manifest", manifest, "status").code == 1
    real = hashlib.sha256
    hashed: list[int] = []

    def counting(data: bytes = b"", **kw: bool) -> hashlib._Hash:
        hashed.append(len(data))
        return real(data, **kw)

    monkeypatch.setattr(hashlib, "sha256", counting)
    applied = run_cli("--site-packages", site, "--manifest", manifest, "apply")
    monkeypatch.setattr(hashlib, "sha256", real)
    assert applied.code == 0, applied.err
    assert len(hashed) <= 14, f"{len(hashed)} sha256 calls for one apply of two files"
