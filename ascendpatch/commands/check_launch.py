"""``ascendpatch check-launch [--model-dir DIR] [--config deploy.yaml] [-- <serve command>]``."""

from __future__ import annotations

import os
from argparse import ArgumentParser, Namespace
from collections.abc import Callable, Sequence
from pathlib import Path

import yaml

from ascendpatch.commands import context
from ascendpatch.deploy import launch
from ascendpatch.env.target import Target
from ascendpatch.errors import InvalidInputError
from ascendpatch.results import CheckResult, CommandResult, Level
from ascendpatch.shell import cliargs


def run(argv: Sequence[str], model_dir: Path | None, config: Path | None,
        installed: Callable[[], launch.AscendQuant] = lambda: launch.AscendQuant(None),
        parse: Callable[[Sequence[str]], launch.Parsing] | None = None) -> CommandResult:
    """``parse``: reads the command line with the target's vLLM (None: ascendpatch's own
    reading, said so)."""
    if not argv and config is None:
        raise InvalidInputError("nothing to check: give -- <serve command line> and/or "
                                "--config deploy.yaml")
    verdicts: list[launch.Verdict] = []
    if argv:
        parsing = (parse or (lambda a: launch.parse_in_target(None, a)))(argv)
        verdicts.append(parsing.verdict)
        verdicts += launch.check_command(list(argv), model_dir, installed, dict(os.environ),
                                         parsing.parsed)
    if config is not None:
        try:
            document = yaml.safe_load(config.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            raise InvalidInputError(f"--config {config} cannot be read as YAML ({exc})") \
                from None
        found = launch.check_config(document, config.name)
        verdicts += found or [launch.Verdict("config", True, f"{config}: no launch rule "
                                             "applied: no knob the rules know of",
                                             level="WARN")]
    results = tuple(CheckResult(f"launch:{v.rule}", "launch", Level(v.shown_level), v.message)
                    for v in verdicts)
    return CommandResult("check-launch", results)


def _target(args: Namespace) -> Target | None:
    return context.optional_target(args)


def installed_vllm_ascend(target: Target | None) -> launch.AscendQuant:
    """What the target's vllm-ascend does about quant_model_description.json."""
    dist = target.get("vllm-ascend") if target is not None else None
    if dist is None:
        return launch.AscendQuant(None)
    return launch.ascend_quantization(dist.location, dist.version)


def vllm_parsing(target: Target | None, argv: Sequence[str]) -> launch.Parsing:
    """The command line read by the target's own vLLM, where it has one."""
    if target is None:
        return launch.parse_in_target(None, argv, "no target found")
    if target.python is None:
        return launch.parse_in_target(None, argv, f"the target ({target.describe()}) has no "
                                      "interpreter to run vLLM's parser in")
    if target.get("vllm") is None:
        return launch.parse_in_target(None, argv, f"the target ({target.describe()}) has no "
                                      "vLLM")
    return launch.parse_in_target(target.python, argv)


def from_args(args: Namespace) -> CommandResult:
    serve = [a for a in args.serve if a != "--"] if args.serve else []
    found: list[Target | None] = []

    def target() -> Target | None:  # found once, and only when something needs it
        if not found:
            found.append(_target(args))
        return found[0]

    return run(serve, args.model_dir, args.config, lambda: installed_vllm_ascend(target()),
               lambda argv: vllm_parsing(target(), argv))


def configure(p: ArgumentParser) -> None:
    p.add_argument("--config", type=cliargs.path, metavar="deploy.yaml",
                   help="a deploy config to check (vllm-omni stage knobs, serve arguments)")
    p.add_argument("--model-dir", type=cliargs.path, metavar="DIR",
                   help="the model folder (default: the one the command names)")
    cliargs.serve_command(p)


COMMAND = cliargs.CommandSpec(
    name="check-launch",
    help="check a vllm serve command line and/or a deploy config",
    description=("Check a vllm serve command line and/or a deploy config before launching; the "
                 "command line is read by the target's own vLLM argument parser (no engine "
                 "starts), or by ascendpatch's where the target has no vLLM."),
    example="ascendpatch check-launch -- vllm serve /models/m --quantization ascend",
    run=from_args, configure=configure,
)
