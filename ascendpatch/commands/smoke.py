"""``ascendpatch smoke --url http://HOST:PORT [--model ID]``."""

from __future__ import annotations

from argparse import Namespace

from ascendpatch.deploy import smoke
from ascendpatch.errors import InvalidInputError
from ascendpatch.results import CheckResult, CommandResult, Level


def _line(cid: str, step: smoke.Step) -> CheckResult:
    return CheckResult(cid, "smoke", Level.OK if step.ok else Level.FAIL, step.message,
                       data={"seconds": round(step.seconds, 4)})


def run(url: str, model: str | None = None, timeout: float = 60.0) -> CommandResult:
    if not url.startswith(("http://", "https://")):
        raise InvalidInputError(f"--url {url!r} must start with http:// or https://")
    base = url.rstrip("/").removesuffix("/v1")
    listed, ids = smoke.models(base, timeout)
    results = [_line("models", listed)]
    if not listed.ok:
        return CommandResult("smoke", tuple(results))
    chosen = model or (ids[0] if ids else None)
    if model is not None and model not in ids:
        results.append(CheckResult(
            "model-id", "smoke", Level.FAIL,
            f"model {model!r} is not what the server exposes ({', '.join(ids) or 'nothing'}): "
            f"clients asking for it get 404 (field note 000 §2.1); fix: use one of those ids, "
            f"or start the server with --served-model-name {model}"))
    if chosen is None:
        results.append(CheckResult("chat", "smoke", Level.FAIL, "the server lists no model"))
        return CommandResult("smoke", tuple(results))
    results.append(_line("chat", smoke.chat(base, chosen, timeout)))
    return CommandResult("smoke", tuple(results))


def from_args(args: Namespace) -> CommandResult:
    return run(args.url, args.model, args.timeout)
