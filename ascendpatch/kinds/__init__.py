"""Artifact kinds, registered in one typed mapping. See :mod:`ascendpatch.kinds.base`.

A kind's module is imported the first time the kind is asked for: a manifest's validation
asks only for the kinds its artifacts name, so a command that loads a manifest without diffs
does not load the patch matcher, one without drop-ins not the log rules SmoothQuant's check
reads (``install``'s plan waits for these imports before it starts its resolver). Iterating
(``items``, ``values``) loads every kind, in the registry's order.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, MutableMapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # (kinds.base itself loads with the first kind made)
    from ascendpatch.kinds.base import Kind

# name -> (module under ascendpatch.kinds, class). The order is the one in which verify shows
# the checks kinds add (Kind.checks): the adapters' registry before SmoothQuant's halves.
_WHERE: dict[str, tuple[str, str]] = {
    "diff": ("diff", "DiffKind"),
    "plugin": ("plugin", "PluginKind"),
    "dropin": ("dropin", "DropinKind"),
    "file": ("file", "FileKind"),
    "hf-file": ("hffile", "HfFileKind"),
    "env-file": ("envfile", "EnvFileKind"),
}


class _Registry(MutableMapping[str, "Kind"]):  # (a name: kinds.base loads later)
    """Every kind by its name, each made (its module imported) when first asked for. Only the
    registered names exist; setting one (a test's stand-in) replaces the kind made for it, and
    deleting it lets the next ask make it afresh."""

    def __init__(self) -> None:
        self._made: dict[str, Kind] = {}

    def __getitem__(self, name: str) -> Kind:
        kind = self._made.get(name)
        if kind is None:
            module_name, cls = _WHERE[name]  # KeyError for a name no kind has, as a dict's
            module = importlib.import_module(f"{__name__}.{module_name}")
            made: Kind = getattr(module, cls)()
            kind = self._made[name] = made
        return kind

    def __setitem__(self, name: str, kind: Kind) -> None:
        if name not in _WHERE:
            raise KeyError(name)
        self._made[name] = kind

    def __delitem__(self, name: str) -> None:
        if name not in _WHERE:
            raise KeyError(name)
        self._made.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(_WHERE)

    def __len__(self) -> int:
        return len(_WHERE)

    def __contains__(self, name: object) -> bool:
        return name in _WHERE


KINDS: MutableMapping[str, Kind] = _Registry()

KIND_NAMES = frozenset(_WHERE)
