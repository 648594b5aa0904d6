"""What every command needs: the target, the manifest, the environment and lock settings."""

from __future__ import annotations

import contextlib
import os
from argparse import Namespace
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ascendpatch import redact
from ascendpatch.errors import AscendpatchError, InvalidInputError
from ascendpatch.paths import shown
from ascendpatch.results import Hint, Phrase
from ascendpatch.shell.cliargs import Reach, reach

if TYPE_CHECKING:  # at run time only where used: `audit` must not pay for yaml and the schema
    from ascendpatch.config import Config
    from ascendpatch.env.pipadapter import Source
    from ascendpatch.env.target import Target
    from ascendpatch.manifest.model import Artifact, Manifest
    from ascendpatch.store.ledger import LedgerStore


@dataclass(frozen=True)
class Context:
    target: Target
    manifest: Manifest
    env: Mapping[str, str]
    lock_timeout: float = 300.0
    on_wait: Callable[[str], None] | None = None
    enabled_extra: tuple[str, ...] = ()

    @property
    def store(self) -> LedgerStore:
        from ascendpatch.store.ledger import LedgerStore

        return LedgerStore(self.target.root, store_roots(self.manifest.artifacts, self.env))


def store_roots(artifacts: Sequence[Artifact], env: Mapping[str, str]) -> tuple[Path, ...]:
    """Trees besides the target that the manifest's kinds write into (the Hugging Face cache,
    ``${MODEL_DIR}``): paths in the ledger and journal may lie there, nowhere else. A root
    that cannot be known now (an unset variable) is no root: its paths stay refused."""
    from ascendpatch.kinds import KINDS

    roots: list[Path] = []
    for artifact in artifacts:
        kind = KINDS.get(artifact.kind)  # None: a planned kind, nothing written yet
        try:
            root = kind.root_for(artifact, env) if kind is not None else None
        except InvalidInputError:
            continue
        if root is not None and root not in roots:
            roots.append(root)
    return tuple(roots)


@dataclass
class Session:
    store: LedgerStore
    notes: list[str] = field(default_factory=list)


@contextmanager
def locked(ctx: Context) -> Iterator[Session]:
    session = Session(ctx.store)
    with session.store.session(ctx.lock_timeout, ctx.on_wait, session.notes):
        yield session


@contextmanager
def shared(ctx: Context) -> Iterator[Session]:
    """A reader's lock: waits for a live apply or revert to finish, never blocks readers.
    Read-only commands (plan, status, verify, snapshot, capture, audit) hold it; they never
    roll back an interrupted run (that writes): they refuse while its journal is there,
    naming the command that recovers it."""
    session = Session(ctx.store)
    with session.store.session(ctx.lock_timeout, ctx.on_wait, session.notes, shared=True):
        yield session


def writing(ctx: Context, *, dry_run: bool) -> contextlib.AbstractContextManager[Session]:
    """The lock of a writing command (apply, revert): exclusive, recovering first; a dry run
    writes nothing, so it reads as the read-only commands do (:func:`shared`)."""
    return shared(ctx) if dry_run else locked(ctx)


MANIFEST_ENV = "ASCENDPATCH_MANIFEST"
DEFAULT_MANIFEST = "default"


@dataclass(frozen=True)
class Choice:
    """A target or manifest as chosen by the precedence, and where it came from."""

    value: Path | str | None  # None: no target named anywhere, discovery decides
    origin: str  # "--python", "$ASCENDPATCH_PYTHON", a config file, "discovery", "default"
    key: str = "python"  # python / site-packages / manifest


def _config(args: Namespace) -> Config | None:
    """The config file that applies (read once per run, only when something needs it)."""
    from ascendpatch import config

    if "_config" not in vars(args):
        try:
            cwd = Path.cwd()
        except OSError:  # the current folder was removed: no project config to look for
            cwd = Path("/")
        args._config = config.find(cwd, os.environ)
    found: Config | None = args._config
    return found


def choose_target(args: Namespace) -> Choice:
    """flag > $ASCENDPATCH_PYTHON > config > discovery (value None)."""
    from ascendpatch.env import introspection

    if getattr(args, "site_packages", None) is not None:
        return Choice(args.site_packages, "--site-packages", "site-packages")
    if getattr(args, "python", None) is not None:
        return Choice(args.python, "--python")
    from_env = introspection.from_env(os.environ)
    if from_env is not None:
        return Choice(from_env, f"${introspection.ENV_VAR}")
    found = _config(args)
    for key in ("python", "site-packages"):
        path = found.resolved(key) if found is not None else None
        if found is not None and path is not None:
            if not os.path.lexists(path):
                raise InvalidInputError(redact.text(f"{found.where(key)}: {path} does not exist"),
                                        fix=f"edit or remove that line, or pass --{key}")
            return Choice(path, shown(found.path), key)
    return Choice(None, "discovery")


