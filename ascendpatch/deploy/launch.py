"""Launch checks: a `vllm serve` command line (with the model folder it actually serves) and
vllm-omni deploy configs, against data rules (ascendpatch/data/launch_rules.yaml) and against
what the installed vllm-ascend really does (read from its code, never imported).

The command line is read by the target's own vLLM parser where the target has vLLM
(env/_serveargs.py, run in the target interpreter: the parser is built and asked, no engine
starts), so a flag vLLM does not know is vLLM's own error, and every rule sees the values vLLM
would see (defaults, underscores, short aliases, JSON arguments parsed). Elsewhere (a sandbox, a
bare site-packages folder) ``flag_value`` reads it as argparse would, and the output says so.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any

import yaml

from ascendpatch.env import inscript
from ascendpatch.kinds.hffile import hub_cache

QUANT_FILE = "quant_model_description.json"  # ModelSlim's description (vllm-ascend)
_HF_REPO = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")


@dataclass(frozen=True)
class Verdict:
    rule: str
    ok: bool
    message: str
    level: str = ""  # OK / FAIL by default from ok; WARN or SKIP when said

    @property
    def shown_level(self) -> str:
        return self.level or ("OK" if self.ok else "FAIL")


@dataclass(frozen=True)
class Served:
    folder: Path | None
    named: str | None  # what the command line names
    how: str  # where the folder came from


@dataclass(frozen=True)
class AscendQuant:
    """Whether the installed vllm-ascend picks up quant_model_description.json by itself."""

    version: str | None  # None: no vllm-ascend found
    detects: bool = False
    evidence: str = ""


PARSE_TIMEOUT = 180.0  # importing vLLM (torch, the API server) takes seconds, more on a busy host


@dataclass(frozen=True)
class Parsed:
    """What the target's own vLLM parser made of a serve command line."""

    version: str
    values: Mapping[str, Any]  # argparse dest -> value
    dests: Mapping[str, str]  # option string -> dest

    def get(self, flag: str) -> Any:
        dest = self.dests.get(flag)
        return None if dest is None else self.values.get(dest)

    @property
    def model(self) -> str | None:
        """What ``vllm serve`` serves: the positional model, else --model (or its default)."""
        value = self.values.get("model_tag") or self.values.get("model")
        return str(value) if value else None


@dataclass(frozen=True)
class CommandLine:
    """A serve command line, with vLLM's reading of it when the target could give one."""

    argv: tuple[str, ...]
    parsed: Parsed | None = None

    def value(self, flag: str) -> Any:
        return self.parsed.get(flag) if self.parsed is not None else flag_value(self.argv, flag)

    def model(self) -> str | None:
        return self.parsed.model if self.parsed is not None else model_path(self.argv)


@dataclass(frozen=True)
class Parsing:
    """The outcome of asking the target's vLLM: its reading (None: ours) and what to say."""

    parsed: Parsed | None
    verdict: Verdict


def serve_arguments(argv: Sequence[str]) -> list[str] | None:
    """The arguments after ``serve`` in ``vllm serve ...``; None for another command line."""
    for index, arg in enumerate(argv[:3]):
        if arg == "serve" and (index == 0 or Path(argv[index - 1]).name == "vllm"):
            return list(argv[index + 1:])
    return None


def _ours(reason: str) -> Parsing:
    return Parsing(None, Verdict("serve-args", True, f"serve-args: {reason}: the command line "
                                 "was read by ascendpatch's own parsing, so a flag vLLM does "
                                 "not know is not caught", level="SKIP"))


def parse_in_target(python: Path | None, argv: Sequence[str], why_not: str = "") -> Parsing:
    """Parse ``argv`` with the vLLM of the target interpreter ``python`` (None: ``why_not``)."""
    args = serve_arguments(argv)
    if args is None:
        return _ours("not a `vllm serve` command line")
    if python is None:
        return _ours(why_not or "no target interpreter")
    try:
        doc = inscript.run_json(python, inscript.bundled("_serveargs.py"), [json.dumps(args)],
                                timeout=PARSE_TIMEOUT)
    except inscript.ScriptError as exc:
        return Parsing(None, Verdict("serve-args", False, f"serve-args: vLLM's parser did not "
                                     f"answer in {inscript.brief(python)} ({exc}); the command "
                                     "line was read "
                                     "by ascendpatch's own parsing", level="WARN"))
    return _answer(python, doc)


