"""The shared options, and the one lazy loader of the command modules.

Each command module (``ascendpatch/commands/NAME.py``, NAME = the command with ``-`` as ``_``)
declares its own face next to its ``from_args``: ``COMMAND = CommandSpec(...)`` with its name,
help line, description, example and options. The only list of commands is COMMANDS, their
module names: the parser knows every name without importing anything, and a command's module
is imported when the command is named (Commands.load), so ``ascendpatch --version`` imports no
command module and ``ascendpatch status`` imports one. The top-level ``--help`` and shell
completion load them all. tests/test_cli.py loads every module's COMMAND.
"""

from __future__ import annotations

import argparse
import enum
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from pathlib import Path

    from ascendpatch.results import CommandResult


def path(text: str) -> Path:
    """A path argument. pathlib (like dataclasses) is imported when an argument needs it, not at
    every start-up: `ascendpatch --version` imports neither."""
    from pathlib import Path

    return Path(text)



def interpreter(text: str) -> Path:
    """An interpreter argument: a bare name is found on $PATH (env/introspection.named)."""
    from ascendpatch.env.introspection import named

    return named(text)


def seconds(text: str) -> float:
    """A duration: a finite number >= 0 (``nan``, ``inf`` and negatives are refused)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number of seconds >= 0")
    return value


def folder_path(text: str) -> Path:
    """A path that must not be empty (``Path("")`` would silently mean the current folder)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path is not a folder; give the folder")
    return path(text)


# Shown under the top-level options (ascendpatch --help); commands/context.py applies it.
PRECEDENCE = """\
target and manifest, first found wins: --python / --site-packages / --manifest, then
$ASCENDPATCH_PYTHON / $ASCENDPATCH_MANIFEST, then the config file (ascendpatch.toml in the
current folder or above, else $XDG_CONFIG_HOME/ascendpatch/config.toml, default
~/.config/ascendpatch/config.toml: python = "PATH" or site-packages = "DIR", manifest =
"NAME|PATH"; relative paths are relative to the config file's folder), then discovery (the
documented interpreters, the first with vllm-ascend) and the bundled catalog. -v says which
target and manifest a command used and from where."""


def global_options(parser: argparse.ArgumentParser, suppress: bool) -> None:
    """--python/--site-packages/--manifest/--json/--color/--lock-timeout, before or after the
    command (the copy on each subcommand suppresses defaults so it never overrides)."""

    def dflt(value: object) -> object:
        return argparse.SUPPRESS if suppress else value

    where = parser.add_mutually_exclusive_group()
    where.add_argument("--python", type=interpreter, default=dflt(None), metavar="PATH",
                       help="target interpreter (default: $ASCENDPATCH_PYTHON, then python = "
                            "or site-packages = in the config file, then the documented "
                            "candidates that have vllm-ascend)")
    where.add_argument("--site-packages", type=folder_path, default=dflt(None), metavar="DIR",
                       help="operate on a site-packages folder without running any interpreter")
    parser.add_argument("--manifest", default=dflt(None), metavar="NAME|PATH",
                        help="bundled manifest name or YAML path (default: "
                             "$ASCENDPATCH_MANIFEST, then manifest = in the config file, then "
                             "the bundled catalog)")
    parser.add_argument("--json", action="store_true", default=dflt(False),
                        help="one JSON document on stdout")
    parser.add_argument("--color", choices=("auto", "always", "never"), default=dflt("auto"),
                        help="colour and progress on stderr: auto = only on a terminal "
                             "(NO_COLOR / FORCE_COLOR are honoured), always, never")
    parser.add_argument("--lock-timeout", type=seconds, default=dflt(300.0), metavar="SECONDS",
                        help="how long to wait for another run's lock (default 300)")
    parser.add_argument("-v", "--verbose", action="store_true", default=dflt(False),
                        help="also say which target and manifest were used and from where, "
                             "and show the pip / pip-compile command lines and their output")
    parser.add_argument("-q", "--quiet", action="store_true", default=dflt(False),
                        help="show only problems ([FAIL] and [WARN] lines)")


def source_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--wheelhouse", type=path, metavar="DIR",
                        help="also look for packages in this folder (pip --find-links)")
    parser.add_argument("--offline", action="store_true",
                        help="never contact an index (pip --no-index); needs --wheelhouse")


def output_file(value: str) -> Path:
    """-o FILE: "-" is stdout; a folder, or a missing parent folder, is invalid input (exit 2),
    never a crash."""
    given = path(value)
    if value != "-" and given.is_dir():
        raise argparse.ArgumentTypeError(f"{given} is a folder, not a file; give a file name "
                                         f"in it, e.g. {given / 'out'}")
    if value != "-" and not given.parent.is_dir():
        raise argparse.ArgumentTypeError(f"folder {given.parent} does not exist; create it "
                                         f"first: mkdir -p {given.parent}")
    return given


