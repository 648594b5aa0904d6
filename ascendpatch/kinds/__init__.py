"""Artifact kinds, registered in one typed mapping. See :mod:`ascendpatch.kinds.base`.

A kind's module is imported the first time the kind is asked for: a manifest's validation
asks only for the kinds its artifacts name, so a command that loads a manifest without diffs
does not load the patch matcher, one without drop-ins not the log rules SmoothQuant's check
reads (``install``'s plan waits for these imports before it starts its resolver). Iterating
(``items``, ``values``) loads every kind, in the registry's order.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
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


class _Registry(Mapping[str, "Kind"]):  # (a name: kinds.base loads with the first kind)
    """Every kind by its name, each made (its module imported) when first asked for. Only the
    registered names exist, and always: setting one (a test's stand-in, ``monkeypatch.setitem``)
    replaces the kind made for it; nothing removes one."""

    def __init__(self) -> None:
        self._made: dict[str, Kind] = {}

    def __getitem__(self, name: str) -> Kind:
        kind = self._made.get(name)
        if kind is not None:
            return kind
        module_name, cls = _WHERE[name]  # KeyError for a name no kind has, as a dict's
        try:
            module = importlib.import_module(f"{__name__}.{module_name}")
            made: Kind = getattr(module, cls)()
        except Exception as exc:  # not a KeyError ``get`` would take for "no such kind"
            raise RuntimeError(f"kind {name!r} cannot be loaded: {exc!r}") from exc
        self._made[name] = made
        return made

    def __setitem__(self, name: str, kind: Kind) -> None:
        if name not in _WHERE:
            raise KeyError(name)
        self._made[name] = kind

    def __iter__(self) -> Iterator[str]:
        return iter(_WHERE)

    def __len__(self) -> int:
        return len(_WHERE)

    def __contains__(self, name: object) -> bool:
        return name in _WHERE


KINDS = _Registry()

KIND_NAMES = frozenset(_WHERE)
