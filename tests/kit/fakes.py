"""Typed fakes of the two subprocess seams, so core tests need no interpreter and no pip.

``ascendpatch.env.inscript`` runs every script in the target interpreter (``Running``, and
``run_json`` through it); ``ascendpatch.env.pipadapter`` runs every pip command (one
``subprocess.run`` in ``_run``). A fake takes the seam's place for one test
(``install(monkeypatch)``: ``FakeInscript`` replaces ``Running``, ``FakePip`` only the pip
process), records each call, and answers from canned documents. The canned documents are
real outputs, recorded in ``tests/kit/recorded/`` by ``python -m tests.kit.fakes`` (real venvs
with the stand-in torch / torch_npu modules); the integration tier's reference tests run the
real seam again and check it still answers exactly that, so a fake cannot drift from what it
stands for.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import subprocess
import tempfile
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ascendpatch.env import inscript, pipadapter
from ascendpatch.env.standins import modules_for, torch_npu_body, write_distribution

RECORDED = Path(__file__).with_name("recorded")
LIBHCCL_ERROR = "libhccl.so: cannot open shared object file: No such file or directory"
SITE_MARK = "<SITE>"  # the target's site-packages folder in a recorded document


@dataclass
class ScriptCall:
    """One script started in the (fake) target: what ran, and how long the caller waited."""

    python: Path
    script: str
    args: tuple[str, ...]
    env: dict[str, str] | None
    timeout: float | None = None  # set once ``json`` is called


Answer = dict[str, Any] | inscript.ScriptError | Callable[[ScriptCall], dict[str, Any]]


class FakeRunning:
    """What ``inscript.Running`` returns, without a process: ``json`` gives the canned answer."""

    def __init__(self, call: ScriptCall, answer: Answer) -> None:
        self.python = call.python
        self.call = call
        self._answer = answer

    def json(self, timeout: float = 120.0) -> dict[str, Any]:
        self.call.timeout = timeout
        if isinstance(self._answer, inscript.ScriptError):
            raise self._answer
        doc = self._answer(self.call) if callable(self._answer) else self._answer
        return copy.deepcopy(doc)


@dataclass
class FakeInscript:
    """In place of ``inscript.Running`` (so also of ``run_json``). Answers are looked up by
    the script's exact text; a script nobody answered fails the test loudly."""

    calls: list[ScriptCall] = field(default_factory=list)
    answers: dict[str, Answer] = field(default_factory=dict)
    sites: dict[Path, Path] = field(default_factory=dict)  # fake interpreter -> its site

    def install(self, monkeypatch: pytest.MonkeyPatch) -> FakeInscript:
        monkeypatch.setattr(inscript, "Running", self.running)
        return self

    def answer(self, script: str, answer: Answer) -> None:
        self.answers[script] = answer

    def running(self, python: Path, script: str, args: Sequence[str] = (),
                env: Mapping[str, str] | None = None) -> FakeRunning:
        if not Path(python).exists():  # as Popen fails: the real seam's first refusal
            raise inscript.ScriptError(f"{python} does not exist")
        call = ScriptCall(Path(python), script, tuple(args), dict(env) if env else None)
        self.calls.append(call)
        if script not in self.answers:
            raise AssertionError(f"FakeInscript: no answer for the script {script[:80]!r}")
        return FakeRunning(call, self.answers[script])

    def ran(self, script: str) -> list[ScriptCall]:
        return [call for call in self.calls if call.script == script]

    def target(self, root: Path) -> tuple[Path, Path]:
        """A fake interpreter ``root/bin/python`` (an empty file) whose introspection reports
        ``root/lib/python3.11/site-packages`` (created) and what is installed there. Any other
        interpreter that exists (``/usr/bin/python3`` on discovery's list) reports an empty
        site-packages, as a bare system Python would."""
        python = root / "bin" / "python"
        site = root / "lib" / "python3.11" / "site-packages"
        python.parent.mkdir(parents=True, exist_ok=True)
        python.touch(mode=0o755)
        site.mkdir(parents=True, exist_ok=True)
        (root / "bare-site").mkdir(exist_ok=True)
        self.sites[python] = site
        self.answer(introspection_script(), lambda call: introspection_doc(
            call.python, self.sites.get(call.python, root / "bare-site")))
        return python, site

    def probe(self, site: Path, vllm_ascend: str, body: str) -> None:
        """The operator probe answers as it did for that torch_npu body and vllm-ascend."""
        case = probe_case(vllm_ascend, body)

        def answer(call: ScriptCall) -> dict[str, Any]:
            assert list(call.args) == case["args"], (call.args, case["args"])
            doc: dict[str, Any] = fill_site(case["doc"], site)
            return doc

        self.answer(inscript.bundled("_probe.py"), answer)


