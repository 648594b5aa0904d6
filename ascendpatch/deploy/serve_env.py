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
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ascendpatch.errors import InvalidInputError
from ascendpatch.redact import shown

ROOT_VAR = "ASCENDPATCH_SERVE_ROOT"  # tests and sandboxes: where the standard paths start
STANDARD = ("usr/local/Ascend/ascend-toolkit/set_env.sh", "usr/local/Ascend/nnal/atb/set_env.sh")
SOURCE_TIMEOUT = 60.0
MAX_ENV_BYTES = 4 * 1024 * 1024
_BASH_NOISE = frozenset({"_", "SHLVL", "PWD", "OLDPWD"})  # what bash itself sets
# a script's own exit status is not its verdict (the last test of many set_env.sh is false)
_SOURCE = 'for f in "$@"; do . "$f" 1>&2; done; exec env -0'


@dataclass(frozen=True)
class ServeEnv:
    env: dict[str, str]  # the child's whole environment
    sourced: tuple[Path, ...]  # the set_env.sh scripts read, in order
    added: tuple[tuple[str, str], ...]  # names the scripts or the manifest set or changed
    removed: tuple[str, ...] = ()  # names the scripts unset

    def shown_additions(self) -> list[str]:
        """``NAME=value`` per addition, secrets masked."""
        return [f"{name}={shown(name, value)}" for name, value in self.added]


def standard_root(env: Mapping[str, str]) -> Path:
    return Path(env.get(ROOT_VAR) or "/")


def candidates(declared: Sequence[str], env: Mapping[str, str]) -> list[Path]:
    """The manifest's ``launch.set_env`` paths when it names any (each must exist), else the
    standard locations that exist under the root."""
    if declared:
        missing = [p for p in declared if not Path(p).is_file()]
        if missing:
            raise InvalidInputError(f"the manifest's launch.set_env names {missing[0]}, which is "
                                    "not a file", fix="correct the path in the manifest")
        return [Path(p) for p in declared]
    root = standard_root(env)
    return [root / rel for rel in STANDARD if (root / rel).is_file()]


def _trusted_uids() -> set[int]:
    return {0, os.getuid()}


def _entry_problem(path: Path, info: os.stat_result, parent: os.stat_result | None) -> str | None:
    if info.st_uid not in _trusted_uids():
        return f"{path} belongs to uid {info.st_uid}"
    if not stat.S_ISDIR(info.st_mode) and info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"{path} can be written by other users (mode {stat.filemode(info.st_mode)})"
    if parent is not None and parent.st_mode & (stat.S_IWGRP | stat.S_IWOTH) \
            and not parent.st_mode & stat.S_ISVTX:
        return (f"{path.parent} can be written by other users (mode "
                f"{stat.filemode(parent.st_mode)}), who can replace {path.name}")
    return None


def script_problem(path: Path) -> str | None:
    """Why running ``path`` as this user is unsafe (None: it is safe): every folder from / to
    the script (links resolved, and the links themselves) owned by root or us, writable by no
    other user (a sticky folder's entry must be ours or root's), the script a regular file."""
    real = Path(os.path.realpath(path))
    chain = [Path(*real.parts[:i]) for i in range(1, len(real.parts) + 1)]
    links = [p for p in (Path(*path.absolute().parts[:i])
                         for i in range(2, len(path.absolute().parts) + 1)) if p.is_symlink()]
    previous: os.stat_result | None = None
    for item in chain:
        try:
            info = item.stat()
        except OSError as exc:
            return f"{item} cannot be read ({exc.strerror})"
        problem = _entry_problem(item, info, previous) if item != Path("/") else None
        if problem is not None:
            return problem
        previous = info
    for link in links:
        info = link.lstat()
        if info.st_uid not in _trusted_uids():
            return f"{link} is a link owned by uid {info.st_uid}"
    if not stat.S_ISREG(real.stat().st_mode):
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
    try:
        run = subprocess.run(["bash", "--noprofile", "--norc", "-c", _SOURCE, "bash",
                              *map(str, scripts)], env=dict(env), capture_output=True,
                             stdin=subprocess.DEVNULL, timeout=SOURCE_TIMEOUT, check=False)
    except subprocess.TimeoutExpired:
        raise InvalidInputError(f"sourcing {', '.join(map(str, scripts))} did not finish in "
                                f"{SOURCE_TIMEOUT:g} s") from None
    if run.returncode != 0 or len(run.stdout) > MAX_ENV_BYTES:
        tail = run.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
        raise InvalidInputError(f"sourcing {', '.join(map(str, scripts))} failed (exit "
                                f"{run.returncode}: {tail[0][:200]})",
                                fix="run the script in a shell to see the error")
    return _parse(run.stdout)


def build(env: Mapping[str, str], declared: Sequence[str],
          required: Mapping[str, str]) -> ServeEnv:
    """The child's environment: ``env`` with the set_env.sh scripts' changes and the manifest's
    ``required`` entries (``env:``) on top."""
    scripts = candidates(declared, env)
    after = source(scripts, env) if scripts else dict(env)
    child = dict(env)
    removed = tuple(sorted(n for n in env if n not in after and n not in _BASH_NOISE))
    for name in removed:
        del child[name]
    added = [(n, v) for n, v in after.items() if n not in _BASH_NOISE and env.get(n) != v]
    added += [(n, v) for n, v in required.items() if after.get(n) != v]
    child.update(dict(added))
    return ServeEnv(child, tuple(scripts), tuple(added), removed)
