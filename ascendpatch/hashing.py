"""sha256 helpers, including the url-safe base64 form used in dist-info RECORD files.

The one implementation of hashing a file: the audit (15k files a run), the ledger and the
snapshots all call :func:`read_digest` / :func:`file_digest`.
"""

from __future__ import annotations

import binascii
import hashlib
import os
from collections.abc import Mapping
from pathlib import Path

# A file this size or larger is read in chunks into a reused buffer; a smaller one in one read.
# 1 MiB chunks: each read and each hashlib update of one releases the GIL, and the buffer stays
# in the core's L2 cache between the copy and the hash (8 MiB buffers cost ~7 % more CPU).
CHUNK = 1 << 20
_OPEN = os.O_RDONLY | os.O_CLOEXEC


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_optional(data: bytes | None) -> str | None:
    """The digest of content that may be absent (None stays None)."""
    return None if data is None else sha256_bytes(data)


def _read_rest(fd: int) -> bytes:
    parts = []
    while chunk := os.read(fd, CHUNK):
        parts.append(chunk)
    return b"".join(parts)


def read_digest(fd: int, size: int, buffer: bytearray | None = None) -> bytes:
    """SHA-256 of the open file ``fd`` (at its start), which fstat saw ``size`` bytes long.

    A small file is one ``read`` (a regular file's short read is its end; a file that grew
    since is read on to its end), a big one goes through ``buffer`` (reused by the caller's
    thread; 1 MiB when None)."""
    if size < CHUNK:
        data = os.read(fd, size + 1)
        if len(data) > size:  # it grew since the stat
            data += _read_rest(fd)
        return hashlib.sha256(data).digest()
    digest = hashlib.sha256()
    buf = buffer if buffer else bytearray(CHUNK)
    view = memoryview(buf)
    readinto = os.readv
    while count := readinto(fd, [buf]):
        digest.update(view[:count])
    return digest.digest()


def file_digest(path: Path | str, buffer: bytearray | None = None) -> bytes:
    """SHA-256 of a file (raw bytes); see :func:`read_digest`."""
    fd = os.open(path, _OPEN)
    try:
        return read_digest(fd, os.fstat(fd).st_size, buffer)
    finally:
        os.close(fd)


def sha256_file(path: Path | str) -> str:
    return file_digest(path).hex()


_URLSAFE = str.maketrans("-_", "+/")
_TO_URLSAFE = bytes.maketrans(b"+/", b"-_")


def record_form(digest: bytes) -> str:
    """A raw SHA-256 digest as RECORD writes it: ``sha256=<url-safe base64, unpadded>``."""
    encoded = binascii.b2a_base64(digest, newline=False).translate(_TO_URLSAFE).rstrip(b"=")
    return "sha256=" + encoded.decode("ascii")


def hex_to_record(hex_digest: str) -> str:
    return record_form(bytes.fromhex(hex_digest))


def record_to_hex(record_hash: str) -> str | None:
    """Convert a RECORD ``sha256=<urlsafe b64>`` entry to hex; None for other algorithms."""
    algorithm, _, value = record_hash.partition("=")
    if algorithm != "sha256" or not value:
        return None
    padded = value.translate(_URLSAFE) + "=" * (-len(value) % 4)
    try:
        return binascii.a2b_base64(padded).hex()  # the C codec: audits convert ~20k of these
    except binascii.Error:
        return None


def record_text(files: Mapping[str, bytes], record_path: str) -> str:
    """A dist-info RECORD for ``files`` (path -> bytes), listing itself without a hash."""
    rows = [f"{rel},{hex_to_record(sha256_bytes(data))},{len(data)}" for rel, data in files.items()]
    return "\n".join([*rows, f"{record_path},,"]) + "\n"
