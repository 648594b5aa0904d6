"""What every command needs: the target, the manifest, the environment and lock settings."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

from ascendpatch.manifest.model import Manifest
from ascendpatch.store.state import StateStore
from ascendpatch.target import Target


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
