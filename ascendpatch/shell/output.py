"""The one place that prints. Turns CommandResults into `[OK]` lines or a JSON document.

Colour: ``--color always|never`` wins; with ``auto`` a set ``NO_COLOR`` turns colour off, a set
``FORCE_COLOR`` turns it on, and otherwise colour (and the progress spinner, on stderr) appear
only on a terminal. Progress comes through ``ascendpatch/progress.py``: core code reports long
steps there, :class:`ConsoleReporter` shows them.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import IO, Any

from ascendpatch import redact
from ascendpatch.progress import Heartbeat, heartbeat_interval
from ascendpatch.results import (
    ArtifactResult,
    CommandResult,
    Item,
    Level,
    Table,
    Tone,
)
from ascendpatch.shell import streams
from ascendpatch.shell.wording import JSON_FORMAT, say, to_json, words

_STYLE = {Level.OK: "green", Level.SKIP: "cyan", Level.WARN: "yellow", Level.FAIL: "bold red"}
_PROBLEMS = (Level.WARN, Level.FAIL)

# One line of output: spans of (text, rich style or None). The plain writer joins the texts; the
# colour writer builds a rich Text from them. No markup is ever parsed, so nothing is escaped.
Span = tuple[str, str | None]
Line = tuple[Span, ...]


def prefix(level: Level) -> str:
    """The greppable prefix of a line: the one place a Level becomes "[OK]", "[FAIL]", ..."""
    return f"[{level.value}]"


def level_line(level: Level, text: str) -> Line:
    """"[OK] text", the prefix in the level's colour."""
    return ((prefix(level), _STYLE[level]), (" " + text, None))


def plain_line(level: Level, text: str) -> str:
    """The same line without colour (stderr messages written before any console exists)."""
    return "".join(part for part, _ in level_line(level, safe(text)))


def safe(text: str) -> str:
    """One line as it may reach a terminal: escape sequences, other control characters,
    bidirectional overrides and newlines become visible text (see deploy/text.py)."""
    from ascendpatch.deploy.text import printable

    return printable(text)


class _Plain:
    """Logs, pipes and --color never: plain lines, without importing rich at all."""

    def __init__(self, stream: IO[str] | None) -> None:
        self.stream = stream

    def line(self, spans: Line) -> None:
        (self.stream or sys.stdout).write(safe("".join(text for text, _ in spans)) + "\n")

    def table(self, table: Any) -> None:
        del table  # tables are for terminals; a pipe gets the lines (and the summary)


class _Rich:
    """A terminal (or forced colour): each line a rich Text built from its styled spans."""

    def __init__(self, stream: IO[str] | None) -> None:
        from rich.console import Console  # imported here: keep start-up fast

        self.console = Console(file=stream, force_terminal=True, no_color=False, highlight=False,
                               soft_wrap=True, emoji=False)

    def line(self, spans: Line) -> None:
        self.console.print(_text(spans))

    def table(self, table: Any) -> None:
        self.console.print(table)


def _text(spans: Line) -> Any:
    from rich.text import Text

    text = Text()
    for part, style in spans:
        text.append(safe(part), style=style)
    return text


Writer = _Plain | _Rich


def use_color(color: str, stream: IO[str] | None) -> bool:
    """--color, then NO_COLOR / FORCE_COLOR (https://no-color.org, force-color.org), then TTY."""
    if color in ("always", "never"):
        return color == "always"
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR", "0") not in ("", "0"):
        return True
    return _isatty(stream or sys.stdout)


def _console(stream: IO[str] | None, color: str) -> Writer:
    """stream None: sys.stdout as it is at each write (rich's live display may redirect it)."""
    if not use_color(color, stream):
        return _Plain(stream)
    return _Rich(stream)


