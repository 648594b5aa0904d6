"""What a manifest document must look like, and every check of one: all problems at once.

The loader (:mod:`ascendpatch.manifest.loader`) reads the YAML; :func:`problems` says what is
wrong with the document it read, each problem as ``"<key path>: <what is wrong>"``
(``artifacts[3].kind: unknown kind 'dif'; did you mean 'diff'? ...``): first the shape, from the
declarative schema (:mod:`ascendpatch.manifest.schema`, which also names the nearest known key
of an unknown one), then what a shape cannot say (duplicate ids, each kind's own options,
``versions`` where a kind acts on a distribution). :mod:`ascendpatch.manifest.export` turns
:data:`MANIFEST` into the JSON Schema editors read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ascendpatch.kinds import KIND_NAMES, KINDS
from ascendpatch.manifest import schema as s

LOG_CLASSES = ("fault", "benign", "marker")


def problems(document: Mapping[str, Any]) -> list[str]:
    """Every problem of a manifest document (a mapping), in the order of its keys' checks."""
    return s.validate(document, MANIFEST) + _semantic_problems(document)


def _kind(text: str) -> str | None:
    if text in KIND_NAMES:
        return None
    return (f"unknown kind {s.shown(text)}{s.did_you_mean(text, KIND_NAMES)} (known: "
            f"{', '.join(sorted(KIND_NAMES))})")


def _log_class(text: str) -> str | None:
    if text in LOG_CLASSES:
        return None
    return (f"{s.shown(text)} is not a log rule class{s.did_you_mean(text, LOG_CLASSES)} "
            f"({', '.join(LOG_CLASSES)})")


_HASHES = s.Obj({"before": s.ListOf(s.Str(s.sha256_hex)), "after": s.ListOf(s.Str(s.sha256_hex))})
_VARIANT_FIELDS: dict[str, s.Schema] = {
    "versions": s.Str(s.specifier),
    "source": s.Str(),
    "targets": s.ListOf(s.Str()),
    "sha256": s.MapOf(_HASHES),
}
_VARIANT = s.Obj(_VARIANT_FIELDS)  # versions: required where the kind acts on a distribution
ARTIFACT = s.Obj(
    {
        "id": s.Str(s.identifier),
        "title": s.Str(),
        "kind": s.Str(_kind),
        "distribution": s.Str(),
        "description": s.Str(),
        "enabled": s.Bool(),
        "not_needed": s.Obj({"versions": s.Str(s.specifier), "reason": s.Str()},
                            frozenset({"versions", "reason"})),
        "needed_if": s.Obj({"file": s.Str(), "calls_unguarded": s.ListOf(s.Str(s.dotted_name))},
                           frozenset({"file", "calls_unguarded"})),
        "variants": s.ListOf(_VARIANT),
        "options": s.MapOf(s.AnyValue()),  # each kind's own schema: _kind_problems
        **_VARIANT_FIELDS,
    },
    frozenset({"id", "title", "kind"}),
)
_PIN = s.OneOf((s.Str(s.specifier),
                s.Obj({"version": s.Str(s.specifier), "reason": s.Str()}, frozenset({"version"}))))
MANIFEST = s.Obj(
    {
        "name": s.Str(s.identifier),
        "description": s.Str(),
        "extends": s.ListOf(s.Str()),
        "stack": s.Obj({"python": s.Str(s.specifier), "cann": s.Str(),
                        "from_metadata": s.Str(s.requirement), "packages": s.MapOf(_PIN)}),
        "protected": s.ListOf(s.Str()),
        "no_deps": s.ListOf(s.Str()),
        "accepted_conflicts": s.ListOf(s.Obj(
            {"package": s.Str(), "requirement": s.Str(), "reason": s.Str()},
            frozenset({"package", "requirement", "reason"}))),
        "env": s.MapOf(s.Str(), key=s.env_name),
        "launch": s.MapOf(s.AnyValue()),
        "target": s.Obj({"python": s.ListOf(s.Str()), "image": s.Str(),
                         "offline": s.Bool()}),
        "artifacts": s.ListOf(ARTIFACT),
        "log_rules": s.ListOf(s.Obj({"id": s.Str(s.identifier), "class": s.Str(_log_class),
                                     "pattern": s.Str(), "fix": s.Str(), "why": s.Str(),
                                     "message": s.Str(), "per_rank": s.Bool()},
                                    frozenset({"id", "class", "pattern"}))),
    },
    frozenset({"name"}),
)


def _semantic_problems(document: Mapping[str, Any]) -> list[str]:
    problems: list[str] = []
    launch = document.get("launch")
    tp = launch.get("tensor_parallel_size") if isinstance(launch, dict) else None
    if tp is not None and not (isinstance(tp, int) and not isinstance(tp, bool) and tp >= 1):
        problems.append(f"launch.tensor_parallel_size: expected a whole number >= 1, got "
                        f"{tp!r:.40}")
    seen: set[str] = set()
    artifacts = document.get("artifacts")  # not a list: the schema says so
    for index, artifact in enumerate(artifacts if isinstance(artifacts, list) else []):
        if not isinstance(artifact, dict):
            continue
        where = f"artifacts[{index}]"
        artifact_id = artifact.get("id")
        if not isinstance(artifact_id, str):
            continue  # the schema reports it ("expected a string")
        if artifact_id in seen:
            problems.append(f"{where}.id: duplicate id {artifact_id!r}")
        seen.add(str(artifact_id))
        has_variants = "variants" in artifact
        flat = [k for k in ("versions", "source", "targets", "sha256") if k in artifact]
        if has_variants and flat:
            problems.append(f"{where}: give either 'variants' or {', '.join(flat)}, not both")
        problems += _kind_problems(artifact, where)
    return problems


def _kind_problems(artifact: Mapping[str, Any], where: str) -> list[str]:
    """What the artifact's kind asks of it: its own options schema, and ``versions`` where the
    kind acts on a distribution (elsewhere a version range would mean nothing)."""
    kind = KINDS.get(str(artifact.get("kind")))
    if kind is None:
        return []  # an unknown or planned kind: the schema or the planner says so
    from ascendpatch.kinds.base import options_schema  # (loaded with the kind itself)

    problems: list[str] = []
    options = artifact.get("options")
    if isinstance(options, dict):
        problems += s.validate(options, options_schema(kind), f"{where}.options")
    if not kind.needs_distribution:
        return problems
    variants = artifact.get("variants")
    if not isinstance(variants, list):
        if "versions" not in artifact:
            problems.append(f"{where}.versions: required key is missing (or give 'variants'); "
                            f"kind {kind.name} acts on an installed distribution")
        return problems
    for index, variant in enumerate(variants):
        if isinstance(variant, dict) and "versions" not in variant:
            problems.append(f"{where}.variants[{index}].versions: required key is missing")
    return problems
