"""Classification: what a file's digest or presence says against RECORD and ascendpatch's
own records: ok, changed as expected, changed, missing, unreadable, orphan or added."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, NamedTuple

from ascendpatch.env.target import Row
from ascendpatch.hashing import record_to_hex, sha256_file
from ascendpatch.inspect.audit.hashpool import UNREADABLE
from ascendpatch.inspect.audit.report import AuditFinding, Wanted
from ascendpatch.inspect.audit.statcache import Outcome, Summary

if TYPE_CHECKING:
    from ascendpatch.env.target import Distribution, Target


class Entry(NamedTuple):
    dist: Distribution
    rel: str  # relative to the target root (absolute when outside it)
    path: str
    record_hash: str  # "sha256=<urlsafe b64>", as RECORD writes it
    size: int | None


def _location_key(root: str, location: str) -> str | None:
    """Prefix that turns a RECORD path into a key relative to root (None: outside root)."""
    if location == root:
        return ""
    if location.startswith(root + os.sep):
        return location[len(root) + 1:] + "/"
    return None


def entries(target: Target, rows: Mapping[Distribution, list[Row]]) -> list[Entry]:
    root = str(target.root)
    out = []
    for dist, dist_rows in rows.items():
        location = str(dist.location)
        prefix = _location_key(root, location)
        for rel, record_hash, size in dist_rows:
            if record_hash is None:
                continue  # RECORD itself and .pyc files: no hash to check against
            if ".." in rel or rel.startswith("/") or prefix is None:
                path = os.path.normpath(os.path.join(location, rel))
                key = path[len(root) + 1:] if path.startswith(root + os.sep) else path
            else:
                path, key = f"{location}/{rel}", prefix + rel
            out.append(Entry(dist, key, path, record_hash, size))
    return out


def record_findings(outcome: Outcome, entries: Mapping[str, Entry], wanted: Wanted,
                    summary: Summary) -> list[AuditFinding]:
    """What the hashes say against RECORD: missing, unreadable and differing files (and the
    same, in ``summary``, for the cache of the next repeat audit)."""
    findings = []
    for key in outcome.missing:
        dist = entries[key].dist
        summary.missing.append((key, dist.name, dist.version))
        findings.append(AuditFinding("missing", key, dist.name, f"{dist.name} {dist.version}"))
    for key, digest in outcome.digests.items():
        entry = entries[key]
        if digest.startswith(UNREADABLE):
            summary.unreadable = True
            findings.append(AuditFinding("unreadable", key, entry.dist.name,
                                    f"{entry.dist.name} {entry.dist.version}: "
                                    f"{digest[len(UNREADABLE):]}"))
        elif digest != entry.record_hash:
            finding = compare(entry, outcome.stats[key], record_to_hex(digest) or "", wanted)
            summary.differ.append((key, finding.code, entry.dist.name, entry.dist.version))
            findings.append(finding)
    return findings


def compare(entry: Entry, st: os.stat_result, digest: str, expected: Wanted) -> AuditFinding:
    size = "S" if entry.size is not None and entry.size != st.st_size else "."
    return changed(f"{size}.5", entry.rel, entry.dist.name, entry.dist.version, digest,
                    expected)


def changed(code: str, key: str, name: str, version: str, digest: str,
             expected: Wanted) -> AuditFinding:
    """A file that differs from its RECORD: expected when its sha256 (hex) is what
    ascendpatch's ledger or manifest says it wrote."""
    who = f"{name} {version}"
    wanted = expected.get(key)
    if wanted is not None and wanted[0] == digest:
        return AuditFinding(code, key, name, f"{who}: {wanted[1]}", expected=True)
    return AuditFinding(code, key, name, f"{who}: changed")


def orphan_finding(rel: str, path: str, package: str, expected: Wanted) -> AuditFinding:
    wanted = expected.get(rel)
    if wanted is not None and sha256_file(path) == wanted[0]:
        return AuditFinding("added", rel, package, wanted[1], expected=True)
    return AuditFinding("orphan", rel, package, f"in {package}'s folder, listed by no RECORD")
