"""sha256 helpers, including the url-safe base64 form used in dist-info RECORD files."""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Mapping
from pathlib import Path

_CHUNK = 1 << 20


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


_URLSAFE = str.maketrans("-_", "+/")


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


def hex_to_record(hex_digest: str) -> str:
    raw = bytes.fromhex(hex_digest)
    return "sha256=" + base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")
