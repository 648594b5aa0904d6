"""What results say: a message or fix with its hints worded for this run's invocation (the
--python / --site-packages / --manifest it was given), the commands a fix names, and the
--json documents (schema: ascendpatch/data/output.schema.json). No printing here: that is
output.py's."""

from __future__ import annotations

import shlex
from typing import Any

from ascendpatch.results import CHECK_STATUS, CheckResult, CommandResult, Hint, Item, Phrase

JSON_FORMAT = 1


def say(text: str, invocation: str) -> str:
    """A message, fix or note in words: each Hint in it repeats ``invocation`` (the
    --python / --site-packages / --manifest given), the target options only for a command that
    acts on a target."""
    if not isinstance(text, Phrase):
        return text
    return "".join(part if isinstance(part, str) else _command(part, invocation)
                   for part in text.parts)


def _program(hint: Hint, invocation: str) -> str:
    """How the hint's command starts: ``invocation``, without the target options for a
    command that acts on no target."""
    if invocation == "ascendpatch":
        return invocation
    from ascendpatch.shell.cliargs import Reach, reach

    if reach(hint.argv[0]) is not Reach.NONE:
        return invocation
    words = shlex.split(invocation)  # a command without a target: only --manifest
    keep = [w for i, w in enumerate(words)
            if w not in ("--python", "--site-packages")
            and (i == 0 or words[i - 1] not in ("--python", "--site-packages"))]
    return shlex.join(keep)


def _command(hint: Hint, invocation: str) -> str:
    return hint.words() if hint.runner else hint.words(_program(hint, invocation))


def fix_commands(fix: str, invocation: str) -> list[list[str]]:
    """The commands a fix suggests, each as the argv to run (``--json``'s ``fix_commands``):
    what a script or the Ansible module acts on, rather than reading the words."""
    if not isinstance(fix, Phrase):
        return []
    return [[*part.runner, *part.argv] if part.runner else
            [*shlex.split(_program(part, invocation)), *part.argv]
            for part in fix.parts if isinstance(part, Hint)]


def words(item: Item) -> str:
    """An item's text: what was found, then what to do about it."""
    return Phrase(item.message, "; fix: ", item.fix) if item.fix else item.message


def to_json(result: CommandResult, invocation: str = "ascendpatch") -> dict[str, Any]:
    """The documented envelope (schema: ascendpatch/data/output.schema.json)."""
    doc: dict[str, Any] = {
        "format": JSON_FORMAT,
        "command": result.command,
        "ok": result.ok,
        "exit_code": result.exit_code,
        "results": [item_json(r, invocation) for r in result.results],
        "notes": [say(note, invocation) for note in result.notes],
    }
    if result.has_recap:
        doc["recap"] = result.recap()
    if result.payload is not None:
        doc["payload"] = result.payload
    if result.body is not None:
        doc.update(result.body.json())
    return doc


def item_json(item: Item, invocation: str = "ascendpatch") -> dict[str, Any]:
    """One shape for every item: artifacts and checks alike have id, kind, status, level."""
    if isinstance(item, CheckResult):
        return {"id": item.id, "kind": item.check, "check": item.check,
                "status": CHECK_STATUS[item.level], "level": item.level.value,
                "message": say(words(item), invocation), "files": [],
                "details": list(item.details), "data": dict(item.data),
                **_fix_json(item, invocation)}
    doc: dict[str, Any] = {
        "id": item.id,
        "kind": item.kind,
        "status": item.status.value,
        "level": item.level.value,
        "message": say(words(item), invocation),
        "files": [f.__dict__ for f in item.files],
        "details": list(item.details),
        "data": {},
    }
    if item.diff:
        doc["diff"] = item.diff
    doc.update(_fix_json(item, invocation))
    return doc


def _fix_json(item: Item, invocation: str) -> dict[str, Any]:
    """"fix": the remedy on its own (it also ends "message", for scripts that read only that);
    "fix_commands": the commands it suggests, as argv lists, when it names any."""
    if not item.fix:
        return {}
    commands = fix_commands(item.fix, invocation)
    return {"fix": say(item.fix, invocation), **({"fix_commands": commands} if commands else {})}
