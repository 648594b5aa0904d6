"""pip's settings, kept between runs while nothing they were read from has changed.

Reading pip's configuration is a Python start importing pip (about 0.1 s), the longest wait of
an ``install`` whose plan uv makes (env/pipconfig.py). Its answer depends on:

- the files pip's loader considers, as pip itself lists them
  (``Configuration.iter_config_files``, run by the reader: global, user, site and
  ``PIP_CONFIG_FILE``, present or not) and pip's own ``configuration.py`` (a pip upgrade);
- a ``sitecustomize`` or ``usercustomize`` the reader's interpreter ran (its file);
- the interpreter (its path, the link and what it points to: ``sys.prefix``'s ``pip.conf``),
  the tool's pip folder for a target without pip, the command's section, the reader script;
- the whole environment and the working folder (a relative ``PIP_CONFIG_FILE``).

A kept answer is used only while all of these are as they were, checked by ``stat`` under the
racy-git rule (ascendpatch/stamps.py): one is kept only when every file it was read from was
settled before the reader started (:func:`save`'s ``since``), and never:

- when the environment changed under the reader (a ``.pth`` or ``sitecustomize`` that sets
  ``PIP_*`` or ``HOME``: the reader checks the environment it runs in against the one it was
  given, by checksum);
- when a configuration "file" is not a regular file (a FIFO, a device);
- when a setting from the environment cannot be told by its variable (below).

A setting from a ``PIP_*`` variable may be a secret that exists nowhere on disk (a CI token in
``PIP_INDEX_URL``): it is kept as the name of a variable that holds its value, never the
value, and read from the environment again (the same environment: its checksum is part of the
key). Settings from files are copied into a 0600 file in ascendpatch's own cache folder (one
that fails cachedir's check is not used): they are on disk already, in files root can read.
The environment and the paths are kept as zlib checksums only (as env/introcache.py names its
files: what they guard against is a change, not an adversary; no hashlib on the way to uv).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from ascendpatch import cachedir, catalog
from ascendpatch.env.introcache import checksums

FORMAT = 1
Settings = tuple[tuple[str, str], ...]


class Answer(NamedTuple):
    """What the reader said: the settings (lowest precedence first), how many of them (the
    last) came from ``PIP_*`` variables, every file it was read from or would have been, and
    whether the environment it ran in was the one it was given."""

    settings: Settings
    from_env: int = 0
    files: tuple[str, ...] = ()
    same_env: bool = False


def env_checksum(env: Mapping[str, str] | None = None) -> str:
    """A checksum of ``env`` (this process's environment when None) as its child sees it: the
    reader computes the same of ``os.environb`` (pipconfig._READ)."""
    if env is None:
        items = sorted(os.environb.items())
    else:
        items = sorted((os.fsencode(k), os.fsencode(v)) for k, v in env.items())
    return checksums(b"".join(k + b"=" + v + b"\0" for k, v in items))


def _stat(path: str, follow: bool = True) -> list[int] | None:
    try:
        st = os.stat(path) if follow else os.lstat(path)
    except OSError:
        return None
    return [st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino, st.st_mode]


def cache_path(python: Path, pip_path: str, command: str) -> Path:
    name = checksums(f"{os.path.abspath(python)}\0{pip_path}\0{command}")
    return catalog.cache_dir() / "pipconfig" / f"{name}.json"


def _fingerprint(python: Path, pip_path: str, command: str, script: str,
                 env: Mapping[str, str] | None, files: Sequence[str]) -> list[Any]:
    path = os.path.abspath(python)
    try:
        cwd = os.getcwd()
    except OSError:  # a removed working folder: nothing relative can be told apart
        cwd = None
    return [FORMAT, checksums(script), path, pip_path, command,
            _stat(path, follow=False), _stat(path), env_checksum(env),
            None if cwd is None else checksums(cwd),
            [[name, _stat(name)] for name in files]]


def _variables(settings: Settings, environ: Mapping[str, str]) -> list[list[str]] | None:
    """For each setting from the environment, its name and a ``PIP_*`` variable that holds its
    value (pip takes a variable's value as it is); None when one has none."""
    found: list[list[str]] = []
    for name, value in settings:
        variable = next((k for k in sorted(environ) if k.startswith("PIP_")
                         and environ[k] == value), None)
        if variable is None:
            return None
        found.append([name, variable])
    return found


def _settled(fingerprinted: list[Any], since: int) -> bool:
    """Whether the interpreter and every file are regular (or missing) and older than ``since``
    by the racy-git margin."""
    from ascendpatch.stamps import racy

    *_, python_link, python, _env, cwd, files = fingerprinted
    if cwd is None or python is None or python_link is None or not stat.S_ISREG(python[4]):
        return False
    stats = [python_link, python]
    for name, st in files:
        if st is None or name == os.devnull:
            continue  # missing (a stat would show it made), or pip's "read no file"
        if not stat.S_ISREG(st[4]):
            return False  # a FIFO, a device, a folder: a stat proves nothing of what it gives
        stats.append(st)
    return not any(racy(st[0], st[1], since) for st in stats)


def save(python: Path, pip_path: str, command: str, script: str, env: Mapping[str, str] | None,
         answer: Answer, since: int) -> None:
    """Keep ``answer``, read by a reader started at ``since`` (``time.time_ns``), for the next
    run, when it may be kept (the module's docstring); else remove what was kept before."""
    fingerprinted = _fingerprint(python, pip_path, command, script, env, answer.files)
    where = cache_path(python, pip_path, command)
    split = len(answer.settings) - answer.from_env
    variables = _variables(answer.settings[split:], os.environ if env is None else env)
    if not (answer.same_env and variables is not None and _settled(fingerprinted, since)):
        cachedir.remove(where)
        return
    import json

    doc = {"fingerprint": fingerprinted, "files": list(answer.files),
           "settings": [list(pair) for pair in answer.settings[:split]],
           "from_env": variables}
    cachedir.write(where, json.dumps(doc, separators=(",", ":")).encode())


def _pairs(value: object) -> list[tuple[str, str]] | None:
    if not isinstance(value, list):
        return None
    pairs = [(p[0], p[1]) for p in value if isinstance(p, list) and len(p) == 2
             and all(isinstance(s, str) for s in p)]
    return pairs if len(pairs) == len(value) else None


def load(python: Path, pip_path: str, command: str, script: str,
         env: Mapping[str, str] | None) -> Settings | None:
    """The kept settings, or None when there are none or anything they depend on changed."""
    raw = cachedir.read(cache_path(python, pip_path, command))
    if raw is None:
        return None
    import json

    try:
        doc = json.loads(raw)
        files, pairs, variables = doc["files"], _pairs(doc["settings"]), _pairs(doc["from_env"])
        if pairs is None or variables is None or not (
                isinstance(files, list) and all(isinstance(f, str) for f in files)):
            return None
        now = _fingerprint(python, pip_path, command, script, env, files)
        # (a JSON round trip turns the fingerprint's tuples into lists, as stored)
        if doc["fingerprint"] != json.loads(json.dumps(now)):
            return None
        environ = os.environ if env is None else env
        return (*pairs, *((name, environ[variable]) for name, variable in variables))
    except (ValueError, KeyError, TypeError, RecursionError):
        return None
