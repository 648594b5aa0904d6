"""The remembered target: ``ascendpatch.toml`` from the current folder upwards, then the user's
``$XDG_CONFIG_HOME/ascendpatch/config.toml`` (default ``~/.config/ascendpatch/config.toml``).

A config file holds at most three keys, all strings::

    python = "/usr/local/python3.12.13/bin/python3"  # or: site-packages = "/mnt/img/site-packages"
    manifest = "muse-glimmer-w8a8"                   # a bundled name or a YAML path

A relative path is relative to the config file's folder (as in pyproject.toml), never to the
current folder. Precedence is flag > environment (``$ASCENDPATCH_PYTHON``,
``$ASCENDPATCH_MANIFEST``) > config > discovery; commands/context.py applies it.

ascendpatch runs as root on shared hosts: a config that another user could have written would
let them choose the interpreter root runs. So the walk upwards stops at the first folder that
is not this user's (or root's) alone, and a file (or its folder) that another user owns or can
write is not read: a ``[WARN]`` names it and the run goes on without it. A config that is read
and wrong (not TOML, not UTF-8, a FIFO, over 64 KiB, an unknown key, a wrong type) is exit 2
naming the file and the key: nothing is guessed from a broken file.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ascendpatch import progress
from ascendpatch.errors import InvalidInputError
from ascendpatch.paths import NotRegularFileError, open_regular, shown, untrusted

PROJECT_NAME = "ascendpatch.toml"
KEYS = ("python", "site-packages", "manifest")
MAX_BYTES = 64 * 1024  # a config is three lines; anything near this is not one


@dataclass(frozen=True)
class Config:
    """What one config file says; ``path`` is the file, each value as written in it."""

    path: Path
    values: Mapping[str, str]

    def get(self, key: str) -> str | None:
        return self.values.get(key)

    def resolved(self, key: str) -> Path | None:
        """The value of a path key, a relative one taken from the config file's folder."""
        value = self.values.get(key)
        return None if value is None else self.path.parent / value

    def manifest(self) -> str | None:
        """The manifest as loader.load takes it: a bundled name as written, a YAML path
        (``.yaml`` / ``.yml``, or with a ``/``) from the config file's folder."""
        value = self.values.get("manifest")
        if value is None or not (value.endswith((".yaml", ".yml")) or os.sep in value):
            return value
        return str(self.path.parent / value)

    def where(self, key: str) -> str:
        """How a message names the key: ``/y/ascendpatch.toml: python = "x"`` plus, for a
        relative path, what it is relative to."""
        value = self.values.get(key, "")
        said = f"{shown(self.path)}: {key} = {value!r}"
        is_path = key != "manifest" or self.manifest() != value
        if value and is_path and not Path(value).is_absolute():
            said += f" (relative to the config file's folder {shown(self.path.parent)})"
        return said


def user_config_path(env: Mapping[str, str]) -> Path | None:
    """``$XDG_CONFIG_HOME/ascendpatch/config.toml``, else ``~/.config/...`` (a relative
    XDG_CONFIG_HOME is ignored, as the XDG spec says); None without a home."""
    xdg = env.get("XDG_CONFIG_HOME", "")
    if xdg and Path(xdg).is_absolute():
        return Path(xdg) / "ascendpatch" / "config.toml"
    home = env.get("HOME")
    return Path(home) / ".config" / "ascendpatch" / "config.toml" if home else None


def _folder_problem(folder: Path) -> str | None:
    try:
        why = untrusted(folder.stat())
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    return None if why is None else why


def find(cwd: Path, env: Mapping[str, str]) -> Config | None:
    """The config that applies here: the nearest trusted ``ascendpatch.toml`` upwards from
    ``cwd``, else the user's config; None when there is none."""
    for folder in [cwd, *cwd.parents]:
        why = _folder_problem(folder)
        if why is not None:
            _ignored(folder / PROJECT_NAME, f"its folder {shown(folder)} is {why}")
            break
        candidate = folder / PROJECT_NAME
        if os.path.lexists(candidate):
            found = read(candidate)
            if found is not None:
                return found
            break  # the nearest one is not trusted: nothing above it is looked at either
    user = user_config_path(env)
    if user is None or not os.path.lexists(user):
        return None
    why = _folder_problem(user.parent)
    if why is not None:
        _ignored(user, f"its folder {shown(user.parent)} is {why}")
        return None
    return read(user)


def _ignored(path: Path, why: str) -> None:
    """Say so when a config that exists is passed over; say nothing when there is none."""
    if os.path.lexists(path):
        progress.notice(f"config {shown(path)} not read: {why}; a config another user can "
                        f"change is never trusted (chown/chmod go-w it, or move it)")