def _isatty(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def line(level: Level, text: str, *, color: str = "auto", stream: IO[str] | None = None) -> None:
    _console(stream or sys.stdout, color).line(level_line(level, text))


def render(result: CommandResult, *, as_json: bool, color: str,
           stream: IO[str] | None = None, quiet: bool = False,
           streamed: bool = False, invocation: str = "ascendpatch") -> None:
    """The whole result. ``streamed``: a reporter was showing items as they came (the CLI), so
    the items of a result that streamed them are not shown again; hints ("run: ascendpatch
    apply X") repeat ``invocation`` (the --python / --manifest given)."""
    out = stream or sys.stdout
    if as_json:
        out.write(json.dumps(to_json(result, invocation), indent=2) + "\n")
        return
    if result.payload is not None:  # -o -: the document on stdout, the lines on stderr
        out.write(result.payload)
        out.flush()
        out = sys.stderr
    console = _console(stream if result.payload is None else out, color)
    for note in result.notes:
        console.line(level_line(Level.WARN, say(note, invocation)))
    grid = result.body.table() if result.body is not None else None
    table = _rich_table(grid) if grid and grid.stands_in and not isinstance(console, _Plain) \
        else None
    for item in () if streamed and result.streamed else result.results:
        if quiet and item.level not in _PROBLEMS:
            continue
        if table is not None and item.level is Level.OK:
            continue  # on a terminal the table says it
        render_item(console, item, result.show_diff, invocation, files=result.show_files)
    if grid is not None and not grid.stands_in:
        wide_table(grid, out, color)
    if table is not None:
        console.table(table)
    elif result.summary and not quiet:
        for text in result.summary.split("\n"):
            console.line(((text, None),))
    _render_recap(_console(sys.stderr, color), result, quiet)


def render_item(console: Writer, item: Item, show_diff: bool,
                invocation: str = "ascendpatch", *, files: bool = False) -> None:
    for spans in item_lines(item, show_diff, invocation, files=files):
        console.line(spans)


def item_lines(item: Item, show_diff: bool, invocation: str = "ascendpatch", *,
               files: bool = False) -> list[Line]:
    """The item's line, then (``files``: status) each file with its state, then (for problems,
    or when diffs are shown) its details and diff."""
    lines = [level_line(item.level, say(words(item), invocation))]
    if files and isinstance(item, ArtifactResult):
        lines += [((f"    {f.path}: {f.state}", None),) for f in item.files]
    if item.level in _PROBLEMS or show_diff:
        lines += [(("    " + text, None),) for detail in item.details
                  for text in detail.splitlines()]
    if show_diff and isinstance(item, ArtifactResult) and item.diff:
        lines += [_diff_line(text) for text in item.diff.rstrip("\n").splitlines()]
    return lines


def _diff_line(text: str) -> Line:
    """Unified-diff colours: headers bold, hunks cyan, removals red, additions green."""
    for start, style in (("+++", "bold"), ("---", "bold"), ("@@", "cyan"), ("+", "green"),
                         ("-", "red")):
        if text.startswith(start):
            return ((text, style),)
    return ((text, None),)


def _render_recap(console: Writer, result: CommandResult, quiet: bool) -> None:
    """On stderr, like the other summaries: stdout keeps one greppable line per artifact."""
    if not result.has_recap:
        return
    recap = result.recap()
    if quiet and not recap["failed"]:
        return
    style = "bold red" if recap["failed"] else "green"
    counts = " ".join(f"{key}={value}" for key, value in recap.items())
    console.line((("recap:", style), (" " + counts, None)))


_TONE = {Tone.GOOD: "green", Tone.QUIET: "cyan", Tone.CAUTION: "yellow", Tone.BAD: "bold red",
         Tone.ABSENT: "magenta"}


def _rich_table(grid: Table) -> Any:
    """A payload's Table as rich draws it: every text made safe, each cell in its tone's colour;
    a table that stands in for lines has rich's title style (italic), a wide one a plain title."""
    from rich.table import Table as RichTable
    from rich.text import Text

    title = Text(safe(grid.title), style="table.title" if grid.stands_in else "")
    table = RichTable(title=title)
    for index, name in enumerate(grid.columns):
        table.add_column(Text(safe(name)), justify="right" if index in grid.right else "left")
    for row in grid.rows:
        table.add_row(*[Text(safe(c.text), style=_TONE[c.tone] if c.tone else "") for c in row])
    return table


def wide_table(grid: Table, stream: IO[str], color: str) -> None:
    """A table printed after the lines on any stream (fleet-report), with the same colour rule
    as every line, and wide enough that a pipe does not squeeze its columns."""
    from rich.console import Console

    colour = use_color(color, stream)
    Console(file=stream, no_color=not colour, force_terminal=colour, highlight=False,
            width=max(100, 14 * len(grid.columns))).print(_rich_table(grid))


def error(message: str, *, command: str | None, exit_code: int, as_json: bool, color: str,
          log_path: str | None = None, details: Sequence[str] = ()) -> None:
    """A failure that stopped the command before it produced results (stderr / JSON);
    ``details``: one more line each (every other problem of a manifest), indented under it."""
    if as_json:
        failure: dict[str, Any] = {"message": message, "log": log_path}
        if details:
            failure["details"] = list(details)
        doc: dict[str, Any] = {
            "format": JSON_FORMAT, "command": command, "ok": False, "exit_code": exit_code,
            "results": [], "notes": [], "error": failure}
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        return
    text = message + (f" (details: {log_path})" if log_path else "")
    line(Level.FAIL, text, color=color, stream=sys.stderr)
    for detail in details:
        _console(sys.stderr, color).line((("    " + detail, None),))


def progress(message: str, *, color: str) -> None:
    """Side remarks while a command runs (waiting for a lock): stderr, never stdout."""
    line(Level.WARN, message, color=color, stream=sys.stderr)


def _ignore(count: int) -> None:
    del count


class ConsoleReporter:
    """Shows what core code reports through ascendpatch.progress while a command runs.

    Spinner / bar: on stderr, only when stderr is a terminal with colour (not under NO_COLOR,
    --color never, -q). -v: command lines and their output on stderr. Items: printed on stdout
    as they are reported (not with --json); the final render of a ``streamed`` result skips
    them."""

    def __init__(self, *, color: str, verbose: bool = False, quiet: bool = False,
                 as_json: bool = False, invocation: str = "ascendpatch") -> None:
        self.color = color
        self.invocation = invocation
        self.verbose = verbose
        self.quiet = quiet
        self.as_json = as_json
        self.animate = (not quiet and _isatty(sys.stderr) and use_color(color, sys.stderr))
        # without a spinner (a pipe, a CI log, NO_COLOR) a long step says it is alive, on stderr
        self.beat = 0.0 if as_json or quiet or self.animate else heartbeat_interval()
        self._noticed: set[str] = set()
        self._live: Any = None
        self._depth = 0

    def task(self, label: str, total: int | None) -> AbstractContextManager[Any]:
        if self.animate:
            return self._task(label, total)
        if self.beat > 0:
            return Heartbeat(lambda text: self._stderr(((text, None),)), self.beat, safe(label))
        return nullcontext(_ignore)

    @contextmanager
    def _task(self, label: str, total: int | None) -> Iterator[Any]:
        live = self._start()
        task_id = live.add_task(safe(label), total=total)
        self._depth += 1
        try:
            yield lambda count: live.advance(task_id, count)
        finally:
            self._depth -= 1
            live.remove_task(task_id)
            if self._depth == 0:
                live.stop()
                self._live = None

    def _start(self) -> Any:
        if self._live is None:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                SpinnerColumn,
                TextColumn,
                TimeElapsedColumn,
            )

            console = Console(file=sys.stderr, force_terminal=True, highlight=False)
            self._live = Progress(SpinnerColumn(), TextColumn("{task.description}", markup=False),
                                  BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                                  console=console, transient=True,
                                  redirect_stdout=_isatty(sys.stdout), redirect_stderr=False)
            self._live.start()
        return self._live

    def _stderr(self, spans: Line) -> None:
        if self._live is not None:
            self._live.console.print(_text(spans))
        else:
            _console(sys.stderr, self.color).line(spans)

    def command(self, argv: Sequence[str]) -> None:
        if self.verbose:
            self._stderr((("$ " + shlex.join(argv), "dim"),))

    def output(self, text: str) -> None:
        if self.verbose:  # a subprocess's words: an index password in them masked
            for row in text.rstrip("\n").splitlines():
                self._stderr((("  " + redact.text(row), "dim"),))

    def detail(self, text: str) -> None:
        if self.verbose:
            self._stderr(((safe(text), "dim"),))

    def notice(self, text: str) -> None:
        """One [WARN] line on stderr (also with -q and --json: stdout stays the result)."""
        if text not in self._noticed:
            self._noticed.add(text)
            self._stderr(level_line(Level.WARN, safe(text)))

    def item(self, item: Item, show_diff: bool = False) -> None:
        # `ascendpatch apply | head -1`, a full disk: stdout is guarded (cli.main, streams.py),
        # the command goes on, and once stdout is gone nothing more is rendered for it
        if self.as_json or streams.gone():
            return
        if self.quiet and item.level not in _PROBLEMS:
            return
        render_item(_console(None, self.color), item, show_diff, self.invocation)
        sys.stdout.flush()
