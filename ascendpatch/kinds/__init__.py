"""Artifact kinds, registered in one typed dict. See :mod:`ascendpatch.kinds.base`."""

from __future__ import annotations

from ascendpatch.kinds.base import Kind
from ascendpatch.kinds.diff import DiffKind
from ascendpatch.kinds.dropin import DropinKind
from ascendpatch.kinds.file import FileKind

KINDS: dict[str, Kind] = {
    "diff": DiffKind(),
    "dropin": DropinKind(),
    "file": FileKind(),
}

# Kinds that manifests may already declare but this version cannot act on yet (model adapters
# and the Hugging Face cache fixer). Artifacts of these kinds are reported as skipped, loudly.
PLANNED_KINDS: dict[str, str] = {
    "plugin": "vLLM plugin adapters",
    "hf-file": "Hugging Face cache fixer",
}

KIND_NAMES = frozenset(KINDS) | frozenset(PLANNED_KINDS)