def introspection_script() -> str:
    from ascendpatch.env.introspection import script

    return script()


def introspection_doc(python: Path, site: Path) -> dict[str, Any]:
    """The introspection report of a venv at ``python``'s grandparent with ``site`` as its
    site-packages: the recorded real report, its paths and distributions replaced."""
    recorded = json.loads((RECORDED / "introspect.json").read_text())
    prefix = python.parent.parent
    dists = []
    for info in sorted(site.iterdir()):
        if info.is_dir() and info.name.endswith(".dist-info"):
            name, _, version = info.name.removesuffix(".dist-info").rpartition("-")
            dists.append({"name": name, "version": version, "path": str(info)})
    return {**recorded, "executable": str(python), "prefix": str(prefix),
            "site_packages": [str(site)], "sys_path": [*recorded["sys_path"], str(site)],
            "distributions": dists}


def fill_site(doc: Any, site: Path) -> Any:
    if isinstance(doc, dict):
        return {k: fill_site(v, site) for k, v in doc.items()}
    if isinstance(doc, list):
        return [fill_site(v, site) for v in doc]
    return doc.replace(SITE_MARK, str(site)) if isinstance(doc, str) else doc


def probe_key(vllm_ascend: str, body: str) -> str:
    return f"{vllm_ascend}:{hashlib.sha256(body.encode()).hexdigest()[:16]}"


def probe_case(vllm_ascend: str, body: str) -> dict[str, Any]:
    cases = json.loads((RECORDED / "probes.json").read_text())
    key = probe_key(vllm_ascend, body)
    if key not in cases:
        raise AssertionError(f"no recorded probe for vllm-ascend {vllm_ascend} and that "
                             "torch_npu body: add it to PROBE_CASES and run "
                             "python -m tests.kit.fakes")
    case: dict[str, Any] = cases[key]
    return case


# The torch_npu stand-ins the core tests probe (vllm-ascend release, torch_npu body).
PROBE_CASES: list[tuple[str, str]] = [
    ("0.23.0", torch_npu_body()),
    ("0.23.0", torch_npu_body(["npu_dynamic_quant", "npu_quant_matmul"])),
    ("0.23.0", torch_npu_body(import_error=LIBHCCL_ERROR)),
    ("0.18.0", torch_npu_body(import_error="undefined symbol: x")),
    ("0.18.0", torch_npu_body()),
]


def stand_in_stack(site: Path, vllm_ascend: str, body: str) -> None:
    """vllm-ascend metadata and the STAND-IN torch / torch_npu modules, as verify's tests use."""
    write_distribution(site, "vllm-ascend", vllm_ascend, {"vllm_ascend/__init__.py": ""})
    write_distribution(site, "torch", "2.10.0", modules_for("torch", "2.10.0"))
    write_distribution(site, "torch-npu", "2.10.0.post4",
                       modules_for("torch-npu", "2.10.0.post4", body),
                       requires=["torch==2.10.0"])


def real_venv(root: Path) -> tuple[Path, Path]:
    """A real venv (no pip) and its site-packages."""
    from tests.kit.wheels import make_venv, site_packages

    python = make_venv(root)
    return python, site_packages(python)


def record_probe(root: Path, vllm_ascend: str, body: str) -> dict[str, Any]:
    """The real probe of a real venv holding that stand-in stack: the args verify passes
    (from the real ``operators_for``) and the document the real script printed."""
    from ascendpatch.env.target import from_python
    from ascendpatch.inspect.checks import probes

    python, site = real_venv(root)
    stand_in_stack(site, vllm_ascend, body)
    names = sorted({op.name for op in probes.operators_for(from_python(python))})
    args = [json.dumps(names)]
    doc = inscript.run_json(python, inscript.bundled("_probe.py"), args, 120)
    text = json.dumps(doc).replace(json.dumps(str(site))[1:-1], SITE_MARK)
    return {"vllm_ascend": vllm_ascend, "args": args, "doc": json.loads(text)}


