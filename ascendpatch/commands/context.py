"""What every command needs: the target, the manifest, the environment and lock settings."""

from __future__ import annotations

import contextlib
import enum
import os
from argparse import Namespace
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ascendpatch.results import Hint, Phrase

if TYPE_CHECKING:  # at run time only where used: `audit` must not pay for yaml and the schema
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
    from ascendpatch.errors import InvalidInputError
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


class Reach(enum.Enum):
    """How far a command reaches into the target."""

    NONE = "none"  # the manifest and the files named on the command line only
    SITE = "site"  # reads or writes the target's site-packages
    INTERPRETER = "interpreter"  # also runs the target interpreter (probes, pip, plugin checks)


# The one table of it. Discovery executes a manifest's target.python candidates only for
# INTERPRETER commands; hints repeat --python / --site-packages only for commands with a reach.
REACH = {"apply": Reach.SITE, "plan": Reach.SITE, "revert": Reach.SITE, "status": Reach.SITE,
         "snapshot": Reach.SITE, "audit": Reach.SITE, "verify": Reach.INTERPRETER,
         "install": Reach.INTERPRETER, "lock": Reach.INTERPRETER, "capture": Reach.INTERPRETER}


def reach(command: str | None) -> Reach:
    return REACH.get(command or "", Reach.NONE)


def target_from_args(args: Namespace, preferred: Sequence[str] = ()) -> Target:
    from ascendpatch.env import discover
    from ascendpatch.env.target import from_python, from_site_packages

    if args.site_packages is not None:
        return from_site_packages(args.site_packages)
    if args.python is not None:
        return from_python(args.python)
    command = getattr(args, "command", None)
    return discover.find_target(os.environ, preferred=preferred,
                                run_preferred=reach(command) is Reach.INTERPRETER)


def from_args(args: Namespace) -> Context:
    """The manifest (--manifest) and the target (--python / --site-packages / discovery)."""
    from ascendpatch.manifest import loader
    from ascendpatch.shell import output

    manifest = loader.load(args.manifest)
    check_with(manifest, tuple(getattr(args, "with_ids", ())))
    target = target_from_args(args, manifest.target.get("python") or ())
    color = args.color
    return Context(target=target, manifest=manifest, env=dict(os.environ),
                   lock_timeout=args.lock_timeout,
                   on_wait=lambda msg: output.progress(msg, color=color),
                   enabled_extra=tuple(getattr(args, "with_ids", ())))


def check_with(manifest: Manifest, ids: Sequence[str]) -> None:
    """``--with ID`` must name an artifact of the manifest (a typo must not pass silently)."""
    from ascendpatch.errors import InvalidInputError

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
    from ascendpatch.manifest import loader

    return loader.load(args.manifest)
