"""The orphan walk: files inside a package's folders that no RECORD lists (a drop-in left
behind after ``pip uninstall``), remembered per folder until a folder gains or loses an entry."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ascendpatch.env.target import Row
from ascendpatch.inspect.audit.classify import orphan_finding
from ascendpatch.inspect.audit.report import AuditFinding, Wanted
from ascendpatch.inspect.audit.statcache import FolderWalk, StatCache
from ascendpatch.store import atomic

if TYPE_CHECKING:
    from ascendpatch.env.target import Distribution, Target


def _package_dirs(target: Target, dist: Distribution, rows: list[Row]) -> set[str]:
    from ascendpatch.store.reading import STATE_DIR

    location = str(dist.location)
    if dist.location not in target.site_packages:
        return set()
    tops = {rel.split("/", 1)[0] for rel, _hash, _size in rows if "/" in rel}
    tops -= {"..", "__pycache__", STATE_DIR}
    return {f"{location}/{top}" for top in tops
            if not top.endswith((".dist-info", ".data")) and os.path.isdir(f"{location}/{top}")}


def _listed(rows: Mapping[Distribution, list[Row]], sites: Iterable[Path]) \
        -> dict[str, set[str]]:
    """Every RECORD path, as a set of paths relative to each site folder (a plain row is
    used as it is: no string is built for it)."""
    listed: dict[str, set[str]] = {str(site): set() for site in sites}
    for dist, dist_rows in rows.items():
        location = str(dist.location)
        here = listed.setdefault(location, set())
        here.update(rel for rel, _h, _s in dist_rows if ".." not in rel)
        for rel, _h, _s in dist_rows:
            if ".." in rel:  # it may land in another site folder
                path = os.path.normpath(f"{location}/{rel}")
                for site, names in listed.items():
                    if path.startswith(site + "/"):
                        names.add(path[len(site) + 1:])
    return listed


def records_key(target: Target) -> str:
    """Changes when any distribution is installed, removed or rewritten."""
    parts = []
    for dist in sorted(target.distributions.values(), key=lambda d: str(d.metadata_dir)):
        try:
            st = os.stat(f"{dist.metadata_dir}/RECORD")
        except OSError:
            continue
        parts.append(f"{dist.metadata_dir}:{st.st_mtime_ns}:{st.st_size}:{st.st_ino}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _dir_key(path: str) -> list[int]:
    st = os.stat(path)
    return [st.st_mtime_ns, st.st_ctime_ns]  # ctime cannot be set back from user space


def _walk_unlisted(folder: str, location: str, listed: set[str]) \
        -> tuple[list[str], list[list[Any]]]:
    """Files under ``folder`` (in ``location``) that no RECORD lists, and the folders' stats."""
    unlisted, dirs = [], []
    cut = len(location) + 1
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        dirs.append([dirpath, *_dir_key(dirpath)])
        rel = dirpath[cut:] + "/"
        unlisted += [f"{dirpath}/{name}" for name in filenames
                     if rel + name not in listed and not name.endswith(atomic.TEMP_SUFFIX)]
    return unlisted, dirs


def cached_unlisted(walk: FolderWalk | None, key: str) -> list[str] | None:
    """The files no RECORD lists, as last seen, while no folder gained or lost an entry."""
    if walk is None or walk.records != key:
        return None
    try:
        if any(_dir_key(d[0]) != d[1:] for d in walk.dirs):
            return None
    except (OSError, IndexError, TypeError):  # IndexError, TypeError: a hand-edited cache
        return None
    return list(walk.unlisted)


def findings(target: Target, dists: list[Distribution], rows: Mapping[Distribution, list[Row]],
             expected: Wanted, cache: StatCache, key: str) -> list[AuditFinding]:
    owners: dict[str, Distribution] = {}
    for dist in dists:
        for folder in _package_dirs(target, dist, rows[dist]):
            owners.setdefault(folder, dist)
    root = str(target.root)
    listed: dict[str, set[str]] | None = None
    findings = []
    for folder, dist in sorted(owners.items()):
        unlisted = cached_unlisted(cache.orphans.get(folder), key)
        if unlisted is None:
            listed = listed if listed is not None else _listed(rows, target.site_packages)
            location = str(dist.location)
            unlisted, dirs = _walk_unlisted(folder, location, listed.get(location, set()))
            cache.orphans[folder] = FolderWalk(key, dirs, unlisted, (dist.name, dist.version))
            cache.dirty = True
        findings += [orphan_finding(path[len(root) + 1:], path, dist.name, expected)
                     for path in unlisted]
    return findings
