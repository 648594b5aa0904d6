"""Kind ``hf-file``: add a file missing from cached Hugging Face snapshots.

Under transformers 5.x a whisper-large-v3 cache often lacks processor_config.json. For every
cached snapshot of the named repos that lacks the file, add it the way huggingface_hub lays out
its cache: a blob named by its sha256 in ``blobs/`` plus a relative symlink in
``snapshots/<commit>/`` (a plain file where the cache holds copies), and delete a matching
``.no_exist/<commit>/<file>`` marker, which huggingface_hub checks *before* the snapshot
(try_to_load_from_cache) and which would otherwise keep the file invisible. Other files are
never touched. The cache is ``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else
``$XDG_CACHE_HOME/huggingface/hub`` or ``~/.cache/huggingface/hub``.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ascendpatch.errors import InvalidInputError
from ascendpatch.hashing import sha256_bytes
from ascendpatch.kinds.base import ArtifactSite, BaseKind, Content, FileFinding, read_target_file
from ascendpatch.manifest import schema as s
from ascendpatch.manifest.model import Artifact
from ascendpatch.pipeline.filestate import FileState

_REPO = r"[\w.-]+/[\w.-]+"
_NAME = r"[\w.-]+"


def hub_cache(env: Mapping[str, str]) -> Path:
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if env.get(var):
            return Path(env[var])
    if env.get("HF_HOME"):
        return Path(env["HF_HOME"]) / "hub"
    cache = env.get("XDG_CACHE_HOME") or str(Path(env.get("HOME") or Path.home()) / ".cache")
    return Path(cache) / "huggingface" / "hub"


def _options(site: ArtifactSite) -> tuple[list[str], str, bytes]:
    options: dict[str, Any] = site.artifact.options
    repos = options.get("repos") or ["openai/whisper-large-v3"]
    filename = options.get("filename") or "processor_config.json"
    content = options.get("content", {"processor_class": "WhisperProcessor"})
    bad = [r for r in repos if not isinstance(r, str) or not re.fullmatch(_REPO, r)]
    if bad or not isinstance(filename, str) or not re.fullmatch(_NAME, filename):
        raise InvalidInputError(f"artifact {site.artifact.id}: options.repos must be 'org/name' "
                                f"ids and options.filename a plain file name")
    data = content.encode() if isinstance(content, str) else (
        json.dumps(content, indent=2) + "\n").encode()
    return repos, filename, data


def _rel(site: ArtifactSite, path: Path) -> str:
    return path.relative_to(site.root).as_posix()


def _guarded(site: ArtifactSite, path: Path) -> Path:
    """``path`` through the path guard before it is looked at: a link in the cache (its
    ``blobs/``, a ``.no_exist/<commit>``, the file itself) that leads out of it is refused,
    so nothing outside is read and no write is ever planned there (exit 2, nothing written)."""
    return site.path(_rel(site, path))


def _snapshot_findings(site: ArtifactSite, repo_dir: Path, snap: Path, filename: str,
                    data: bytes) -> list[FileFinding]:
    findings = []
    target = _guarded(site, snap / filename)
    blob = _guarded(site, repo_dir / "blobs" / sha256_bytes(data))
    marker = _guarded(site, repo_dir / ".no_exist" / snap.name / filename)
    uses_links = any(p.is_symlink() for p in snap.iterdir())
    if target.is_symlink() or target.exists():
        current = read_target_file(target, site.artifact)
        if current == data:  # ours (or identical): revert removes it
            findings.append(FileFinding(_rel(site, target), target, FileState.APPLIED, current,
                                  Content(data), Content(None), f"{target}: present"))
    elif uses_links:
        blob_now = read_target_file(blob, site.artifact)
        if blob_now is None or blob_now == data:
            state = FileState.APPLIED if blob_now == data else FileState.PRISTINE
            findings.append(FileFinding(_rel(site, blob), blob, state, blob_now, Content(data),
                                  Content(None), f"{blob}: blob"))
        link = os.path.relpath(blob, snap)
        findings.append(FileFinding(_rel(site, target), target, FileState.PRISTINE, None,
                              Content(data, link=link), Content(None),
                              f"{target}: missing; will link to {link}"))
    else:
        findings.append(FileFinding(_rel(site, target), target, FileState.PRISTINE, None,
                              Content(data), Content(None), f"{target}: missing"))
    if marker.exists():
        current = read_target_file(marker, site.artifact)
        findings.append(FileFinding(_rel(site, marker), marker, FileState.PRISTINE, current,
                              Content(None), Content(current),
                              f"{marker}: stale 'does not exist' marker, will be removed"))
    return findings


class HfFileKind(BaseKind):
    name = "hf-file"
    needs_distribution = False
    independent_files = True
    options_schema = s.Obj({
        "repos": s.ListOf(s.Str(pattern=_REPO, what="an 'org/name' Hugging Face repo id")),
        "filename": s.Str(pattern=_NAME, what="a plain file name"),
        "content": s.OneOf((s.Str(), s.MapOf(s.AnyValue()))),  # text, or a mapping as JSON
    })

    def root_for(self, artifact: Artifact, env: Mapping[str, str]) -> Path:
        return hub_cache(env)

    def prepare(self, site: ArtifactSite) -> None:
        _options(site)

    def nothing_to_do(self, site: ArtifactSite) -> str:
        repos, filename, _data = _options(site)
        cached = [r for r in repos
                  if (site.root / ("models--" + r.replace("/", "--")) / "snapshots").is_dir()]
        if not cached:
            return f"no cached snapshot of {', '.join(repos)} under {site.root}"
        return f"every cached snapshot of {', '.join(cached)} already has {filename}"

    def inspect(self, site: ArtifactSite) -> list[FileFinding]:
        repos, filename, data = _options(site)
        findings: dict[Path, FileFinding] = {}
        for repo in repos:
            repo_dir = site.root / ("models--" + repo.replace("/", "--"))
            snapshots = repo_dir / "snapshots"
            for snap in sorted(snapshots.iterdir()) if snapshots.is_dir() else []:
                site.path(_rel(site, snap))  # the path guard: no symlinked escape
                for finding in _snapshot_findings(site, repo_dir, snap, filename, data):
                    findings.setdefault(finding.path, finding)  # a blob shared by snapshots
        return list(findings.values())
