"""``ascendpatch check-launch [--model-dir DIR] [--config deploy.yaml] [-- <serve command>]``."""

from __future__ import annotations

from argparse import Namespace
from collections.abc import Sequence
from pathlib import Path

import yaml

from ascendpatch.deploy import launch
from ascendpatch.errors import InvalidInputError
from ascendpatch.results import CheckResult, CommandResult, Level


def run(argv: Sequence[str], model_dir: Path | None, config: Path | None) -> CommandResult:
    if not argv and config is None:
        raise InvalidInputError("nothing to check: give -- <serve command line> and/or "
                                "--config deploy.yaml")
    verdicts: list[launch.Verdict] = []
    if argv:
        verdicts += launch.check_command(list(argv), model_dir)
    if config is not None:
        try:
            document = yaml.safe_load(config.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            raise InvalidInputError(f"--config {config} cannot be read as YAML ({exc})") \
                from None
        found = launch.check_config(document)
        verdicts += found or [launch.Verdict("config", True, f"{config}: no knob the rules "
                                                               "know of")]
    results = tuple(CheckResult(f"launch:{v.rule}", "launch", Level.OK if v.ok else Level.FAIL,
                                v.message) for v in verdicts)
    return CommandResult("check-launch", results)


def from_args(args: Namespace) -> CommandResult:
    serve = [a for a in args.serve if a != "--"] if args.serve else []
    return run(serve, args.model_dir, args.config)