def choose_manifest(args: Namespace) -> Choice:
    """flag > $ASCENDPATCH_MANIFEST > config > the bundled catalog."""
    if getattr(args, "manifest", None) is not None:
        return Choice(args.manifest, "--manifest", "manifest")
    if os.environ.get(MANIFEST_ENV):
        return Choice(os.environ[MANIFEST_ENV], f"${MANIFEST_ENV}", "manifest")
    found = _config(args)
    named = found.manifest() if found is not None else None
    if found is not None and named is not None:
        return Choice(named, shown(found.path), "manifest")
    return Choice(DEFAULT_MANIFEST, "default", "manifest")


def target_from_args(args: Namespace, preferred: Sequence[str] = ()) -> Target:
    from ascendpatch.env import discover
    from ascendpatch.env.target import from_python, from_site_packages

    choice = choose_target(args)
    if choice.key == "site-packages":
        target = from_site_packages(Path(choice.value or ""))
    elif choice.value is not None:
        target = from_python(Path(choice.value))
    else:
        command = getattr(args, "command", None)
        target = discover.find_target(os.environ, preferred=preferred,
                                      run_preferred=reach(command) is Reach.INTERPRETER)
    said_target(target, choice)
    return target


def optional_target(args: Namespace) -> Target | None:
    """For commands that also work without a target (check-launch, logs): the target, or
    None when none was named and discovery found none. A target that was named (a flag,
    ``$ASCENDPATCH_PYTHON``, a config file) but cannot be used is the user's error, raised
    (exit 2) as every other command does: never quietly "no target found"."""
    if choose_target(args).value is not None:
        return target_from_args(args)
    try:
        return target_from_args(args)
    except AscendpatchError:
        return None


def said_target(target: Target, choice: Choice) -> None:
    """-v: which target this run uses and where that came from."""
    from ascendpatch import progress

    where = ("found by discovery: no --python, --site-packages, $ASCENDPATCH_PYTHON or config"
             if choice.value is None else f"from {choice.origin}")
    progress.detail(f"target {target.describe()} ({where})")


def from_args(args: Namespace) -> Context:
    """The manifest and the target, each by the precedence flag > env > config > discovery
    (cliargs.PRECEDENCE says it in --help)."""
    from ascendpatch.shell import output

    manifest = manifest_from_args(args)
    check_with(manifest, tuple(getattr(args, "with_ids", ())))
    target = target_from_args(args, manifest.target.get("python") or ())
    color = args.color
    return Context(target=target, manifest=manifest, env=dict(os.environ),
                   lock_timeout=args.lock_timeout,
                   on_wait=lambda msg: output.progress(msg, color=color),
                   enabled_extra=tuple(getattr(args, "with_ids", ())))


def check_with(manifest: Manifest, ids: Sequence[str]) -> None:
    """``--with ID`` must name an artifact of the manifest (a typo must not pass silently)."""
    unknown = [i for i in ids if manifest.artifact(i) is None]
    if unknown:
        known = ", ".join(a.id for a in manifest.artifacts) or "none"
        raise InvalidInputError(f"--with {', '.join(unknown)}: no such artifact in manifest "
                                f"{manifest.name} (known: {known})",
                                fix=Phrase("check the id with '", Hint(("status",)), "'"))


def source_from_args(args: Namespace) -> Source:
    from ascendpatch.env.pipadapter import Source

    return Source(wheelhouse=args.wheelhouse, offline=args.offline)


def manifest_from_args(args: Namespace) -> Manifest:
    from ascendpatch import progress
    from ascendpatch.manifest import loader

    choice = choose_manifest(args)
    name = str(choice.value)
    if choice.origin not in ("--manifest", f"${MANIFEST_ENV}", "default"):
        try:  # a name or path from a config file: the error names that file and key
            loader.resolve_name(name)
        except InvalidInputError as exc:
            found = _config(args)
            where = found.where("manifest") if found is not None else choice.origin
            named = found is not None and found.manifest() == found.get("manifest")
            said = exc.message if named else "no such manifest file"  # where() shows the path
            raise InvalidInputError(redact.text(f"{where}: {said}"),
                                    fix="edit or remove that line, or pass --manifest") \
                from None
    manifest = loader.load(name)
    where = ("the bundled catalog: no --manifest, $ASCENDPATCH_MANIFEST or config"
             if choice.origin == "default" else f"from {choice.origin}")
    progress.detail(f"manifest {name} ({where})")
    return manifest
