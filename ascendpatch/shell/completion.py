"""Shell completion generated from the real argparse parser (shtab, an optional dependency).

    python -m ascendpatch.shell.completion bash \
        > ~/.local/share/bash-completion/completions/ascendpatch

install.sh does this when shtab is installed (``pip install 'ascendpatch[completion]'``); the
CLI itself never imports shtab, so start-up stays fast.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

SHELLS = ("bash", "zsh", "tcsh")


def script(shell: str) -> str:
    import shtab

    from ascendpatch.shell.cli import build_parser

    text: str = shtab.complete(build_parser(), shell=shell)
    return text


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1 or args[0] not in SHELLS:
        sys.stderr.write(f"usage: python -m ascendpatch.shell.completion {{{','.join(SHELLS)}}}\n")
        return 2
    try:
        sys.stdout.write(script(args[0]))
    except ImportError:
        from ascendpatch.results import Level
        from ascendpatch.shell.output import plain_line

        sys.stderr.write(plain_line(Level.FAIL, "shell completion needs shtab: pip install "
                                                "'ascendpatch[completion]'") + "\n")
        return 1
    return 0


if __name__ == "__main__":
    from ascendpatch.shell import streams

    raise SystemExit(streams.run(main))
