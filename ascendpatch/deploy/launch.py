"""Launch checks: a `vllm serve` command line (with the model folder it names) and vllm-omni
deploy configs, against data rules (ascendpatch/data/launch_rules.yaml)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any

import yaml


@dataclass(frozen=True)
class Verdict:
    rule: str
    ok: bool
    message: str


def rules() -> dict[str, Any]:
    doc = yaml.safe_load(files("ascendpatch").joinpath("data/launch_rules.yaml").read_text())
    assert isinstance(doc, dict)
    return doc


def flag_value(argv: Sequence[str], flag: str) -> str | None:
    for index, arg in enumerate(argv):
        if arg == flag and index + 1 < len(argv):
            return argv[index + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return None


def model_path(argv: Sequence[str]) -> str | None:
    explicit = flag_value(argv, "--model")
    if explicit:
        return explicit
    if "serve" in argv:
        rest = argv[argv.index("serve") + 1:]
        if rest and not rest[0].startswith("-"):
            return rest[0]
    return None


def _model_config(folder: Path) -> dict[str, Any]:
    try:
        doc = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def check_command(argv: Sequence[str], model_dir: Path | None) -> list[Verdict]:
    folder = model_dir or (Path(model_path(argv) or "") if model_path(argv) else None)
    if folder is None or not folder.is_dir():
        return [Verdict("model-folder", False,
                        f"cannot find the model folder ({folder or 'not in the command'}); pass "
                        "--model-dir so the rules that need it can run")]
    verdicts = []
    config = _model_config(folder)
    for rule in rules()["command"]:
        applies = (("when_model_has_file" in rule and (folder / rule["when_model_has_file"])
                    .exists()) or ("when_model_config_has" in rule and
                                   rule["when_model_config_has"] in config))
        if not applies:
            continue
        value = flag_value(argv, rule["flag"])
        if "json_key" in rule:
            try:
                ok = value is not None and rule["json_key"] in json.loads(value)
            except ValueError:
                ok = False
        else:
            ok = value == rule["value"]
        shown = f"{rule['flag']} {value}" if value is not None else f"no {rule['flag']}"
        verdicts.append(Verdict(rule["id"], ok, f"{rule['id']}: {shown}" if ok else
                                f"{rule['id']}: {rule['message']}"))
    return verdicts


def _walk(node: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield (*path, str(key)), value
            yield from _walk(value, (*path, str(key)))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _walk(value, (*path, str(index)))


def check_config(document: Any) -> list[Verdict]:
    verdicts = []
    for rule in rules()["config"]:
        for path, value in _walk(document):
            key, where = path[-1], ".".join(path[:-1])
            dotted = ".".join(path)
            if key in rule.get("keys", ()):
                ok = where.endswith(rule["only_under"])
                verdicts.append(Verdict(rule["id"], ok, f"{dotted} = {value!r}" if ok else
                                        f"{dotted} {rule['message']}"))
            elif key == rule.get("key"):
                ok = value == rule["expected"]
                verdicts.append(Verdict(rule["id"], ok, f"{dotted} = {value!r}" if ok else
                                        f"{dotted} = {value!r}: {rule['message']}"))
    return verdicts
