"""The environment ``serve`` starts vLLM with: the CANN toolkit's and ATB's ``set_env.sh``
sourced into the child's environment only, then the manifest's ``env:`` entries.

A ``set_env.sh`` is run by bash, as the user who serves (root, in most images): a script in a
folder another uid can write, or owned by someone else, could run anything as that user, so it
is refused (the same rule as sudo's for its files: every folder on the way owned by root or
us and writable by no one else, a sticky folder such as /tmp excepted for an entry root or we
own). The scripts run in ``bash -c 'source ...; env -0'`` and only what it prints is read back:
this process's own environment never changes.

The standard locations are under ``/``; ``ASCENDPATCH_SERVE_ROOT`` moves them under another
folder, for tests and sandboxes only (a stand-in CANN tree).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ascendpatch import redact
from ascendpatch.env import inscript
from ascendpatch.errors import InvalidInputError
from ascendpatch.paths import foreign_owner, open_to_others
from ascendpatch.redact import shown

ROOT_VAR = "ASCENDPATCH_SERVE_ROOT"  # tests and sandboxes: where the standard paths start
STANDARD = ("usr/local/Ascend/ascend-toolkit/set_env.sh", "usr/local/Ascend/nnal/atb/set_env.sh")
SOURCE_TIMEOUT = 60.0
_BASH_NOISE = frozenset({"_", "SHLVL", "PWD", "OLDPWD"})  # what bash itself sets
# a script's own exit status is not its verdict (the last test of many set_env.sh is false)
_SOURCE = 'for f in "$@"; do . "$f" 1>&2; done; exec env -0'


@dataclass(frozen=True)
class ServeEnv:
    env: dict[str, str]  # the child's whole environment
    sourced: tuple[Path, ...]  # the set_env.sh scripts read, in order
    added: tuple[tuple[str, str], ...]  # names the scripts or the manifest set or changed
    removed: tuple[str, ...] = ()  # names the scripts unset
    dropped: tuple[str, ...] = ()  # ``NAME: entry`` per empty or relative search-path entry

    def shown_additions(self) -> list[str]:
        """``NAME=value`` per addition, secrets masked."""
        return [f"{name}={shown(name, value)}" for name, value in self.added]


def standard_root(env: Mapping[str, str]) -> Path:
    return Path(env.get(ROOT_VAR) or "/")


def candidates(declared: Sequence[str], env: Mapping[str, str]) -> list[Path]:
    """The manifest's ``launch.set_env`` paths when it names any (each absolute, and a file),
    else the standard locations that exist under the root. (A relative path would be checked
    from the current folder and sourced from ``/``, where bash runs: two different files.)"""
    if declared:
        relative = [p for p in declared if not Path(p).is_absolute()]
        if relative:
            raise InvalidInputError(f"the manifest's launch.set_env names {relative[0]!r}, a "
                                    "relative path", fix="name the script by its absolute path "
                                    "(/usr/local/Ascend/ascend-toolkit/set_env.sh)")
        missing = [p for p in declared if not Path(p).is_file()]
        if missing:
            raise InvalidInputError(f"the manifest's launch.set_env names {missing[0]}, which is "
                                    "not a file", fix="correct the path in the manifest")
        return [Path(p) for p in declared]
    root = standard_root(env)
    return [root / rel for rel in STANDARD if (root / rel).is_file()]


def _entry_problem(path: Path, info: os.stat_result, parent: os.stat_result | None) -> str | None:
    """Why an entry met on the way lets another user choose the script (paths.untrusted's
    rule): it is another user's, it is a file others can write, or its folder is one others
    can write without the sticky bit (who can then replace it)."""
    link = stat.S_ISLNK(info.st_mode)
    why = foreign_owner(info)
    if why is None and not link and not stat.S_ISDIR(info.st_mode):
        why = open_to_others(info)  # (a folder's own mode is checked as the next one's parent)
    if why is not None:
        return f"{path}{' (a link)' if link else ''} is {why}"
    folder = open_to_others(parent, sticky_ok=True) if parent is not None else None
    if folder is not None:
        return f"{path.parent} is {folder}, who can replace {path.name}"
    return None


MAX_LINKS = 40  # the kernel's own limit on links followed in one lookup


def walk_problem(path: Path) -> tuple[Path, str | None]:
    """``path`` resolved entry by entry as written, without following a link blindly: every
    entry met on the way (each folder, each link and the folder holding it, each folder a
    link leads through) is checked: owned by root or us, its folder writable by no other user
    unless sticky. Returns the resolved path and why it is unsafe (None: it is safe)."""
    pending = list(reversed(path.absolute().parts[1:]))
    current, folder, links = Path("/"), Path("/").stat(), 0
    while pending:
        name = pending.pop()
        if name in ("", "."):
            continue
        if name == "..":
            current = current.parent
            folder = current.stat()
            continue
        entry = current / name
        try:
            info = os.lstat(entry)
        except OSError as exc:
            return entry, f"{entry} cannot be read ({exc.strerror})"
        problem = _entry_problem(entry, info, folder)
        if problem is not None:
            return entry, problem
        if stat.S_ISLNK(info.st_mode):
            links += 1
            if links > MAX_LINKS:
                return entry, f"{path} leads through more than {MAX_LINKS} links"
            target = entry.readlink()
            if target.is_absolute():
                current, folder = Path("/"), Path("/").stat()
            pending.extend(reversed(target.parts[1:] if target.is_absolute() else target.parts))
            continue
        if pending and not stat.S_ISDIR(info.st_mode):
            return entry, f"{entry} is not a folder"
        current, folder = entry, info
    return current, None


def script_problem(path: Path) -> str | None:
    """Why running ``path`` as this user is unsafe (None: it is safe): every entry met while
    resolving it as written (:func:`walk_problem`) owned by root or us, writable by no other
    user (a sticky folder's entry must be ours or root's), the script a regular file."""
    real, problem = walk_problem(path)
    if problem is not None:
        return problem
    if not stat.S_ISREG(os.lstat(real).st_mode):
        return f"{real} is not a regular file"
    return None


def _parse(data: bytes) -> dict[str, str]:
    out: dict[str, str] = {}
    for entry in data.split(b"\0"):
        name, sep, value = entry.partition(b"=")
        if sep and name:
            out[name.decode("utf-8", "surrogateescape")] = value.decode("utf-8",
                                                                        "surrogateescape")
    return out


def source(scripts: Sequence[Path], env: Mapping[str, str]) -> dict[str, str]:
    """The environment after bash has sourced ``scripts`` (in order) into a copy of ``env``."""
    for script in scripts:
        problem = script_problem(script)
        if problem is not None:
            raise InvalidInputError(f"refusing to source {script}: {problem}; it would run as "
                                    f"uid {os.getuid()}",
                                    fix="make the folders and the script owned by root and "
                                        "writable by root only")
    named = ", ".join(map(str, scripts))
    try:  # (bounded: a script that prints for ever is not held in memory, nor waited for)
        out, err, code = inscript.run_bounded(
            ["bash", "--noprofile", "--norc", "-c", _SOURCE, "bash", *map(str, scripts)],
            env=env, timeout=SOURCE_TIMEOUT, cwd="/")
    except inscript.ScriptTimeout:
        raise InvalidInputError(f"sourcing {named} did not finish in {SOURCE_TIMEOUT:g} s "
                                "(it and what it started were stopped)",
                                fix="run the script in a shell to see where it waits") from None
    except inscript.ScriptError as exc:  # more than 4 MiB of it, or bash cannot start
        raise InvalidInputError(f"sourcing {named} failed: {redact.text(str(exc))[:300]}",
                                fix="run the script in a shell to see what it does") from None
    if code != 0:
        # (the script's last words may quote what it was given: a password in a URL, ...)
        tail = err.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
        raise InvalidInputError(f"sourcing {named} failed (exit {code}: "
                                f"{redact.text(tail[0])[:200]})",
                                fix="run the script in a shell to see the error")
    return _parse(out)


def search_paths(env: dict[str, str]) -> list[str]:
    """Drop, in place, the empty and relative entries of every ``*PATH`` list in ``env``
    (``PATH``, ``LD_LIBRARY_PATH``, ``PYTHONPATH``, ``ASCEND_*_PATH``...): an empty entry, as
    ``export X=/a:$X`` leaves when ``X`` was unset, means the current folder, so whoever can
    write the folder root serves from would choose its libraries and modules. A list left
    with no entry is removed. Returns ``NAME: entry`` per dropped entry."""
    dropped: list[str] = []
    for name in [n for n in env if n.endswith("PATH")]:
        entries = env[name].split(os.pathsep)
        kept = [e for e in entries if e.startswith("/")]
        if len(kept) == len(entries):
            continue
        dropped += [f"{name}: {e!r}" for e in entries if not e.startswith("/")]
        if kept:
            env[name] = os.pathsep.join(kept)
        else:
            del env[name]
    return dropped


def build(env: Mapping[str, str], declared: Sequence[str],
          required: Mapping[str, str]) -> ServeEnv:
    """The child's environment: ``env`` with the set_env.sh scripts' changes and the manifest's
    ``required`` entries (``env:``) on top, every search path absolute (:func:`search_paths`)."""
    scripts = candidates(declared, env)
    after = source(scripts, env) if scripts else dict(env)
    child = dict(env)
    removed = tuple(sorted(n for n in env if n not in after and n not in _BASH_NOISE))
    for name in removed:
        del child[name]
    added = [(n, v) for n, v in after.items() if n not in _BASH_NOISE and env.get(n) != v]
    added += [(n, v) for n, v in required.items() if after.get(n) != v]
    child.update(dict(added))
    dropped = search_paths(child)
    added = [(n, child[n]) for n, _ in added if n in child]
    return ServeEnv(child, tuple(scripts), tuple(added), removed, tuple(dropped))