def resolver_option(parser: argparse.ArgumentParser, what: str) -> None:
    """``--resolver pip|uv|auto`` (lock, install: env/resolver.py)."""
    parser.add_argument("--resolver", choices=["auto", "pip", "uv"], default="auto",
                        help=f"who resolves {what}: pip (the reference), uv "
                             f"(ascendpatch[fast], seconds), or auto (the default: uv when it "
                             f"is installed with ascendpatch and pip's configuration "
                             f"translates, else pip); -v and --json say which ran")


def file_in_a_folder(value: str) -> Path:
    """--markdown / --output FILE (no stdout form): its folder must exist (else exit 2)."""
    if value == "-":
        raise argparse.ArgumentTypeError("this option writes a file; '-' (stdout) is not "
                                         "supported here")
    return output_file(value)


def ids(p: argparse.ArgumentParser,
        text: str = "artifact ids from the manifest (default: every enabled artifact)") -> None:
    p.add_argument("ids", nargs="*", metavar="ID", help=text)


def with_option(p: argparse.ArgumentParser, text: str = "also this optional artifact") -> None:
    p.add_argument("--with", dest="with_ids", action="append", default=[], metavar="ID",
                   help=text)


def serve_command(p: argparse.ArgumentParser) -> None:
    """The ``-- vllm serve ...`` command line (check-launch, serve)."""
    p.add_argument("serve", nargs=argparse.REMAINDER, metavar="-- COMMAND",
                   help="the vllm serve command line, after --")


def folder(p: argparse.ArgumentParser) -> None:
    p.add_argument("folder", type=path, metavar="DIR",
                   help="the folder to create or update")


def no_options(p: argparse.ArgumentParser) -> None:
    del p


FromArgs = Callable[[argparse.Namespace], "CommandResult"]
Handler = FromArgs  # what the parser stores as the ``handler`` default of each command


class CommandSpec(NamedTuple):
    """A command's face, declared by its module as ``COMMAND``. (A NamedTuple, not a dataclass:
    dataclasses would cost every start-up a few milliseconds.)"""

    name: str
    help: str  # its line in `ascendpatch --help`
    description: str  # `ascendpatch NAME --help`: what it does and what it exits with
    example: str  # one command line, shown under the description
    run: FromArgs  # parsed arguments -> the command's typed run
    configure: Callable[[argparse.ArgumentParser], None] = no_options  # its own options
    source: bool = False  # takes --wheelhouse / --offline


class Command(NamedTuple):
    """A command as known before its module is imported: the module's name."""

    module: str

    @property
    def name(self) -> str:
        return self.module.replace("_", "-")


# Every command, in the order of `ascendpatch --help`: ascendpatch/commands/MODULE.py each.
COMMANDS = tuple(map(Command, (
    "apply", "plan", "revert", "status", "verify", "install", "lock", "snapshot", "audit",
    "diff", "sandbox", "bundle", "logs", "smoke", "check_launch", "serve", "stop", "capture",
    "port", "catalog_check", "fleet_report", "manifests",
)))


class Reach(enum.Enum):
    """How far a command reaches into the target."""

    NONE = "none"  # the manifest and the files named on the command line only
    SITE = "site"  # reads or writes the target's site-packages
    INTERPRETER = "interpreter"  # also runs the target interpreter (probes, pip, plugin checks)


# The one table of it. Discovery executes a manifest's target.python candidates only for
# INTERPRETER commands; hints repeat --python / --site-packages only for commands with a
# reach; the parser starts inspecting a target named by --python for them (_prefetch).
REACH = {"apply": Reach.SITE, "plan": Reach.SITE, "revert": Reach.SITE, "status": Reach.SITE,
         "snapshot": Reach.SITE, "audit": Reach.SITE, "verify": Reach.INTERPRETER,
         "install": Reach.INTERPRETER, "lock": Reach.INTERPRETER, "capture": Reach.INTERPRETER,
         "serve": Reach.INTERPRETER}


# Commands that read pip's settings for install (the resolver's choice, the pre-flight's cache
# key: env/pipconfig.py): the parser starts that read too, once it knows the target (_prefetch).
READS_PIP_CONFIG = ("install", "lock")


def reach(command: str | None) -> Reach:
    return REACH.get(command or "", Reach.NONE)


def load(command: Command) -> CommandSpec:
    """Import the command's module and return its COMMAND (a wrong one fails here, by name)."""
    import importlib

    spec = getattr(importlib.import_module(f"ascendpatch.commands.{command.module}"),
                   "COMMAND", None)
    if not isinstance(spec, CommandSpec) or spec.name != command.name:
        raise TypeError(f"ascendpatch.commands.{command.module}.COMMAND is not the "
                        f"CommandSpec of {command.name!r}: {spec!r}")
    return spec


