"""The protocol every artifact kind satisfies, its defaults, and the findings it returns.

A kind only *reads*: it looks at the target's current files and says, per file, what state
it is in, what the file should hold once applied (``desired``) and what it held before
(``original``), where it can know. The engine decides what to write and does it through
:mod:`ascendpatch.store`. Adding a kind = one module with a :class:`BaseKind` subclass + one
line in ``kinds/__init__.py`` (+ ``python tools/make_schemas.py``, which lists it in the
manifest schema). What only that kind knows stays in its module: how it picks a variant
(``choose_variant``) and what ``verify`` checks for it beyond its files (``checks``).

Glossary (each word means one thing):

* ``ArtifactSite`` (variable ``site``): where one artifact acts: its variant, distribution,
  root folder, source file and environment.
* ``FileFinding``: what a kind found about one file: its ``FileState``, current, desired and
  original content.
* ``Content`` (:mod:`ascendpatch.pipeline.filestate`, imported here for the kinds): what a
  file holds or should hold, possibly unknown, with its sha256 computed once.
* ``FileState``: pristine / applied / partial / conflict, for a hunk, a file or an artifact
  (:mod:`ascendpatch.pipeline.filestate`; ``FileState.combine`` folds files into an
  artifact's state); and outdated, which only the engine says (``engine.recognise``):
  content ascendpatch wrote itself, as its ledger proves, whose source has changed since.
* ``ArtifactPlan`` (:mod:`ascendpatch.pipeline.planner`): one artifact's findings, or why it is
  skipped.
* ``Skip``: why an artifact does not act on a target, with its level and fix.
* *engine* (:mod:`ascendpatch.pipeline.engine`): what acts on plans, through the store; the
  code that reads and places a unified diff is the *patch matcher*
  (:mod:`ascendpatch.patchfile.diffpatch`), and vLLM's own engine process is *EngineCore*.
* ``Context`` (:mod:`ascendpatch.commands.context`, variable ``ctx``): what a *command* needs:
  target, manifest, environment, lock settings.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Protocol

from ascendpatch.env.target import Distribution
from ascendpatch.errors import AscendpatchError, InvalidInputError, RefusedError, UnsafePathError
from ascendpatch.hashing import sha256_optional
from ascendpatch.manifest import schema as s
from ascendpatch.manifest.model import Artifact, Variant
from ascendpatch.paths import NotRegularFileError, below, open_regular
from ascendpatch.pipeline.filestate import UNKNOWN as UNKNOWN
from ascendpatch.pipeline.filestate import Content as Content
from ascendpatch.pipeline.filestate import FileState
from ascendpatch.results import Level
from ascendpatch.store.ledger import STATE_DIR
from ascendpatch.store.root import Root, link_fix

if TYPE_CHECKING:
    from ascendpatch.inspect.checks.base import Check


@dataclass(frozen=True)
class FileFinding:
    rel: str  # relative to the distribution's location
    path: Path
    state: FileState
    current: bytes | None
    desired: Content
    original: Content
    detail: str = ""
    forceable: bool = False  # --force may overwrite this conflict with ``desired``
    prune_to: Path | None = None  # when removed (revert), remove emptied folders up to here
    # Why ``original`` may not be restored without a ledger record proving ascendpatch wrote
    # the current content (None: content alone is proof enough).
    revert_refusal: str | None = None

    @cached_property
    def current_sha256(self) -> str | None:
        """The digest of ``current``, computed once; taken from ``original`` or ``desired``
        when the kind built it from the same bytes (a pristine file is its own original, an
        applied one its own desired)."""
        for content in (self.original, self.desired):
            if content.known and content.data is self.current:
                return content.sha256
        return sha256_optional(self.current)


@dataclass(frozen=True)
class ArtifactSite:
    artifact: Artifact
    variant: Variant
    dist: Distribution | None
    root: Path
    source: Path | None
    env: dict[str, str] = field(default_factory=dict)
    pip: tuple[str, ...] = ()  # the target's own pip command (none for --site-packages)

    @cached_property
    def _tree(self) -> Root:
        """The tree, its real location resolved once for every file of the artifact."""
        return Root(self.root)

    @cached_property
    def _guarded(self) -> dict[str, Path]:
        return {}

    def path(self, rel: str) -> Path:
        """``rel`` under the site's tree, through the path guard: once per file of the
        artifact (prepare guards it before anything is written; inspect and the engine ask
        again: each a walk of lstat calls up from /). A refusal is never remembered."""
        known = self._guarded.get(rel)
        if known is not None:
            return known
        origin = f"artifact {self.artifact.id}"
        path, parts = self._tree.locate(rel, origin=origin)
        if STATE_DIR in PurePosixPath(rel).parts or STATE_DIR in parts:
            raise _in_state(origin, rel)
        self._guarded[rel] = path
        return path

    def read(self, rel: str) -> tuple[Path, bytes | None]:
        """The file's bytes (None: absent); see :func:`read_target_file`. The guard may have
        looked at ``rel`` a while ago (prepare, for every artifact first): the file opened is
        checked again where it really lies, before a byte of it is read, so a folder swapped
        for a link out of the tree since is refused, not read."""
        path = self.path(rel)
        return path, read_target_file(path, self.artifact,
                                      opened=lambda fd: self._opened_inside(rel, fd))

    def _opened_inside(self, rel: str, fd: int) -> None:
        """Where the open ``fd`` really lies (the kernel's own name for it, no walk), below
        the tree and outside the state folder; without /proc, the whole guard again."""
        try:
            real = str(Path(f"/proc/self/fd/{fd}").readlink())
        except OSError:
            real = ""
        if not real.startswith("/"):
            self._guarded.pop(rel, None)
            self.path(rel)
            return
        origin = f"artifact {self.artifact.id}"
        parts = below(PurePosixPath(real), self._tree.real)
        if parts is None:
            raise UnsafePathError(f"{origin}: path {rel!r} resolves to {real}, outside the "
                                  f"target {self._tree.real} (a symlink leads out of the tree)",
                                  fix=link_fix(self._tree.path / rel))
        if STATE_DIR in parts:
            raise _in_state(origin, rel)

    def record_sha256(self, rel: str) -> str | None:
        if self.dist is None:
            return None
        entry = self.dist.record.get(rel)
        return entry.sha256 if entry else None


def _in_state(origin: str, rel: str) -> UnsafePathError:
    return UnsafePathError(f"{origin}: path {rel!r} is inside ascendpatch's own state folder "
                           f"{STATE_DIR}/; a patch may not change it")


def read_target_file(path: Path, artifact: Artifact,
                     opened: Callable[[int], None] | None = None) -> bytes | None:
    """The bytes of a file of the target (None: absent). A FIFO, device or folder where
    ``artifact`` expects a file is refused: opening it without O_NONBLOCK would hang every
    command. So is a file (or folder on the way) this user may not read: one line, before
    anything is written. ``opened`` checks the open descriptor before anything is read."""
    try:
        handle, _info = open_regular(path)
    except FileNotFoundError:
        return None
    except PermissionError as exc:
        raise RefusedError(
            f"artifact {artifact.id}: cannot read {path} ({exc.strerror}); "
            "nothing was changed",
            fix="run as a user who can read and write the target (its owner, or root)") \
            from None
    except (IsADirectoryError, NotRegularFileError):
        raise RefusedError(
            f"artifact {artifact.id}: {path} is not a regular file (a folder, FIFO "
            "or device); nothing was changed",
            fix=f"move it aside (mv {path} {path}.bad) and reinstall the package that "
                "ships it") from None
    with handle:
        if opened is not None:
            opened(handle.fileno())
        return handle.read()


@dataclass(frozen=True)
class Skip:
    """Why an artifact does not act on this target (no variant, not installed, not needed)."""

    reason: str
    level: Level = Level.SKIP
    fix: str = ""  # what the user can do about it, as data (output.py words it)

    @classmethod
    def from_error(cls, exc: AscendpatchError) -> Skip:
        """An input this artifact needs is missing (e.g. ${MODEL_DIR} unset): a warning."""
        return cls(exc.message, Level.WARN, exc.fix or "")


class Kind(Protocol):
    name: str
    # True when the kind acts on an installed distribution: the artifact then needs
    # ``distribution`` and ``versions``, and its files lie in the distribution's folder.
    needs_distribution: bool
    # True when each file stands on its own (a cache fixer): a mix of done and not-done files
    # is then simply completed; False for a patch, where a half-applied state means trouble.
    independent_files: bool
    # The shape of the artifact's ``options:`` mapping, checked when the manifest is loaded.
    options_schema: s.Obj

    def root_for(self, artifact: Artifact, env: Mapping[str, str]) -> Path | None:
        """The folder the files of a kind without a distribution lie in (the Hugging Face
        cache, ``${MODEL_DIR}``); None: the target's own folder. Raise InvalidInputError when
        it cannot be known (an unset variable). Writes nothing."""

    def choose_variant(self, artifact: Artifact, dist: Distribution,
                       env: Mapping[str, str]) -> Variant | Skip | None:
        """The variant that acts on the installed ``dist``, or why the artifact does not
        apply to it (a Skip); None: no variant covers that release. Writes nothing."""

    def checks(self, artifacts: Sequence[Artifact]) -> Sequence[Check]:
        """What ``verify`` checks for this kind's ``artifacts`` of the manifest (in manifest
        order) beyond the state of their files: items of verify's check registry."""

    def prepare(self, site: ArtifactSite) -> None:
        """Validate sources and target paths; raise InvalidInputError. Writes nothing."""

    def inspect(self, site: ArtifactSite) -> list[FileFinding]:
        """The state of every file this artifact owns."""

    def nothing_to_do(self, site: ArtifactSite) -> str:
        """Why ``inspect`` found no file to act on (shown as [SKIP])."""

    def for_display(self, data: bytes) -> bytes:
        """A file's content (current or desired) as a person or a log may see it, in diffs:
        a kind whose files may hold credentials masks their values (ascendpatch.redact).
        Never what is written."""


