"""``ascendpatch check-launch [--model-dir DIR] [--config deploy.yaml] [-- <serve command>]``."""

from __future__ import annotations

import os
from argparse import REMAINDER, ArgumentParser, Namespace
from collections.abc import Callable, Sequence
from pathlib import Path

import yaml

from ascendpatch.commands import context
from ascendpatch.deploy import launch
from ascendpatch.errors import AscendpatchError, InvalidInputError
from ascendpatch.results import CheckResult, CommandResult, Level
from ascendpatch.shell import cliargs


def run(argv: Sequence[str], model_dir: Path | None, config: Path | None,
        installed: Callable[[], launch.AscendQuant] = lambda: launch.AscendQuant(None)) \
        -> CommandResult:
    if not argv and config is None:
        raise InvalidInputError("nothing to check: give -- <serve command line> and/or "
                                "--config deploy.yaml")
    verdicts: list[launch.Verdict] = []
    if argv:
        verdicts += launch.check_command(list(argv), model_dir, installed, dict(os.environ))
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


def installed_vllm_ascend(args: Namespace) -> launch.AscendQuant:
    """What the target's vllm-ascend does about quant_model_description.json."""
    try:
        target = context.target_from_args(args)
    except AscendpatchError:
        return launch.AscendQuant(None)
    dist = target.get("vllm-ascend")
    if dist is None:
        return launch.AscendQuant(None)
    return launch.ascend_quantization(dist.location, dist.version)


def from_args(args: Namespace) -> CommandResult:
    serve = [a for a in args.serve if a != "--"] if args.serve else []
    return run(serve, args.model_dir, args.config, lambda: installed_vllm_ascend(args))


def configure(p: ArgumentParser) -> None:
    p.add_argument("--config", type=cliargs.path, metavar="deploy.yaml",
                   help="a deploy config to check (vllm-omni stage knobs, serve arguments)")
    p.add_argument("--model-dir", type=cliargs.path, metavar="DIR",
                   help="the model folder (default: the one the command names)")
    p.add_argument("serve", nargs=REMAINDER, metavar="-- COMMAND",
                   help="the vllm serve command line, after --")


COMMAND = cliargs.CommandSpec(
    name="check-launch",
    help="check a vllm serve command line and/or a deploy config",
    description="Check a vllm serve command line and/or a deploy config before launching.",
    example="ascendpatch check-launch -- vllm serve /models/m --quantization ascend",
    run=from_args, configure=configure,
)
