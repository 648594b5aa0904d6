"""The one place that prints. Turns CommandResults into `[OK]` lines or a JSON document."""

from __future__ import annotations

import json
import sys
from typing import IO, Any

from ascendpatch.results import ArtifactResult, CheckResult, CommandResult, Item, Level

JSON_FORMAT = 1
_STYLE = {Level.OK: "green", Level.SKIP: "cyan", Level.WARN: "yellow", Level.FAIL: "bold red"}


class _Plain:
    """Logs, pipes and --color never: plain lines, without importing rich at all."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream

    def print(self, markup: str) -> None:
        self.stream.write(_strip_markup(markup) + "\n")


def _strip_markup(markup: str) -> str:
    import re

    text = re.sub(r"(?<!\\)\[/?[a-z ]*\]", "", markup)
    return re.sub(r"(\\*)\\\[(?=([a-z#/@])?)",  # undoes _escape
                  lambda m: m.group(1)[:len(m.group(1)) // (2 if m.group(2) else 1)] + "[", text)


def _console(stream: IO[str], color: str) -> Any:
    if color == "never" or (color == "auto" and not _isatty(stream)):
        return _Plain(stream)
    from rich.console import Console  # imported here: keep start-up fast

    force = True if color == "always" else None
    return Console(file=stream, force_terminal=force, no_color=False, highlight=False,
                   soft_wrap=True, emoji=False)


def _isatty(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _escape(text: str) -> str:
    """Text shown as is: every "[" escaped, and backslashes just before it doubled (else
    "\\[link=...]" from a server would end the escape and open a rich tag or OSC 8 link)."""
    import re

    text = re.sub(r"(\\*)\[(?=[a-z#/@])", lambda m: m.group(1) * 2 + "[", text)  # rich's rule
    return text.replace("[", "\\[")


def line(level: Level, text: str, *, color: str = "auto", stream: IO[str] | None = None) -> None:
    console = _console(stream or sys.stdout, color)
    console.print(f"[{_STYLE[level]}]\\[{level.value}][/] {_escape(text)}")


def render(result: CommandResult, *, as_json: bool, color: str,
           stream: IO[str] | None = None, show_diff: bool = False) -> None:
    out = stream or sys.stdout
    if as_json:
        out.write(json.dumps(to_json(result), indent=2) + "\n")
        return
    console = _console(out, color)
    for note in result.notes:
        console.print(f"[{_STYLE[Level.WARN]}]\\[WARN][/] {_escape(note)}")
    for item in result.results:
        _render_item(console, item, show_diff)
    fleet = result.extra.get("fleet")
    if isinstance(fleet, dict):
        fleet_table(fleet, out, color)
    if result.summary:
        console.print(_escape(result.summary))


def _render_item(console: Any, item: Item, show_diff: bool) -> None:
    console.print(f"[{_STYLE[item.level]}]\\[{item.level.value}][/] {_escape(item.message)}")
    if item.level in (Level.FAIL, Level.WARN) or show_diff:
        for detail in item.details:
            for text in detail.splitlines():
                console.print(f"    {_escape(text)}")
    if show_diff and isinstance(item, ArtifactResult) and item.diff:
        console.print(_escape(item.diff.rstrip("\n")))


_CELL = {"OK": "green", "WARN": "yellow", "FAIL": "bold red"}


def fleet_table(doc: dict[str, Any], stream: IO[str], color: str) -> None:
    """fleet-report: hosts x (stack pins, artifacts, files, drift count), outliers in red."""
    from rich.console import Console
    from rich.table import Table

    plain = color == "never" or (color == "auto" and not _isatty(stream))
    table = Table(title=f"fleet against the {doc['baseline']['source']}", show_lines=False)
    table.add_column("host")
    for check in doc["columns"]:
        table.add_column(check.split(":", 1)[-1])
    table.add_column("drift", justify="right")
    for host in doc["hosts"]:
        style = {"ok": "green", "outlier": "yellow", "drift": "bold red",
                 "missing": "magenta"}[host["status"]]
        if host["status"] == "missing":
            cells = ["missing"] * len(doc["columns"])
        else:
            cells = [f"[{_CELL[c['level']]}]{_escape(c['value'])}[/]" for c in host["cells"]]
        table.add_row(f"[{style}]{_escape(host['host'])}[/]", *cells,
                      "-" if host["status"] == "missing" else str(host["drift"]))
    Console(file=stream, no_color=plain, force_terminal=True if color == "always" else None,
            highlight=False, width=max(100, 14 * (len(doc["columns"]) + 2))).print(table)


def to_json(result: CommandResult) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "format": JSON_FORMAT,
        "command": result.command,
        "ok": result.ok,
        "exit_code": result.exit_code,
        "results": [_item_json(r) for r in result.results],
        "notes": list(result.notes),
    }
    doc.update(result.extra)
    return doc


def _item_json(item: Item) -> dict[str, Any]:
    if isinstance(item, CheckResult):
        check: dict[str, Any] = {"id": item.id, "check": item.check, "level": item.level.value,
                                 "message": item.message}
        if item.details:
            check["details"] = list(item.details)
        if item.data:
            check["data"] = item.data
        return check
    doc: dict[str, Any] = {
        "id": item.id,
        "kind": item.kind,
        "status": item.status.value,
        "level": item.level.value,
        "message": item.message,
        "files": [f.__dict__ for f in item.files],
    }
    if item.details:
        doc["details"] = list(item.details)
    if item.diff:
        doc["diff"] = item.diff
    return doc


def error(message: str, *, command: str, exit_code: int, as_json: bool, color: str,
          log_path: str | None = None) -> None:
    """A failure that stopped the command before it produced results (stderr / JSON)."""
    if as_json:
        doc = {"format": JSON_FORMAT, "command": command, "ok": False, "exit_code": exit_code,
               "results": [], "error": {"message": message, "log": log_path}}
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        return
    text = message + (f" (details: {log_path})" if log_path else "")
    line(Level.FAIL, text, color=color, stream=sys.stderr)


def progress(message: str, *, color: str) -> None:
    """Side remarks while a command runs (waiting for a lock): stderr, never stdout."""
    line(Level.WARN, message, color=color, stream=sys.stderr)
