"""The serving recipes of docs/serving.md, read from the document itself (no copy to drift):
every ascendpatch command they name is parsed by ascendpatch's own parser, the Kubernetes
fragment by PyYAML, the systemd unit by the real ``systemd-analyze verify``."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ascendpatch.shell.cli import build_parser
from tests.kit import REPO

DOC = REPO / "docs" / "serving.md"


def block(language: str) -> str:
    (found,) = re.findall(rf"```{language}\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    return str(found)


def parses(argv: list[str]) -> str:
    """The verb ``ascendpatch ARGV...`` names, parsed as the CLI would (usage errors fail)."""
    assert argv[0].endswith("ascendpatch"), argv
    args = build_parser().parse_args(argv[1:])
    return str(args.command)


def test_the_dockerfile_installs_applies_and_enters_serve_foreground() -> None:
    text = block("dockerfile")
    run = re.search(r"^RUN (.*?)(?<!\\)\n", text, re.S | re.M)
    assert run is not None
    steps = [shlex.split(s) for s in run.group(1).replace("\\\n", " ").split("&&")]
    assert [parses(s) for s in steps if s[0] == "ascendpatch"] == ["install", "apply"]
    entry = re.search(r"^ENTRYPOINT (\[.*\])$", text, re.M)
    cmd = re.search(r"^CMD (\[.*\])$", text, re.M)
    assert entry is not None and cmd is not None
    argv = [*yaml.safe_load(entry.group(1)), *yaml.safe_load(cmd.group(1))]
    assert argv[:4] == ["ascendpatch", "serve", "--foreground", "--"]
    args = build_parser().parse_args(argv[1:])
    assert args.command == "serve" and args.foreground and args.serve[1:3] == ["vllm", "serve"]


def test_the_pod_fragment_probes_readiness_and_stops_by_the_pidfile() -> None:
    doc = yaml.safe_load(block("yaml"))
    (container,) = doc["containers"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/v1/models"
    assert container["startupProbe"]["httpGet"]["port"] == container["ports"][0]["containerPort"]
    command = container["lifecycle"]["preStop"]["exec"]["command"]
    assert parses(command) == "stop"
    args = build_parser().parse_args(command[1:])
    port = container["ports"][0]["containerPort"]
    assert str(args.pidfile) == f"/run/ascendpatch/serve-{port}.pid"  # serve's default there
    assert doc["terminationGracePeriodSeconds"] > args.grace


def _unit(tmp_path: Path) -> Path:
    """The unit with /usr/local/bin/ascendpatch pointed at this venv's launcher (systemd-analyze
    checks that the executables exist)."""
    launcher = Path(sys.executable).with_name("ascendpatch")
    if not launcher.exists():
        pytest.skip(f"no ascendpatch launcher next to {sys.executable}")
    unit = tmp_path / "ascendpatch-serve.service"
    unit.write_text(block("ini").replace("/usr/local/bin/ascendpatch", str(launcher)))
    return unit


def test_the_systemd_unit_names_real_commands() -> None:
    lines = dict(line.split("=", 1) for line in block("ini").splitlines() if "=" in line)
    start, stop = shlex.split(lines["ExecStart"]), shlex.split(lines["ExecStop"])
    assert parses(start) == "serve" and parses(stop) == "stop"
    assert str(build_parser().parse_args(start[1:]).pidfile) == lines["PIDFile"]
    assert str(build_parser().parse_args(stop[1:]).pidfile) == lines["PIDFile"]
    assert lines["Type"] == "forking"


def test_the_systemd_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed")
    run = subprocess.run([analyze, "verify", str(_unit(tmp_path))], capture_output=True,
                         text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "ascendpatch-serve.service" not in run.stderr, run.stderr  # no complaint about it