class BaseKind:
    """The defaults of the :class:`Kind` protocol (as pre-commit's ``lang_base``): a kind
    subclasses it and overrides only what it needs."""

    name: str = ""
    needs_distribution: bool = True
    independent_files: bool = False
    options_schema: s.Obj = s.Obj({})  # no options

    def root_for(self, artifact: Artifact, env: Mapping[str, str]) -> Path | None:
        return None

    def choose_variant(self, artifact: Artifact, dist: Distribution,
                       env: Mapping[str, str]) -> Variant | Skip | None:
        """By version: the first variant whose ``versions`` cover the installed release."""
        version = dist.parsed_version
        return artifact.variant_for(version) if version is not None else None

    def checks(self, artifacts: Sequence[Artifact]) -> Sequence[Check]:
        return ()  # the state of the artifact's files (verify's artifact check) is all

    def prepare(self, site: ArtifactSite) -> None:
        pass

    def inspect(self, site: ArtifactSite) -> list[FileFinding]:
        raise NotImplementedError(f"kind {self.name} does not define inspect()")

    def nothing_to_do(self, site: ArtifactSite) -> str:
        return "no file to act on"

    def for_display(self, data: bytes) -> bytes:
        return data  # source files: shown as they are


# Options every kind accepts (read by ``verify``, whatever the kind).
COMMON_OPTIONS: dict[str, s.Schema] = {
    "requires_env": s.ListOf(s.Str(s.env_name)),  # variables the served model needs set
}