def _answer(python: Path, doc: Mapping[str, Any]) -> Parsing:
    version = str(doc.get("version", "?"))
    values, dests = doc.get("values"), doc.get("dests")
    if isinstance(values, dict) and isinstance(dests, dict):
        dests = {str(k): v for k, v in dests.items() if isinstance(v, str)}
        return Parsing(Parsed(version, values, dests), Verdict(
            "serve-args", True, f"serve-args: vLLM {version}'s own parser ({python}) accepts "
                                "the command line; the rules below see its values"))
    if "error" not in doc:
        return _ours(f"{python} has no usable vLLM ({doc.get('missing', 'no answer')})")
    found = doc.get("suggestions")
    suggestions: dict[str, Any] = found if isinstance(found, dict) else {}
    hint = "".join(f"; did you mean {close}?" if len(suggestions) == 1 else
                   f"; {wrong}: did you mean {close}?" for wrong, close in suggestions.items())
    return Parsing(None, Verdict("serve-args", False, f"serve-args: vLLM {version}'s own parser "
                                 f"refuses the command line: {doc['error']}{hint}"))


def rules() -> dict[str, Any]:
    doc = yaml.safe_load(files("ascendpatch").joinpath("data/launch_rules.yaml").read_text())
    assert isinstance(doc, dict)
    return doc


_SHORT = {"--quantization": "-q"}  # vLLM's own short aliases (EngineArgs.add_cli_args)


def _long(arg: str) -> str:
    """A long option as vLLM's FlexibleArgumentParser reads it: underscores in its name are
    dashes (``--mm_processor_kwargs`` is ``--mm-processor-kwargs``)."""
    if not arg.startswith("--"):
        return arg
    name, sep, value = arg.partition("=")
    return name.replace("_", "-") + sep + value


def flag_value(argv: Sequence[str], flag: str) -> str | None:
    """The value argparse would use: ``--flag value``, ``--flag=value``, the underscore
    spelling and vLLM's short alias all count, and the last occurrence wins."""
    short = _SHORT.get(flag)
    found = None
    for index, raw in enumerate(argv):
        arg = _long(raw)
        if arg in (flag, short) and index + 1 < len(argv):
            found = argv[index + 1]
        elif arg.startswith(flag + "="):
            found = arg.split("=", 1)[1]
        elif short is not None and raw.startswith(short) and not raw.startswith("--") and \
                len(raw) > len(short):
            found = raw[len(short):].removeprefix("=")
    return found


def model_path(argv: Sequence[str]) -> str | None:
    explicit = flag_value(argv, "--model")
    if explicit:
        return explicit
    if "serve" in argv:
        rest = argv[argv.index("serve") + 1:]
        if rest and not rest[0].startswith("-"):
            return rest[0]
    return None


def hf_snapshot(repo: str, revision: str | None, env: Mapping[str, str],
                cache: Path | None = None) -> Path | None:
    """The cached snapshot folder huggingface_hub would load ``repo`` from (no download);
    ``cache``: vLLM's --download-dir, which replaces the hub cache."""
    root = (cache or hub_cache(env)) / ("models--" + repo.replace("/", "--"))
    ref = revision or "main"
    commit = ref
    refs = root / "refs" / ref
    if refs.is_file():
        commit = refs.read_text().strip()
    folder = root / "snapshots" / commit
    return folder if folder.is_dir() else None