def record_introspection(root: Path) -> dict[str, Any]:
    """A real venv's report, less what ``introspection_doc`` fills in per test."""
    python, site = real_venv(root)
    doc = inscript.run_json(python, introspection_script(), (), 120)
    doc["sys_path"] = [p for p in doc["sys_path"] if p != str(site)]
    for key in ("executable", "prefix", "site_packages", "distributions"):
        doc.pop(key)
    return doc


@dataclass
class PipCall:
    cmd: list[str]
    env: dict[str, str] | None


@dataclass
class FakePip:
    """In place of the pip *process*: ``pipadapter``'s own ``subprocess`` name is pointed at
    this fake, so everything pipadapter does around pip (the ``-v`` command line and output,
    the spinner, ``explain``) still runs. Records every command line and answers with a canned
    ``CompletedProcess``; ``--report FILE`` gets ``report`` written to FILE, as pip does."""

    calls: list[PipCall] = field(default_factory=list)
    returncode: int = 0
    stdout: str = ""
    stderr: str = ""
    report: dict[str, Any] | None = None

    def install(self, monkeypatch: pytest.MonkeyPatch) -> FakePip:
        shim = types.SimpleNamespace(run=self.run, DEVNULL=subprocess.DEVNULL,
                                     CompletedProcess=subprocess.CompletedProcess)
        monkeypatch.setattr(pipadapter, "subprocess", shim)
        return self

    def run(self, cmd: Sequence[str], *, env: Mapping[str, str] | None = None,
            **_: object) -> subprocess.CompletedProcess[str]:
        self.calls.append(PipCall(list(cmd), dict(env) if env is not None else None))
        if "--report" in cmd and self.report is not None:
            Path(cmd[list(cmd).index("--report") + 1]).write_text(json.dumps(self.report))
        return subprocess.CompletedProcess(list(cmd), self.returncode, self.stdout, self.stderr)

    def verbs(self) -> list[str]:
        return [next((w for w in c.cmd if w in ("install", "download", "wheel")), "")
                for c in self.calls]


# ``pip --version`` as it answered on the recording machine (the shape -v shows).
PIP_VERSION_OUTPUT = (RECORDED / "pip-version.txt").read_text() if \
    (RECORDED / "pip-version.txt").exists() else ""


def recorded_pip_report() -> dict[str, Any]:
    """pip's real ``install --dry-run --report`` of one small wheel (recorded)."""
    report: dict[str, Any] = json.loads((RECORDED / "pip-report.json").read_text())
    return report


def record_pip_report(root: Path) -> dict[str, Any]:
    """The real seam: pipadapter.dry_run_report of a real venv (no pip of its own, so this
    tool's pip with --python) against a wheelhouse of one tiny wheel."""
    from ascendpatch.env.target import from_python
    from tests.kit import build_wheel

    house = root / "house"
    build_wheel(house, "tiny-dep", "1.0")
    python, _ = real_venv(root / "venv")
    doc = pipadapter.dry_run_report(from_python(python), ["tiny-dep==1.0"],
                                    pipadapter.Source(house, offline=True))
    for item in doc["install"]:  # where and when the wheel was built: not what tests read
        info = item["download_info"]
        info["url"] = "file://<HOUSE>/" + info["url"].rsplit("/", 1)[1]
        info["archive_info"] = {"hash": "sha256=<SHA256>", "hashes": {"sha256": "<SHA256>"}}
    doc.pop("environment", None)  # the recording machine's markers: not what tests read
    return doc


def record_all() -> None:
    """Rewrite tests/kit/recorded/ from real runs (after a change to a bundled script)."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        os.environ["ASCENDPATCH_CACHE"] = str(root / "cache")  # the introspection cache
        RECORDED.mkdir(exist_ok=True)
        (RECORDED / "introspect.json").write_text(
            json.dumps(record_introspection(root / "intro"), indent=1, sort_keys=True) + "\n")
        cases = {probe_key(v, b): record_probe(root / f"probe{i}", v, b)
                 for i, (v, b) in enumerate(PROBE_CASES)}
        (RECORDED / "probes.json").write_text(json.dumps(cases, indent=1, sort_keys=True) + "\n")
        (RECORDED / "pip-report.json").write_text(
            json.dumps(record_pip_report(root / "pip"), indent=1, sort_keys=True) + "\n")
        version = pipadapter.run_pip(["--version"])
        (RECORDED / "pip-version.txt").write_text(version.stdout)


if __name__ == "__main__":
    record_all()