def options_schema(kind: Kind) -> s.Obj:
    """The whole schema of an artifact's ``options:`` for ``kind``: its own + the common ones."""
    own = kind.options_schema
    return s.Obj({**COMMON_OPTIONS, **own.fields}, own.required)


# ---------------------------------------------------------------------------- shared helpers


def single_target(site: ArtifactSite) -> str:
    """The one target path of an artifact whose kind replaces or creates one file."""
    if len(site.variant.targets) != 1:
        raise InvalidInputError(f"artifact {site.artifact.id}: kind {site.artifact.kind} needs "
                                f"exactly one target (has {len(site.variant.targets)})")
    return site.variant.targets[0]


def read_source(site: ArtifactSite) -> bytes:
    """The bytes of the artifact's source file (bad input, exit 2, when it cannot be read)."""
    if site.source is None:
        raise InvalidInputError(f"artifact {site.artifact.id}: needs a source file")
    try:
        return site.source.read_bytes()
    except OSError as exc:
        raise InvalidInputError(f"artifact {site.artifact.id}: source {site.source} cannot be "
                                f"read ({exc})") from None


@dataclass(frozen=True)
class OneFile:
    """The one file a single-file kind owns: where it is, what it holds, what it should hold."""

    rel: str
    path: Path
    current: bytes | None  # None: absent
    new: bytes  # the artifact's source


class SingleFileKind(BaseKind):
    """A kind that puts the artifact's one source file at its one target path (file, dropin):
    it checks both before anything is written and reads them together."""

    def prepare(self, site: ArtifactSite) -> None:
        site.path(single_target(site))
        read_source(site)

    @staticmethod
    def one_file(site: ArtifactSite) -> OneFile:
        rel = single_target(site)
        path, current = site.read(rel)
        return OneFile(rel, path, current, read_source(site))