def served_model(argv: Sequence[str] | CommandLine, model_dir: Path | None,
                 env: Mapping[str, str]) -> Served:
    line = argv if isinstance(argv, CommandLine) else CommandLine(tuple(argv))
    named = line.model()
    if model_dir is not None:
        return Served(model_dir, named, "--model-dir")
    if named is None:
        return Served(None, None, "the command names no model")
    local = Path(named).expanduser()
    if local.is_dir():
        return Served(local.resolve(), named, "the local folder the command names")
    if _HF_REPO.fullmatch(named) and not local.exists():
        download = line.value("--download-dir")
        cache = Path(str(download)).expanduser() if download else None
        revision = line.value("--revision")
        snapshot = hf_snapshot(named, str(revision) if revision else None, env, cache)
        if snapshot is not None:
            return Served(snapshot, named, f"the Hugging Face cache snapshot of {named}")
        return Served(None, named, f"{named} is no local folder and has no snapshot in the "
                                   f"Hugging Face cache ({cache or hub_cache(env)})")
    return Served(None, named, f"{named} is not a folder")


def _calls(tree: ast.AST, name: str) -> bool:
    return any(isinstance(node, ast.Call) and
               getattr(node.func, "id", getattr(node.func, "attr", None)) == name
               for node in ast.walk(tree))


def ascend_quantization(site: Path | None, version: str | None) -> AscendQuant:
    """Read the installed vllm-ascend: does platform.py call maybe_auto_detect_quantization,
    and does that look for quant_model_description.json (vllm-ascend >= 0.18 does)?"""
    if site is None or version is None:
        return AscendQuant(None)
    package = site / "vllm_ascend"
    try:
        platform = ast.parse((package / "platform.py").read_text(encoding="utf-8"))
        utils = (package / "quantization" / "utils.py").read_text(encoding="utf-8")
    except (OSError, SyntaxError, ValueError):
        return AscendQuant(version, False, "vllm_ascend/quantization/utils.py has no "
                                           "detect_quantization_method")
    named = any(QUANT_FILE in p.read_text(encoding="utf-8", errors="replace")
                for p in (package / "quantization").glob("*.py"))
    detects = (_calls(platform, "maybe_auto_detect_quantization") and
               "def detect_quantization_method" in utils and named)
    evidence = ("vllm_ascend/platform.py calls maybe_auto_detect_quantization, and "
                "quantization/utils.py detect_quantization_method looks for "
                f"{QUANT_FILE}" if detects else
                "its platform.py never calls maybe_auto_detect_quantization")
    return AscendQuant(version, detects, evidence)


def _model_config(folder: Path) -> dict[str, Any]:
    try:
        doc = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _quantization(line: CommandLine, folder: Path,
                  installed: Callable[[], AscendQuant]) -> Verdict | None:
    value = line.value("--quantization")
    if not (folder / QUANT_FILE).is_file():
        nested = sorted(p.parent for p in folder.glob(f"*/{QUANT_FILE}"))
        if nested:
            return Verdict("quantization-ascend", False,
                           f"quantization-ascend: {folder} is served, but {QUANT_FILE} is in "
                           f"{nested[0]}: serve that folder, the one with the W8A8 weights "
                           "(the deploy package keeps them in weights/)")
        if value == "ascend":
            return Verdict("quantization-ascend", False,
                           f"quantization-ascend: --quantization ascend, but {folder} holds no "
                           f"{QUANT_FILE}: vllm-ascend has no description to load the "
                           "weights with; serve the folder that holds it")
        return None
    if value == "ascend":
        return Verdict("quantization-ascend", True,
                       f"quantization-ascend: --quantization ascend ({folder} holds "
                       f"{QUANT_FILE})")
    if value is not None:
        return Verdict("quantization-ascend", False,
                       f"quantization-ascend: --quantization {value}, but {folder} holds "
                       f"{QUANT_FILE} (ModelSlim W8A8): use --quantization ascend")
    found = installed()
    if found.version is None:
        return Verdict("quantization-ascend", False,
                       f"quantization-ascend: {folder} holds {QUANT_FILE} and --quantization "
                       "is not given; no installed vllm-ascend was found to tell whether it "
                       "detects the file by itself (pass --python or --site-packages): add "
                       "--quantization ascend, else the weights may load as BF16 and run out "
                       "of NPU memory (twice the size of W8A8)")
    if found.detects:
        return Verdict("quantization-ascend", True,
                       f"quantization-ascend: no --quantization, and none is needed: the "
                       f"installed vllm-ascend {found.version} detects {QUANT_FILE} by itself "
                       f"({found.evidence}); --quantization ascend is still harmless")
    return Verdict("quantization-ascend", False,
                   f"quantization-ascend: {folder} holds {QUANT_FILE} but --quantization "
                   f"ascend is missing, and the installed vllm-ascend {found.version} does not "
                   f"detect the file by itself ({found.evidence}): the weights would load as "
                   "BF16, twice the size of W8A8, and run out of NPU memory")


