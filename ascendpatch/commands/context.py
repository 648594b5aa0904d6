"""What every command needs: the target, the manifest, the environment and lock settings."""

from __future__ import annotations

import os
from argparse import Namespace
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ascendpatch.manifest.model import Manifest
from ascendpatch.store.state import StateStore
from ascendpatch.target import Target

if TYPE_CHECKING:
    from ascendpatch.pipadapter import Source


@dataclass(frozen=True)
class Context:
    target: Target
    manifest: Manifest
    env: Mapping[str, str]
    lock_timeout: float = 300.0
    on_wait: Callable[[str], None] | None = None
    enabled_extra: tuple[str, ...] = ()

    @property
    def store(self) -> StateStore:
        return StateStore(self.target.root)


@dataclass
class Session:
    store: StateStore
    notes: list[str] = field(default_factory=list)


@contextmanager
def locked(ctx: Context) -> Iterator[Session]:
    session = Session(ctx.store)
    with session.store.session(ctx.lock_timeout, ctx.on_wait, session.notes):
        yield session


@contextmanager
def reading(ctx: Context) -> Iterator[Session]:
    """Read-only commands lock (and recover) when they can write, and read as-is otherwise."""
    store = ctx.store
    if not store.journal_path.exists() or store.writable():
        with locked(ctx) as session:
            yield session
        return
    session = Session(store)
    session.notes.append(f"an interrupted run left {store.journal_path}; run a writing "
                         "command (apply or revert) as a user who can write the target")
    yield session


def target_from_args(args: Namespace, preferred: Sequence[str] = ()) -> Target:
    from ascendpatch import discover
    from ascendpatch.target import from_python, from_site_packages

    if args.site_packages is not None:
        return from_site_packages(args.site_packages)
    if args.python is not None:
        return from_python(args.python)
    return discover.find_target(os.environ, preferred=preferred)


def from_args(args: Namespace) -> Context:
    """The manifest (--manifest) and the target (--python / --site-packages / discovery)."""
    from ascendpatch import output
    from ascendpatch.manifest import loader

    manifest = loader.load(args.manifest)
    target = target_from_args(args, manifest.target.get("python") or ())
    color = args.color
    return Context(target=target, manifest=manifest, env=dict(os.environ),
                   lock_timeout=args.lock_timeout,
                   on_wait=lambda msg: output.progress(msg, color=color),
                   enabled_extra=tuple(getattr(args, "with_ids", ())))


def source_from_args(args: Namespace) -> Source:
    from ascendpatch.pipadapter import Source

    return Source(wheelhouse=args.wheelhouse, offline=args.offline)


def manifest_from_args(args: Namespace) -> Manifest:
    from ascendpatch.manifest import loader

    return loader.load(args.manifest)
