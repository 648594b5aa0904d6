"""Remember a target in the user's config file, for install.sh:

    python -m ascendpatch.shell.remember --python PATH [--manifest NAME|PATH]

writes ``$XDG_CONFIG_HOME/ascendpatch/config.toml`` (default ``~/.config/ascendpatch/
config.toml``) when there is none, so that later commands need no ``--python``. An existing
config is never overwritten: when it already says the same, ``[OK]``; when it says something
else (or cannot be read), a ``[WARN]`` names it and the lines to put in it, and the exit code
is 1 (install.sh then keeps ``--python`` in the command it suggests). Exit 2: usage.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from ascendpatch import config
from ascendpatch.errors import AscendpatchError
from ascendpatch.paths import shown, untrusted_on_the_way
from ascendpatch.results import Level
from ascendpatch.shell.output import plain_line


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m ascendpatch.shell.remember")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--python", metavar="PATH")
    where.add_argument("--site-packages", dest="site_packages", metavar="DIR")
    parser.add_argument("--manifest", default="default", metavar="NAME|PATH")
    return parser


def _say(level: Level, text: str) -> None:
    sys.stdout.write(plain_line(level, text) + "\n")


def remember(path: Path, wanted: dict[str, str]) -> int:
    """0: the config at ``path`` now names ``wanted``; 1: it was left alone (said why)."""
    text = config.render(wanted)
    lines = "; ".join(text.splitlines())
    if not os.path.lexists(path):
        from ascendpatch.store import atomic

        # install.sh run as root with a user's HOME would otherwise mkdir and write where
        # that user can swap ~/.config/ascendpatch for a link between the two
        risky = untrusted_on_the_way(path.parent)
        if risky is not None:
            _say(Level.WARN, f"config {shown(path)} not written: {shown(risky[0])} is "
                             f"{risky[1]}, who could send this write elsewhere; as that user "
                             f"add: {lines}")
            return 1

        path.parent.mkdir(parents=True, exist_ok=True)
        atomic.write_atomic(path, text.encode(), 0o644)
        _say(Level.OK, f"config {shown(path)}: {lines} (commands need no --python now)")
        return 0
    try:
        found = config.read(path)
    except AscendpatchError as exc:
        _say(Level.WARN, f"{exc.message}; left alone: fix it, then add: {lines}")
        return 1
    if found is None:  # another user could have written it; read() said so
        _say(Level.WARN, f"config {shown(path)} left alone; to use it, make it yours, then add: "
                         f"{lines}")
        return 1
    if not config.differs(found, wanted):
        _say(Level.OK, f"config {shown(path)} already names this target: {lines}")
        return 0
    _say(Level.WARN, f"config {shown(path)} names another target or manifest; left alone (pass "
                     f"--python, or put these lines in it instead: {lines})")
    return 1


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    key, value = ("python", args.python) if args.python else ("site-packages",
                                                              args.site_packages)
    path = config.user_config_path(os.environ)
    if path is None:
        _say(Level.WARN, "no HOME or XDG_CONFIG_HOME: the target is not remembered")
        return 1
    try:
        wanted = config.remembered({key: value, "manifest": args.manifest})
        return remember(path, wanted)
    except (ValueError, OSError) as exc:
        _say(Level.WARN, f"config {shown(path)} not written ({exc}); pass --python")
        return 1


if __name__ == "__main__":
    from ascendpatch.shell import streams

    raise SystemExit(streams.run(main))
