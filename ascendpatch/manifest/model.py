"""Typed manifest objects, built only from documents that passed the schema."""

from __future__ import annotations

import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from ascendpatch.errors import InvalidInputError
from ascendpatch.manifest.needed import Condition


def version_in(spec: str, version: Version) -> bool:
    """PEP 440 containment that admits pre-releases (0.22.1rc2) and local labels (2.10.0+cpu)."""
    return SpecifierSet(spec).contains(version, prereleases=True)


@dataclass(frozen=True)
class FileHashes:
    before: tuple[str, ...] = ()
    after: tuple[str, ...] = ()


@dataclass(frozen=True)
class Variant:
    versions: str | None  # None: any version (a kind that acts on no distribution)
    source: str | None  # raw text, may hold ${VAR}; resolved by the loader's Sources
    targets: tuple[str, ...]
    sha256: dict[str, FileHashes]

    def matches(self, version: Version) -> bool:
        return self.versions is None or version_in(self.versions, version)


@dataclass(frozen=True)
class Artifact:
    id: str
    title: str
    kind: str
    distribution: str | None
    variants: tuple[Variant, ...]
    enabled: bool = True
    not_needed: tuple[str, str] | None = None  # (specifier, reason)
    needed_if: Condition | None = None  # decides, by content, releases no variant covers
    description: str = ""
    options: dict[str, Any] = field(default_factory=dict)
    manifest_dir: Path = Path()
    origin: Path | None = None  # the manifest file that declares it (port --write edits it)

    def variant_for(self, version: Version) -> Variant | None:
        for variant in self.variants:
            if variant.matches(version):
                return variant
        return None

    def covered_versions(self) -> str:
        return " | ".join(v.versions or "any" for v in self.variants) or "any"


@dataclass(frozen=True)
class PackagePin:
    name: str
    specifier: str
    reason: str = ""


@dataclass(frozen=True)
class Stack:
    python: str | None = None
    cann: str | None = None
    packages: tuple[PackagePin, ...] = ()
    from_metadata: str | None = None  # "vllm-ascend==0.23.0": pins were read from its METADATA

    def pin(self, name: str) -> PackagePin | None:
        wanted = canonicalize_name(name)
        return next((p for p in self.packages if canonicalize_name(p.name) == wanted), None)


@dataclass(frozen=True)
class Manifest:
    name: str
    path: Path | None
    description: str = ""
    stack: Stack = Stack()
    protected: tuple[str, ...] = ()
    no_deps: tuple[str, ...] = ()
    artifacts: tuple[Artifact, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    launch: dict[str, Any] = field(default_factory=dict)
    target: dict[str, Any] = field(default_factory=dict)
    accepted_conflicts: tuple[dict[str, str], ...] = ()
    extends: tuple[str, ...] = ()
    log_rules: tuple[dict[str, Any], ...] = ()  # extra `ascendpatch logs` rules

    @property
    def tp_size(self) -> int:
        """The tensor-parallel size the manifest launches with (1 when it names none)."""
        return int(self.launch.get("tensor_parallel_size") or 1)

    def artifact(self, artifact_id: str) -> Artifact | None:
        for artifact in self.artifacts:
            if artifact.id == artifact_id:
                return artifact
        return None


def resolve_path(artifact: Artifact, raw: str, env: Mapping[str, str], what: str) -> Path:
    """A path from the manifest: ``${VAR}`` (e.g. ${MODEL_DIR}) expanded from ``env``, and
    relative to the manifest's folder. ``what`` names the key in errors ("source")."""
    try:
        expanded = string.Template(raw).substitute(env)
    except KeyError as exc:
        raise InvalidInputError(
            f"artifact {artifact.id}: {what} {raw!r} needs ${{{exc.args[0]}}}, which is not set",
            fix=f"export {exc.args[0]}=<folder of the model's deploy package>") from None
    except ValueError as exc:
        raise InvalidInputError(f"artifact {artifact.id}: {what} {raw!r}: {exc}") from None
    path = Path(expanded)
    return path if path.is_absolute() else artifact.manifest_dir / path
