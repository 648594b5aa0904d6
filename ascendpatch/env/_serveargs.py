# Runs INSIDE the target interpreter (Python 3.8+), stdlib only at module level. Parses a
# `vllm serve` command line with the target's own vLLM parser, built the way vLLM's CLI builds
# it (vllm/entrypoints/cli/main.py: a FlexibleArgumentParser, its subparsers, then
# ServeSubcommand.subparser_init, which calls make_arg_parser), then runs ServeSubcommand's
# validate as `vllm serve` does before it starts anything. No engine is started: the parser is
# built and asked, nothing is dispatched. Prints one JSON doc: {"version", "values": {dest:
# value}, "dests": {option: dest}}, or {"version", "error", "suggestions": {option: close
# option}} when vLLM refuses the line, or {"missing": reason} when the target has no vLLM.
# argv[1]: JSON list of the arguments after `serve`.
import difflib
import json
import sys
from typing import Any, Dict, List, Tuple  # noqa: F401  (in type comments)


class _Refused(Exception):
    pass


def _refuse(message):
    # type: (str) -> None
    raise _Refused(message)


def _jsonable(value):
    # type: (object) -> object
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple, set)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return str(value)  # an enum or a config object: as vLLM prints it


def _suggestions(message, options):
    # type: (str, List[str]) -> Dict[str, str]
    """A did-you-mean for each unrecognized option (vLLM's argparse on Python < 3.14 has none)."""
    found = {}
    _, marker, rest = message.partition("unrecognized arguments:")
    for word in rest.split() if marker else []:
        name = word.split("=", 1)[0]
        if name.startswith("--"):
            close = difflib.get_close_matches(name.replace("_", "-"), options, n=1, cutoff=0.8)
            if close:
                found[name] = close[0]
    return found


def _parser():
    # type: () -> Tuple[Any, Any, Any]
    from vllm.entrypoints.cli.serve import ServeSubcommand
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser(prog="vllm", description="vLLM CLI")
    subparsers = parser.add_subparsers(required=False, dest="subparser")
    command = ServeSubcommand()
    serve = command.subparser_init(subparsers)
    for each in (parser, serve):
        each.error = _refuse  # argparse would print usage and exit 2
    return parser, serve, command


def main():
    # type: () -> None
    args = json.loads(sys.argv[1])
    try:
        from importlib.metadata import version

        found = version("vllm")
        parser, serve, command = _parser()
    except ImportError as exc:
        print(json.dumps({"missing": "%s: %s" % (type(exc).__name__, exc)}))
        return
    except Exception as exc:  # importlib.metadata's PackageNotFoundError, a broken vLLM
        print(json.dumps({"missing": "%s: %s" % (type(exc).__name__, exc)}))
        return
    options = sorted(o for o in serve._option_string_actions if o.startswith("--"))
    try:
        namespace = parser.parse_args(["serve", *args])
        command.validate(namespace)
    except _Refused as exc:
        print(json.dumps({"version": found, "error": str(exc),
                          "suggestions": _suggestions(str(exc), options)}))
        return
    except SystemExit as exc:  # --help, --version: argparse exits by itself
        print(json.dumps({"version": found, "error": "the parser exited (%s): a --help or "
                          "--version flag does not serve" % exc.code, "suggestions": {}}))
        return
    except Exception as exc:  # vLLM's own checks raise ValueError / TypeError
        print(json.dumps({"version": found, "error": "%s: %s" % (type(exc).__name__, exc),
                          "suggestions": {}}))
        return
    values = {k: _jsonable(v) for k, v in vars(namespace).items() if not callable(v)}
    dests = {o: a.dest for o, a in serve._option_string_actions.items()}
    print(json.dumps({"version": found, "values": values, "dests": dests}))


if __name__ == "__main__":
    main()
