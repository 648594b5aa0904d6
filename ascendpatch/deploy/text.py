"""Text from servers and logs is untrusted: neutralise it before it reaches a terminal."""

from __future__ import annotations

import re

_UNSAFE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e"
                     r"\u2066-\u2069\ufeff\ud800-\udfff]")
_BYTE = range(0xDC80, 0xDD00)  # a byte that was not UTF-8, as os.fsdecode keeps it


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    if code in _BYTE:
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """Escape sequences (ESC [ ..., OSC 8 links, title changes), other control characters and
    bidirectional overrides become visible ``\\x1b`` / ``\\u202e`` text; so do newlines: a
    server's text stays on its own ``[FAIL]`` line and cannot start a forged ``[OK]`` line.
    Lone surrogates (a JSON ``\\ud800``, a file name's byte that is not UTF-8) become
    ``\\ud800`` / ``\\xff``: no text can fail to encode on a strict UTF-8 stream. Tabs stay."""
    return _UNSAFE.sub(_escape, text)
