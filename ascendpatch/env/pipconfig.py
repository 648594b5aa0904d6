"""pip's effective configuration for one pip command, and the same settings for uv.

uv must see the packages pip would see: the mirror, the extra indexes, the find-links
folders, the constraints, the certificates of ``pip.conf`` and ``PIP_*``. They are read by
pip's own loader (``pip._internal.configuration``, in the interpreter whose pip would run, so
the same files and variables count), merged in pip's order (``[global]``, then the command's
section, then the environment), and translated into uv's flags and variables. A setting uv
cannot take the same way raises :class:`Untranslatable`: the caller then resolves with pip,
saying so. The same settings, read once per command, name the index in the stack pre-flight's
cache key (:func:`identity`, env/stackcheck.py). The answer is kept for later runs while
nothing it was read from changes (env/pipsaved.py): the reader also says what that is (the
files pip's loader considers, with their stats before the read, its sys.path, a checksum of
the environment it ran in).
(env/releases.py reads the index settings for port / catalog-check through pip's own finder,
env/_pipfind.py.)
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple

from ascendpatch import redact
from ascendpatch.env import inscript, pipsaved
from ascendpatch.env.pipsaved import Answer

if TYPE_CHECKING:
    from ascendpatch.env.target import Target

_READ = """
import sys
# for env/pipsaved.py: every module the interpreter's start ran (site, .pth imports, a
# sitecustomize), taken before this script imports anything of its own
started = [m.__file__ for m in list(sys.modules.values())
           if isinstance(getattr(m, "__file__", None), str)]
import configparser, json, os, site, zlib
if sys.argv[2]:  # a target without pip: this tool's pip, run by the target as `pip --python` is
    sys.path.append(sys.argv[2])
from pip._internal import configuration
config = configuration.Configuration(isolated=False)
def stat_of(st):  # as ascendpatch/stamps.py's stat_of
    return [st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino, st.st_dev, st.st_mode]
def stat_path(path):
    try:
        return stat_of(os.stat(path))
    except (OSError, ValueError):
        return None
# pip's own list of its files, their stats before pip reads them, and the stat of each file
# pip opened (configparser's _read gets the open file: what was read, not what a path names)
listed = [f for _, names in config.iter_config_files() for f in names]
seen = [stat_path(f) for f in listed]
opened = {}
real_read = getattr(configparser.RawConfigParser, "_read", None)
if real_read is not None:
    def watched_read(self, fp, fpname):
        try:
            opened[str(fpname)] = stat_of(os.fstat(fp.fileno()))
        except Exception:
            opened[str(fpname)] = "unknown"
        return real_read(self, fp, fpname)
    configparser.RawConfigParser._read = watched_read
config.load()
order = ["global", sys.argv[1], ":env:"]
found = {name: [] for name in order}
def flat(items):  # pip >= 26 keys its items by file: {file: {key: value}}
    for key, value in items:
        if isinstance(value, dict):
            yield from value.items()
        else:
            yield key, value
for key, value in flat(config.items()):
    section, _, name = key.partition(".")
    if section in found:
        found[section].append((name, value))
modules = started + [m.__file__ for m in (configuration, sys.modules.get("sitecustomize"),
                                          sys.modules.get("usercustomize"))
                     if isinstance(getattr(m, "__file__", None), str)]
env = b"".join(k + b"=" + v + b"\\0" for k, v in sorted(os.environb.items()))
print(json.dumps({"settings": [[n, v] for section in order for n, v in found[section]],
                  "from_env": len(found[":env:"]), "config_files": listed, "seen": seen,
                  "opened": [opened.get(f) for f in listed] if real_read else None,
                  "modules": modules, "sys_path": sys.path,
                  "user_site": site.getusersitepackages() if site.ENABLE_USER_SITE else None,
                  "env": "%08x%08x" % (zlib.crc32(env), zlib.adler32(env))}))
