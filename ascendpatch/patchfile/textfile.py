"""Text files as lines that remember their own line endings.

Line content is compared without its ending, so a CRLF file matches an LF patch, and every
line that a patch does not touch keeps its exact bytes. Lines a patch adds take the file's
dominant ending. Bytes that are not UTF-8 survive a round trip (surrogateescape).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_SPLIT = re.compile(r"(\r\n|\n)")


@dataclass(frozen=True)
class Line:
    text: str
    eol: str  # "\n", "\r\n" or "" (only the last line of a file without a final newline)


@dataclass(frozen=True)
class TextFile:
    lines: tuple[Line, ...]

    @classmethod
    def parse(cls, data: bytes) -> TextFile:
        text = data.decode("utf-8", errors="surrogateescape")
        parts = _SPLIT.split(text)
        lines: list[Line] = []
        for index in range(0, len(parts) - 1, 2):
            lines.append(Line(parts[index], parts[index + 1]))
        if parts[-1]:
            lines.append(Line(parts[-1], ""))
        return cls(tuple(lines))

    def render(self) -> bytes:
        text = "".join(line.text + line.eol for line in self.lines)
        return text.encode("utf-8", errors="surrogateescape")

    @property
    def texts(self) -> list[str]:
        return [line.text for line in self.lines]

    @property
    def dominant_eol(self) -> str:
        crlf = sum(1 for line in self.lines if line.eol == "\r\n")
        lf = sum(1 for line in self.lines if line.eol == "\n")
        return "\r\n" if crlf > lf else "\n"

    @property
    def ends_without_newline(self) -> bool:
        return bool(self.lines) and self.lines[-1].eol == ""
