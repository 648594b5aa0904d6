"""``ascendpatch smoke --url http://HOST:PORT [--model ID] [--timeout S] [--wait S]``."""

from __future__ import annotations

from argparse import ArgumentParser, Namespace

from ascendpatch.deploy import smoke
from ascendpatch.deploy.text import printable
from ascendpatch.errors import InvalidInputError
from ascendpatch.results import CheckResult, CommandResult, Level
from ascendpatch.shell import cliargs


def _line(cid: str, step: smoke.Step) -> CheckResult:
    return CheckResult(cid, "smoke", Level.OK if step.ok else Level.FAIL, step.message,
                       data={"seconds": round(step.seconds, 4)}, fix=step.fix)


def endpoint(url: str) -> smoke.Endpoint:
    try:
        return smoke.parse_url(url)
    except ValueError as exc:
        # the URL itself is not echoed: it may carry credentials
        raise InvalidInputError(f"--url is not a valid http(s)://HOST[:PORT] address ({exc})",
                                fix="e.g. --url http://127.0.0.1:8000") from None


def _seconds(flag: str, value: float, zero_ok: bool = False) -> float:
    if not (smoke.valid_seconds(value) or (zero_ok and value == 0)):
        raise InvalidInputError(f"{flag} must be a finite number of seconds above 0 (got "
                                f"{value})")
    return value


def run(url: str, model: str | None = None, timeout: float = 60.0, wait: float = 0.0) \
        -> CommandResult:
    _seconds("--timeout", timeout)
    _seconds("--wait", wait, zero_ok=True)
    base = endpoint(url)
    results: list[CheckResult] = []
    if wait:
        ready = smoke.wait_ready(base, wait, timeout)
        results.append(_line("wait", ready))
        if not ready.ok:
            return CommandResult("smoke", tuple(results))
    listed, ids = smoke.models(base, timeout)
    results.append(_line("models", listed))
    if not listed.ok:
        return CommandResult("smoke", tuple(results))
    chosen = model or (ids[0] if ids else None)
    if model is not None and model not in ids:
        shown = printable(", ".join(ids)) or "nothing"
        results.append(CheckResult(
            "model-id", "smoke", Level.FAIL,
            f"model {printable(model)!r} is not what the server exposes ({shown}): clients "
            f"asking for it get 404 (a server exposes its model path unless "
            f"--served-model-name is set)",
            fix=f"use one of those ids, or start the server with --served-model-name "
                f"{printable(model)}"))
    if chosen is None:
        results.append(CheckResult("chat", "smoke", Level.FAIL, "the server lists no model"))
        return CommandResult("smoke", tuple(results))
    results.append(_line("chat", smoke.chat(base, chosen, timeout)))
    return CommandResult("smoke", tuple(results))


def from_args(args: Namespace) -> CommandResult:
    return run(args.url, args.model, args.timeout, getattr(args, "wait", 0.0))


def configure(p: ArgumentParser) -> None:
    p.add_argument("--url", required=True, metavar="http://HOST:PORT",
                   help="the server's base URL")
    p.add_argument("--model", metavar="ID", help="the model id clients will ask for")
    p.add_argument("--request-timeout", "--timeout", dest="timeout", type=float, default=120.0,
                   metavar="SECONDS",
                   help="bounds each whole request, body included (default 120; --timeout is "
                        "an alias)")
    p.add_argument("--wait", type=float, default=0.0, metavar="SECONDS",
                   help="first wait up to SECONDS for GET /v1/models to answer 200")


COMMAND = cliargs.CommandSpec(
    name="smoke",
    help="GET /v1/models, then one chat completion with top_p=0.9",
    description=("GET /v1/models, then one chat completion with top_p=0.9 (the request that "
                 "used to kill EngineCore); names model-id mismatches."),
    example="ascendpatch smoke --url http://127.0.0.1:8000 --model Muse-Glimmer-30B",
    run=from_args, configure=configure,
)