def check_command(argv: Sequence[str], model_dir: Path | None,
                  installed: Callable[[], AscendQuant] = lambda: AscendQuant(None),
                  env: Mapping[str, str] | None = None,
                  parsed: Parsed | None = None) -> list[Verdict]:
    """The rules on the command line, read by vLLM's parser (``parsed``) or by ours."""
    line = CommandLine(tuple(argv), parsed)
    served = served_model(line, model_dir, env or {})
    folder = served.folder
    if folder is None:
        return [Verdict("model-folder", False,
                        f"cannot find the model folder the command serves ({served.how}); pass "
                        "--model-dir so the rules that need it can run")]
    verdicts = [Verdict("model-folder", True, f"model folder served: {folder} ({served.how})")]
    quant = _quantization(line, folder, installed)
    if quant is not None:
        verdicts.append(quant)
    config = _model_config(folder)
    for rule in rules()["command"]:
        applies = (("when_model_has_file" in rule and (folder / rule["when_model_has_file"])
                    .exists()) or ("when_model_config_has" in rule and
                                   rule["when_model_config_has"] in config))
        if not applies:
            continue
        value = line.value(rule["flag"])
        ok = _has_key(value, rule["json_key"]) if "json_key" in rule else value == rule["value"]
        text = json.dumps(value) if isinstance(value, (dict, list)) else value
        shown = f"{rule['flag']} {text}" if value is not None else f"no {rule['flag']}"
        verdicts.append(Verdict(rule["id"], ok, f"{rule['id']}: {shown}" if ok else
                                f"{rule['id']}: {rule['message']}"))
    if len(verdicts) == 1:
        verdicts.append(Verdict("no-rule", True, f"no launch rule applied to this command: "
                                f"{folder} holds no {QUANT_FILE} and its config.json no "
                                "vision_config; nothing else was checked", level="WARN"))
    return verdicts


def _has_key(value: Any, key: str) -> bool:
    """A JSON argument (vLLM's parser gives a dict, ours the text) that holds ``key``."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return False
    return isinstance(value, dict) and key in value


def _walk(node: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield (*path, str(key)), value
            yield from _walk(value, (*path, str(key)))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _walk(value, (*path, str(index)))


def _mentions(document: Any, name: str, pattern: str) -> bool:
    """Whether the config is one the rule is about: its file name or any string in it."""
    found = re.compile(pattern, re.IGNORECASE)
    if found.search(name):
        return True
    return any(isinstance(value, str) and found.search(value) for _, value in _walk(document))


def check_config(document: Any, name: str = "") -> list[Verdict]:
    verdicts = []
    for rule in rules()["config"]:
        scoped = rule.get("only_for")
        relevant = scoped is None or _mentions(document, name, scoped["pattern"])
        for path, value in _walk(document):
            key, where = path[-1], ".".join(path[:-1])
            dotted = ".".join(path)
            if key in rule.get("keys", ()):
                ok = where.endswith(rule["only_under"])
                verdicts.append(Verdict(rule["id"], ok, f"{dotted} = {value!r}" if ok else
                                        f"{dotted} {rule['message']}"))
            elif key == rule.get("key") and not relevant:
                verdicts.append(Verdict(rule["id"], True, f"{dotted} = {value!r}: the "
                                        f"{rule['id']} rule is for {scoped['name']} only; "
                                        "left as is", level="SKIP"))
            elif key == rule.get("key"):
                ok = value == rule["expected"]
                verdicts.append(Verdict(rule["id"], ok, f"{dotted} = {value!r}" if ok else
                                        f"{dotted} = {value!r}: {rule['message']}"))
    return verdicts