"""

_TRUE = {"1", "true", "yes", "on"}
# pip settings with no effect on what a resolution picks (output, pip's own housekeeping)
_NO_EFFECT = {"disable-pip-version-check", "no-color", "progress-bar", "quiet", "verbose",
              "retries", "cache-dir", "no-cache-dir", "root-user-action", "no-input", "log",
              "no-python-version-warning", "require-virtualenv", "break-system-packages",
              "config-file"}  # config-file: read by the loader itself
_LISTS = {"find-links": "--find-links", "constraint": "--constraint",
          "trusted-host": "--allow-insecure-host"}
_VALUES = {"only-binary": "--only-binary", "no-binary": "--no-binary"}
# through the environment, not the command line (which `ps` shows every user): an index URL
# or a proxy may carry a password
_ENV = {"cert": ("SSL_CERT_FILE",), "timeout": ("UV_HTTP_TIMEOUT",),
        "default-timeout": ("UV_HTTP_TIMEOUT",), "proxy": ("HTTPS_PROXY", "HTTP_PROXY"),
        "index-url": ("UV_INDEX_URL",), "extra-index-url": ("UV_EXTRA_INDEX_URL",)}


class Untranslatable(Exception):
    """A pip setting uv cannot be given the same way (its name, never its value)."""


# (NamedTuples, not dataclasses: the parser imports this module before the pip settings' read
# starts, and dataclasses with inspect cost that start 5-10 ms)
class UvSettings(NamedTuple):
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = MappingProxyType({})


Settings = tuple[tuple[str, str], ...]
_Key = tuple[str, str, str, frozenset[tuple[str, str]]]
# What this process has read, by (interpreter, pip, command, environment): a command asks twice
# (the resolver's choice, the pre-flight cache's key) and each ask is a Python start importing
# pip, unless a run before kept the answer (env/pipsaved.py). Nothing in ascendpatch changes
# pip's configuration or os.environ while it runs.
_READ_BEFORE: dict[_Key, Settings] = {}
# Reads the parser started (prefetch) and no one has waited for yet, by the same key.
_started: dict[_Key, _Reading] = {}
_TIMEOUT = 60.0


class _Reading(NamedTuple):
    running: inscript.Running
    since: int  # time.time_ns() before it started: what a kept answer must be older than


class Reader(NamedTuple):
    """Who reads pip's configuration for a target: its interpreter, which decides the site
    ``pip.conf`` (``sys.prefix``), with its own pip, or with this tool's (``pip_path``, the
    folder holding it) when it has none, as ``pip --python TARGET`` runs this tool's pip."""

    python: Path
    pip_path: str = ""


def reader(target: Target) -> Reader:
    """The reader for ``target``; this tool's own interpreter for a folder-only target."""
    if target.python is None:
        return Reader(Path(sys.executable))
    return _reader(target.python, target.get("pip") is not None)


def reader_of_report(python: Path, info: Mapping[str, Any]) -> Reader | None:
    """The reader :func:`reader` gives the target ``python``'s introspection report ``info``
    describes, without making that Target (env/target.py and what it imports, on the way to
    the parser's :func:`prefetch`); None for a report it cannot tell from. A wrong guess only
    costs the head start: :func:`read` waits for a prefetched read of its own key only."""
    dists = info.get("distributions")
    if not isinstance(dists, list):
        return None
    # ("pip" has no separator: its PEP 503 name, target.canonical_name, is its lower case)
    has_pip = any(isinstance(d, dict) and isinstance(d.get("name"), str)
                  and d["name"].lower() == "pip" for d in dists)
    return _reader(python, has_pip)


def _reader(python: Path, has_pip: bool) -> Reader:
    if has_pip:
        return Reader(python)
    import importlib.util

    spec = importlib.util.find_spec("pip")  # (found, not imported)
    if spec is None or spec.origin is None:
        return Reader(Path(sys.executable))
    return Reader(python, str(Path(spec.origin).parent.parent))


def read(source: Path | Reader, command: str, env: Mapping[str, str] | None = None) \
        -> list[tuple[str, str]]:
    """pip's effective settings for ``command`` as ``source`` (an interpreter with its own pip,
    or a :class:`Reader`) reads them, lowest precedence first (read once per process for the
    same reader, command and environment, and kept for the next run while nothing they were
    read from changes: env/pipsaved.py; a read :func:`prefetch` started is waited for)."""
    who = source if isinstance(source, Reader) else Reader(source)
    key = _key(who, command, env)
    if key not in _READ_BEFORE:
        reading = _started.pop(key, None)
        kept = None if reading is not None else _kept(who, command, env)
        if kept is not None:
            _READ_BEFORE[key] = kept
        else:
            reading = reading or _start(who, command, env)
            _READ_BEFORE[key] = _keep(who, command, env, reading)
    return list(_READ_BEFORE[key])


def prefetch(who: Reader, command: str) -> None:
    """Start reading pip's settings for ``command`` in this process's environment now, for the
    next :func:`read` of the same: the parser calls it as soon as it knows the target, so that
    pip's import (about 0.1 s) runs while the command's modules load; an answer a run before
    kept, still good, is taken instead. A failure to start is left for that read to meet and
    word, as always."""
    key = _key(who, command, None)
    if key in _READ_BEFORE or key in _started:
        return
    kept = _kept(who, command, None)
    if kept is not None:
        _READ_BEFORE[key] = kept
        return
    with contextlib.suppress(inscript.ScriptError):
        _started[key] = _running(who, command, None)


