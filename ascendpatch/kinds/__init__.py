"""Artifact kinds, registered in one typed dict. See :mod:`ascendpatch.kinds.base`."""

from __future__ import annotations

from ascendpatch.kinds.base import Kind
from ascendpatch.kinds.diff import DiffKind
from ascendpatch.kinds.dropin import DropinKind
from ascendpatch.kinds.envfile import EnvFileKind
from ascendpatch.kinds.file import FileKind
from ascendpatch.kinds.hffile import HfFileKind
from ascendpatch.kinds.plugin import PluginKind

# The order is the one in which verify shows the checks kinds add (Kind.checks): the
# adapters' registry before SmoothQuant's halves.
KINDS: dict[str, Kind] = {
    "diff": DiffKind(),
    "plugin": PluginKind(),
    "dropin": DropinKind(),
    "file": FileKind(),
    "hf-file": HfFileKind(),
    "env-file": EnvFileKind(),
}

KIND_NAMES = frozenset(KINDS)