def read(path: Path) -> Config | None:
    """The config file ``path``, checked; None (after a [WARN]) when another user could have
    written it; InvalidInputError (exit 2) naming the file and the key when it is wrong."""
    text = _text(path)
    if text is None:
        return None
    try:
        doc = read_text(text)
    except ValueError as exc:  # TOMLDecodeError
        raise _bad(path, f"not TOML ({exc})") from None
    except RecursionError:
        raise _bad(path, "nested too deep to be a config") from None
    return Config(path, _values(path, doc))


def _text(path: Path) -> str | None:
    try:
        handle, info = open_regular(path)
        with handle:
            data = handle.read(MAX_BYTES + 1)
        why = untrusted(info)
        if why is None and path.is_symlink():
            why = _folder_problem(Path(os.path.realpath(path)).parent)
            why = None if why is None else f"a link into a folder that is {why}"
    except NotRegularFileError as exc:
        raise _bad(path, f"{exc.what}, not a regular file") from None
    except OSError as exc:
        raise _bad(path, f"cannot be read ({exc.strerror or exc})") from None
    if why is not None:
        _ignored(path, f"it is {why}")
        return None
    if len(data) > MAX_BYTES:
        raise _bad(path, f"larger than {MAX_BYTES // 1024} KiB; a config holds three keys")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _bad(path, f"not UTF-8 text (byte {exc.start})") from None


def _values(path: Path, doc: Mapping[str, object]) -> dict[str, str]:
    values: dict[str, str] = {}
    for key, value in doc.items():
        if key not in KEYS:
            import difflib

            close = difflib.get_close_matches(key, KEYS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise _bad(path, f"unknown key {shown(key)!r}{hint}; known keys: {', '.join(KEYS)}")
        if not isinstance(value, str):
            raise _bad(path, f"{key} must be a string (a {_what(key)}), not "
                             f"{_type_name(value)}")
        if not value.strip() or any(ord(c) < 32 or c == "\x7f" for c in value):
            raise _bad(path, f"{key} must be one non-empty line (a {_what(key)})")
        values[key] = value
    if "python" in values and "site-packages" in values:
        raise _bad(path, "python and site-packages both name a target; keep one")
    return values


def _what(key: str) -> str:
    return {"python": "path to an interpreter", "site-packages": "path to a folder"}.get(
        key, "bundled manifest name or a YAML path")


def _type_name(value: object) -> str:
    names = {bool: "a boolean", int: "an integer", float: "a number", list: "an array",
             dict: "a table"}
    return next((n for t, n in names.items() if type(value) is t), type(value).__name__)


def _bad(path: Path, problem: str) -> InvalidInputError:
    from ascendpatch import redact

    return InvalidInputError(redact.text(f"config {shown(path)}: {problem}"),
                             fix=f"edit or remove {shown(path)}")


def read_text(text: str) -> dict[str, object]:
    """``text`` as TOML (what tomllib / tomli returns; TOMLDecodeError is a ValueError).

    Imported here, when a config file was found: most runs find none (tomllib costs 3 ms,
    a tenth of a repeat audit's start)."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - the fast tier's Python 3.10
        import tomli as tomllib
    doc: dict[str, object] = tomllib.loads(text)
    return doc


def render(values: Mapping[str, str]) -> str:
    """``values`` as config lines (TOML basic strings; JSON's escapes are TOML's), checked by
    reading them back; ValueError for a value TOML cannot hold (a name that is not UTF-8)."""
    import json

    text = "".join(f"{key} = {json.dumps(value)}\n" for key, value in values.items())
    try:
        back = read_text(text)
    except ValueError:  # TOMLDecodeError
        back = {}
    if back != dict(values):
        raise ValueError(f"cannot write {dict(values)!r} as TOML")
    return text


def remembered(values: Mapping[str, str]) -> dict[str, str]:
    """What to write for a target and manifest given on a command line: paths made absolute
    (never resolved: a venv's python is a link that must stay one), the bundled catalog
    (``default``) left out."""
    out: dict[str, str] = {}
    for key, value in values.items():
        if key == "manifest" and value == "default":
            continue
        is_path = key != "manifest" or value.endswith((".yaml", ".yml")) or os.sep in value
        out[key] = str(Path(value).absolute()) if is_path else value
    return out


def differs(found: Config, wanted: Mapping[str, str]) -> bool:
    """Whether ``found`` names another target or manifest than ``wanted`` (as remembered())."""

    def target(values: Mapping[str, str | None]) -> tuple[str, str | None]:
        key = "site-packages" if "site-packages" in values else "python"
        return key, values.get(key)

    have = {key: str(found.resolved(key)) for key in ("python", "site-packages")
            if key in found.values}
    return (target(have) != target(wanted)
            or (found.manifest() or "default") != wanted.get("manifest", "default"))