def stop_unfinished() -> None:
    """The end of a run (cli's error boundary): a read the parser started and no command
    waited for is stopped and reaped, and forgotten."""
    running = [reading.running for reading in _started.values()]
    _started.clear()
    inscript.stop_all(running)


def _key(who: Reader, command: str, env: Mapping[str, str] | None) -> _Key:
    return (str(who.python), who.pip_path, command,
            frozenset((os.environ if env is None else env).items()))


def _kept(who: Reader, command: str, env: Mapping[str, str] | None) -> Settings | None:
    return pipsaved.load(who.python, who.pip_path, command, _READ, env)


def _keep(who: Reader, command: str, env: Mapping[str, str] | None,
          reading: _Reading) -> Settings:
    """The answer of ``reading``, kept for the next run when it may be (env/pipsaved.py)."""
    answer = _answer(reading.running)
    pipsaved.save(who.python, who.pip_path, command, _READ, env, answer, reading.since)
    return answer.settings


def _start(who: Reader, command: str, env: Mapping[str, str] | None) -> _Reading:
    try:
        return _running(who, command, env)
    except inscript.ScriptError as exc:  # it cannot start: "... does not exist"
        raise Untranslatable(f"pip's configuration could not be read ({exc})") from None


def _running(who: Reader, command: str, env: Mapping[str, str] | None) -> _Reading:
    """The reader started, in this process's group (it starts nothing of its own): a signal to
    the group (``timeout``, a hangup) ends a read hanging on a FIFO ``PIP_CONFIG_FILE`` too."""
    import time

    since = time.time_ns()
    # (the environment handed over as the checksum sees it: a C library may have set variables
    # os.environ does not show, as GNU readline sets LINES and COLUMNS)
    running = inscript.Running(who.python, _READ, [command, who.pip_path],
                               env=dict(os.environ) if env is None else env, own_group=False)
    return _Reading(running, since)


def _answer(running: inscript.Running) -> Answer:
    """Untranslatable for every way the reading can fail: pip's complaint, no answer in time,
    or an answer that is not the script's (a ``.pth`` that prints)."""
    try:
        doc = running.json(timeout=_TIMEOUT)
    except inscript.ScriptError as exc:
        if isinstance(exc, inscript.ScriptTimeout):
            raise Untranslatable(f"pip's configuration could not be read (no answer within "
                                 f"{_TIMEOUT:.0f} s)") from None
        if running.proc.returncode == 0:
            raise Untranslatable("pip's configuration could not be read (no answer)") from None
        # pip's parser quotes the bad line, which may hold an index password: mask, then cut
        reason = redact.text(str(exc))[:200]
        raise Untranslatable(f"pip's configuration could not be read ({reason})") from None
    pairs = doc.get("settings")
    if not isinstance(pairs, list) or not all(
            isinstance(pair, list) and len(pair) == 2 for pair in pairs):
        raise Untranslatable("pip's configuration could not be read (no answer)")
    settings = tuple((str(name), str(value)) for name, value in pairs)
    return Answer(settings, pipsaved.provenance(doc, len(settings)))


# not part of what pip finds, and may hold a password that is not in a URL (user:pw@proxy)
_NOT_IDENTITY = _NO_EFFECT | {"proxy", "cert", "client-cert", "timeout", "default-timeout"}


def identity(settings: Sequence[tuple[str, str]]) -> list[list[str]]:
    """What of ``settings`` can change what pip finds (the indexes, the links, the options),
    every URL's user-info (``token@``, ``user:password@``) left out: part of a cache key.
    A token in a URL's path or query (``https://host/TOKEN/simple``) is part of the index's
    name and stays: the key is only ever a sha256 of this."""
    return [[name, redact.without_credentials(value)] for name, value in settings
            if name not in _NOT_IDENTITY]


def translate(settings: list[tuple[str, str]]) -> UvSettings:
    """uv's flags and variables for pip's ``settings`` (later ones override earlier ones,
    as in pip), or Untranslatable naming the first setting uv cannot take."""
    effective = dict(settings)
    args: list[str] = []
    env: dict[str, str] = {}
    for name, value in effective.items():
        if name in _NO_EFFECT:
            continue
        if name in _LISTS:
            args += [a for item in value.split() for a in (_LISTS[name], item)]
        elif name in _VALUES:
            args += [_VALUES[name], value]
        elif name in _ENV:
            env.update(dict.fromkeys(_ENV[name], " ".join(value.split())))
        elif name == "no-index":
            args += ["--no-index"] if value.lower() in _TRUE else []
        elif name == "pre":
            args += ["--prerelease", "allow"] if value.lower() in _TRUE else []
        else:
            raise Untranslatable(f"pip's setting {name!r} has no uv equivalent here")
    return UvSettings(tuple(args), env)
