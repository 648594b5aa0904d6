from __future__ import annotations

from ascendpatch.shell.cli import entry

entry()