class Commands(argparse._SubParsersAction):  # type: ignore[type-arg]
    """The subcommands: every name known up front, a command's parser built (its module
    imported) only when the command is named on the line, all of them for the help that lists
    them (``_get_subactions``) and for whoever calls load_all (completion, tests)."""

    def expect(self, commands: Sequence[Command], common: argparse.ArgumentParser,
               source: argparse.ArgumentParser, *, prefetch: bool = False) -> None:
        """``prefetch``: start inspecting a target named before the command word (_prefetch);
        only for main, whose error boundary stops what no command took."""
        self._prefetch = prefetch
        self._order = tuple(c.name for c in commands)
        self._waiting = {c.name: c for c in commands}
        self._parents = {False: [common], True: [common, source]}
        # argparse checks the command word against choices (and lists them in its error)
        # before it calls __call__: names suffice there, no module is imported for them
        self.choices = self._order  # type: ignore[assignment]

    def load(self, name: str) -> None:
        command = self._waiting.pop(name, None)
        if command is None:
            return
        spec = load(command)
        child = self.add_parser(spec.name, parents=self._parents[spec.source], help=spec.help,
                                description=spec.description,
                                epilog=f"example:\n  {spec.example}",
                                formatter_class=argparse.RawDescriptionHelpFormatter)
        spec.configure(child)
        child.set_defaults(handler=spec.run)

    def load_all(self) -> None:
        """Every command's parser, in COMMANDS order whatever was loaded first."""
        for name in self._order:
            self.load(name)
        parsers = {name: self._name_parser_map[name] for name in self._order}
        self._name_parser_map.clear()
        self._name_parser_map.update(parsers)
        self._choices_actions.sort(key=lambda action: self._order.index(action.dest))
        self.choices = self._name_parser_map

    def _get_subactions(self) -> list[argparse.Action]:
        self.load_all()
        return super()._get_subactions()

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        if self._prefetch:
            _prefetch(namespace, values[0], values[1:])
        self.load(values[0])
        super().__call__(parser, namespace, values, option_string)


# Options that, written after the command word, make the target named before it not the one
# the command uses (--python, --site-packages) or run nothing in it (--help, --version).
_NOT_PREFETCHED = ("--python", "--site-packages", "--help", "--version")


def _prefetch(namespace: argparse.Namespace, command: str, rest: Sequence[str]) -> None:
    """The target interpreter the command will use, as far as the words before the command
    word and the environment tell (:func:`_named_python`), starts being inspected now, before
    the command's modules load, for a command that reaches into its target
    (env.introspection.prefetch; main's error boundary stops what no command took); for
    install and lock, once the target is known from its cached report, the reading of pip's
    settings starts too (env.pipconfig.prefetch). The words after the command are not parsed
    yet: when any of them could be read as one of :data:`_NOT_PREFETCHED` (argparse takes any
    unambiguous prefix: ``--py``, ``--hel``) or as ``-h`` (alone or in a cluster such as
    ``-qh``), nothing is started; a prefetch is only ever a head start."""
    if reach(command) is Reach.NONE or _may_change_the_target(rest):
        return
    python = _named_python(namespace)
    if python is None:
        return
    from ascendpatch.env import introspection

    introspection.prefetch(python)
    reads = command in READS_PIP_CONFIG and not _resolves_with_pip(rest)
    started = introspection.answered(python) if reads else None
    if started is not None and started.cached is not None:
        # (while its interpreter still runs, pip's settings wait for it)
        from ascendpatch.env import pipconfig

        who = pipconfig.reader_of_report(python, started.cached)
        if who is not None:
            pipconfig.prefetch(who, "install")


def _named_python(namespace: argparse.Namespace) -> Path | None:
    """The interpreter that is the target unless a word after the command says otherwise, in
    the precedence of commands/context.choose_target: ``--site-packages`` before the command
    (it wins: no interpreter), ``--python`` before it (a Path already: the option's type is
    :func:`path`), ``$ASCENDPATCH_PYTHON`` (as choose_target reads it); None when the config
    file or discovery decides (reading them is the command's)."""
    if getattr(namespace, "site_packages", None) is not None:
        return None
    python: Path | None = getattr(namespace, "python", None)
    if python is not None:
        return python
    import os

    from ascendpatch.env.introspection import from_env

    return from_env(os.environ)


def _resolves_with_pip(rest: Sequence[str]) -> bool:
    """``--resolver pip`` (or ``=pip``, or any prefix argparse takes) among the words: the
    uv choice reads no pip settings then, so none are read ahead."""
    for index, word in enumerate(rest):
        if word == "--":
            return False
        name, equals, value = word.partition("=")
        if len(name) > 2 and "--resolver".startswith(name):
            chosen = value if equals else (rest[index + 1] if index + 1 < len(rest) else "")
            if chosen == "pip":
                return True
    return False


def _may_change_the_target(rest: Sequence[str]) -> bool:
    for word in rest:
        if word == "--":  # a command line follows (check-launch's), not options of ours
            return False
        if word.startswith("--"):
            name = word.split("=", 1)[0]
            if len(name) > 2 and any(option.startswith(name) for option in _NOT_PREFETCHED):
                return True
        elif word.startswith("-") and "h" in word[1:]:
            return True
    return False
