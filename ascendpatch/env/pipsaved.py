"""pip's settings, kept between runs while nothing they were read from has changed.

Reading pip's configuration is a Python start importing pip (about 0.1 s), the longest wait of
an ``install`` whose plan uv makes (env/pipconfig.py). Its answer depends on:

- the files pip's loader considers, as pip itself lists them
  (``Configuration.iter_config_files``, run by the reader: global, user, site and
  ``PIP_CONFIG_FILE``, present or not), pip's own ``configuration.py`` (a pip upgrade), a
  ``sitecustomize`` or ``usercustomize`` the reader's interpreter ran;
- what that interpreter's start runs: every folder on its ``sys.path`` (a ``.pth`` or a
  ``sitecustomize`` added or removed changes its folder), the ``.pth`` files in them, every
  module the start imported (a module a ``.pth`` imports, edited in place), the user site
  folder (present or not), the interpreter's own folder (a ``python._pth``);
- the interpreter (its path, the link and what it points to, the ``pyvenv.cfg`` that makes
  its ``sys.prefix``: the site ``pip.conf``), the tool's pip folder for a target without pip,
  the command's section, the reader script;
- the whole environment, the home folder ``~`` means (``$HOME``, else the password database)
  and the working folder (a relative ``PIP_CONFIG_FILE``).

A kept answer is used only while all of these are as they were, checked by ``stat``. It is
kept only when:

- the reader stat'ed every configuration file before pip read them, they are as it saw them,
  and each file pip opened (the reader watches configparser's reading of the open file) is
  the one it stat'ed: a file removed, added or changed while or after pip read it, one there
  only while pip read it, a link switched to another file and back, is not kept over;
- every file is a regular file (or missing, or ``os.devnull``, pip's "read no file") settled
  before the reader started, by the racy-git rule (ascendpatch/stamps.py): the stat proves it
  unchanged since;
- the reader ran in the very environment it was given (it reports a checksum of its own: a
  ``.pth`` that sets ``HOME`` or ``PIP_*`` means never kept);
- no setting from a file may be a credential (a secret-looking name, user-info or a query in
  a URL, a ``@`` anywhere, ``TOKEN=...``, a long mixed letters-and-digits segment in a URL's
  path, as entitlement tokens are): a pip.conf on a secret mount (a build secret, a
  Kubernetes secret) must not leave its password in a cache that outlives it;
- each setting from a ``PIP_*`` variable can be told by the variable it came from (named for
  it, holding its value): it is kept as that variable's name, never its value (a CI token in
  ``PIP_INDEX_URL`` exists nowhere on disk), and read from the environment again.

The kept file is 0600 in ascendpatch's own cache folder (one that fails cachedir's check is not
used). The environment and the working folder are kept as zlib checksums only (as
env/introcache.py names its files: what they guard against is a change, not an adversary; no
hashlib on the way to uv). crc32 is linear, so a checksum of a secret is a guessing oracle:
the kept one leaves out the values of the ``PIP_*`` variables the answer reads again and of
every secret-looking name, and the reader's full one travels on its private standard output,
never a command line (``ps``).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from ascendpatch import cachedir, catalog, redact
from ascendpatch.env.introcache import checksums, pth_files
from ascendpatch.stamps import Stat, is_stat, racy, stat_of

FORMAT = 2
Settings = tuple[tuple[str, str], ...]


class Where(NamedTuple):
    """The paths an answer was read from, as the reader names them (a kept file holds them)."""

    config_files: tuple[str, ...]  # as pip's loader lists them, present or not
    modules: tuple[str, ...]  # what the start imported, pip's configuration.py, customize
    sys_path: tuple[str, ...]
    user_site: str | None


class Provenance(NamedTuple):
    """What the reader says its answer was read from (pipconfig._READ)."""

    from_env: int  # how many of the settings (the last ones) came from PIP_* variables
    where: Where
    seen: tuple[Stat | None, ...]  # the config files' stats, taken before pip read them
    opened: tuple[Stat | None, ...]  # the stat of the open file pip read, per file (or None)
    env: str  # a checksum of the environment the reader ran in (env_checksum)


class Answer(NamedTuple):
    settings: Settings  # lowest precedence first
    provenance: Provenance | None = None  # None: nothing to keep it by


def env_checksum(env: Mapping[str, str] | None = None, masked: frozenset[str] = frozenset()) \
        -> str:
    """A checksum of ``env`` (this process's environment when None) as its child sees it: the
    reader computes the same of its ``os.environb`` (pipconfig._READ). ``masked``: names
    whose values are left out (a kept file's: see :func:`_masked`)."""
    if env is None:
        items = sorted(os.environb.items())
    else:
        items = sorted((os.fsencode(k), os.fsencode(v)) for k, v in env.items())
    hidden = {os.fsencode(name) for name in masked}
    return checksums(b"".join(k + b"=" + (b"\0masked" if k in hidden else v) + b"\0"
                              for k, v in items))


def _masked(variables: list[list[str]], environ: Mapping[str, str]) -> frozenset[str]:
    """The variables whose values a kept file's checksum leaves out: crc32 is linear, and the
    file is on a disk (an image layer), so a checksum of a secret is a guessing oracle. Left
    out: the ``PIP_*`` variables the answer reads again (their values are settings, taken
    from the environment each run; not ``PIP_CONFIG_FILE``, which decides the files) and
    every secret-looking name (no pip setting reads one)."""
    return frozenset({variable for _, variable in variables if variable != "PIP_CONFIG_FILE"}
                     | {name for name in environ if redact.is_secret(name)})


def _strings(value: object) -> tuple[str, ...] | None:
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return tuple(value)
    return None


def _where(value: object) -> Where | None:
    """The paths of a reader's answer or a kept file; None for any other shape."""
    if not isinstance(value, Mapping):
        return None
    files, modules, path = (_strings(value.get(k)) for k in ("config_files", "modules",
                                                             "sys_path"))
    user_site = value.get("user_site")
    if files is None or modules is None or path is None or not (
            user_site is None or isinstance(user_site, str)):
        return None
    return Where(files, modules, path, user_site)


def provenance(doc: Mapping[str, Any], count: int) -> Provenance | None:
    """The reader's account of ``doc``, an answer of ``count`` settings; None when it gives
    none that holds together (nothing is kept then)."""
    from_env, seen, opened, env = (doc.get(k) for k in ("from_env", "seen", "opened", "env"))
    where = _where(doc)
    if (where is None or type(from_env) is not int or not 0 <= from_env <= count
            or not isinstance(env, str)
            or not all(isinstance(stats, list) and len(stats) == len(where.config_files)
                       and all(st is None or is_stat(st) for st in stats)
                       for stats in (seen, opened))):
        return None  # (opened: None where configparser could not be watched)
    assert isinstance(seen, list) and isinstance(opened, list)
    return Provenance(from_env, where, tuple(seen), tuple(opened), env)


def cache_path(python: Path, pip_path: str, command: str) -> Path:
    name = checksums(f"{os.path.abspath(python)}\0{pip_path}\0{command}")
    return catalog.cache_dir() / "pipconfig" / f"{name}.json"


def _fingerprint(python: Path, pip_path: str, command: str, script: str,
                 env: Mapping[str, str] | None, where: Where,
                 masked: frozenset[str]) -> dict[str, Any]:
    """Everything an answer depends on, as it stands now, at the reader's paths ``where``;
    ``masked``: the variables whose values the environment's checksum leaves out."""
    path = os.path.abspath(python)
    bin_dir = os.path.dirname(path)
    try:
        cwd: str | None = checksums(os.getcwd())
    except OSError:  # a removed working folder: nothing relative can be told apart
        cwd = None
    user_site = where.user_site
    return {
        "format": FORMAT, "script": checksums(script), "python": path, "pip": pip_path,
        "command": command, "interpreter": [stat_of(path, follow=False), stat_of(path)],
        "bin": stat_of(bin_dir),
        "pyvenv.cfg": [stat_of(os.path.join(bin_dir, "pyvenv.cfg")),
                       stat_of(os.path.join(os.path.dirname(bin_dir), "pyvenv.cfg"))],
        "env": env_checksum(env, masked), "cwd": cwd, "home": os.path.expanduser("~"),
        "config_files": [[name, stat_of(name)] for name in where.config_files],
        "modules": [[name, stat_of(name)] for name in where.modules],
        "sys_path": [[folder, stat_of(folder), pth_files(folder)]
                     for folder in where.sys_path],
        "user_site": [user_site, stat_of(user_site) if isinstance(user_site, str) else None],
    }


def _all_stats(fingerprinted: Mapping[str, Any]) -> list[Stat]:
    found = [*fingerprinted["interpreter"], *fingerprinted["pyvenv.cfg"], fingerprinted["bin"],
             *(st for _, st in fingerprinted["config_files"] if st is not None),
             *(st for _, st in fingerprinted["modules"]),
             *(st for _, st, _ in fingerprinted["sys_path"]),
             *(st for _, _, pth in fingerprinted["sys_path"] for _, st in pth),
             fingerprinted["user_site"][1]]
    return [st for st in found if st is not None]


def _settled(fingerprinted: Mapping[str, Any], told: Provenance, since: int) -> bool:
    """Whether the configuration files are as the reader saw them before pip read them and
    each file pip read is the one so seen (a file there only while pip read it, or a link
    switched to another and back, is not), each a regular file (or missing, or os.devnull),
    and every stat older than ``since`` by the racy-git margin."""
    link, python = fingerprinted["interpreter"]
    if fingerprinted["cwd"] is None or link is None or python is None:
        return False
    files = fingerprinted["config_files"]
    if [st for _, st in files] != list(told.seen) or any(
            read is not None and read != before
            for read, before in zip(told.opened, told.seen, strict=True)):
        return False
    if any(st is not None and name != os.devnull and not stat.S_ISREG(st[5])
           for name, st in files):
        return False  # a FIFO, a device, a folder: a stat proves nothing of what it gives
    return not any(racy(st[0], st[1], since) for st in _all_stats(fingerprinted))


def _variables(settings: Settings, environ: Mapping[str, str]) -> list[list[str]] | None:
    """For each setting from the environment, its name and the ``PIP_*`` variable it came from:
    named for it (``PIP_INDEX_URL`` for ``index-url``, as pip names them: case and ``_`` aside)
    and holding its value (pip takes a variable's value as it is); None when one has none."""
    found: list[list[str]] = []
    for name, value in settings:
        variable = next((k for k in sorted(environ) if k.startswith("PIP_")
                         and k[4:].lower().replace("_", "-") == name and environ[k] == value),
                        None)
        if variable is None:
            return None
        found.append([name, variable])
    return found


def save(python: Path, pip_path: str, command: str, script: str, env: Mapping[str, str] | None,
         answer: Answer, since: int) -> None:
    """Keep ``answer``, read by a reader started at ``since`` (``time.time_ns``), for the next
    run, when it may be kept (the module's docstring); else remove what was kept before."""
    kept_at = cache_path(python, pip_path, command)
    told = answer.provenance
    if told is None or told.env != env_checksum(env):
        cachedir.remove(kept_at)
        return
    environ = os.environ if env is None else env
    split = len(answer.settings) - told.from_env
    variables = _variables(answer.settings[split:], environ)
    masked = _masked(variables or [], environ)
    fingerprinted = _fingerprint(python, pip_path, command, script, env, told.where, masked)
    if (variables is None or not _settled(fingerprinted, told, since)
            or any(redact.may_be_credential(name, value)
                   for name, value in answer.settings[:split])):
        cachedir.remove(kept_at)
        return
    import json

    doc = {"fingerprint": fingerprinted, "where": told.where._asdict(), "masked": sorted(masked),
           "settings": [list(pair) for pair in answer.settings[:split]],
           "from_env": variables}
    cachedir.write(kept_at, json.dumps(doc, separators=(",", ":")).encode())


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
        where, pairs, variables = _where(doc["where"]), _pairs(doc["settings"]), \
            _pairs(doc["from_env"])
        masked = _strings(doc["masked"])
        if where is None or pairs is None or variables is None or masked is None:
            return None
        now = _fingerprint(python, pip_path, command, script, env, where, frozenset(masked))
        # (a JSON round trip turns the fingerprint's tuples into lists, as stored)
        if doc["fingerprint"] != json.loads(json.dumps(now)):
            return None
        environ = os.environ if env is None else env
        return (*pairs, *((name, environ[variable]) for name, variable in variables))
    except (ValueError, KeyError, TypeError, RecursionError):
        return None
