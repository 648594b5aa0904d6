"""pip's effective configuration for one pip command, and the same settings for uv.

uv must see the packages pip would see: the mirror, the extra indexes, the find-links
folders, the constraints, the certificates of ``pip.conf`` and ``PIP_*``. They are read by
pip's own loader (``pip._internal.configuration``, in the interpreter whose pip would run, so
the same files and variables count), merged in pip's order (``[global]``, then the command's
section, then the environment), and translated into uv's flags and variables. A setting uv
cannot take the same way raises :class:`Untranslatable`: the caller then resolves with pip,
saying so. (env/releases.py reads the index settings for port / catalog-check on its own;
this module is only the resolver's.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ascendpatch import redact
from ascendpatch.env.inscript import code_argv

if TYPE_CHECKING:
    from ascendpatch.env.target import Target

_READ = """
import json, sys
from pip._internal.configuration import Configuration
config = Configuration(isolated=False)
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
print(json.dumps([[n, v] for section in order for n, v in found[section]]))
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


@dataclass(frozen=True)
class UvSettings:
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)


Settings = tuple[tuple[str, str], ...]
# What this process has read, by (interpreter, command, environment): a command asks twice (the
# resolver's choice, the pre-flight cache's key) and each ask is a Python start importing pip.
_READ_BEFORE: dict[tuple[str, str, frozenset[tuple[str, str]]], Settings] = {}


def pip_python(target: Target) -> Path:
    """The interpreter whose pip would run (the target's, else this tool's: pipadapter)."""
    if target.python is not None and target.get("pip") is not None:
        return target.python
    return Path(sys.executable)


def read(python: Path, command: str, env: Mapping[str, str] | None = None) \
        -> list[tuple[str, str]]:
    """pip's effective settings for ``command`` in ``python``'s pip, lowest precedence first
    (read once per process for the same interpreter, command and environment)."""
    key = (str(python), command, frozenset((os.environ if env is None else env).items()))
    if key not in _READ_BEFORE:
        _READ_BEFORE[key] = _read(python, command, env)
    return list(_READ_BEFORE[key])


def _read(python: Path, command: str, env: Mapping[str, str] | None) -> Settings:
    proc = subprocess.run(code_argv(python, _READ, [command]), capture_output=True, text=True,
                          check=False, stdin=subprocess.DEVNULL, timeout=60,
                          env=dict(env) if env is not None else None)
    if proc.returncode != 0:
        # pip's parser quotes the bad line, which may hold an index password: mask, then cut
        reason = redact.text((proc.stderr.strip().splitlines() or ["?"])[-1])[:200]
        raise Untranslatable(f"pip's configuration could not be read ({reason})")
    pairs = json.loads(proc.stdout)
    return tuple((str(name), str(value)) for name, value in pairs)


def identity(settings: Sequence[tuple[str, str]]) -> list[list[str]]:
    """What of ``settings`` can change what pip finds (the index, the links, the options), with
    every URL's credentials left out: part of a cache key, never a secret."""
    return [[name, redact.without_credentials(value)] for name, value in settings
            if name not in _NO_EFFECT]


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
