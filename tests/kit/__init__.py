"""Test kit: build target environments in temp dirs (never the real site-packages).

``make_dist`` writes an installed distribution exactly as pip lays one out: package files,
``<name>-<version>.dist-info`` with METADATA, INSTALLER and a RECORD whose sha256 entries are
real (url-safe base64), so RECORD-aware code is exercised on the genuine format.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.server
import io
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest

from ascendpatch.env.standins import write_distribution
from ascendpatch.hashing import record_text
from ascendpatch.shell.cli import main

REPO = Path(__file__).resolve().parents[2]
# What Python prints above an uncaught exception: a test that no traceback escaped looks for
# this, not for the word alone, which a generated input (a manifest key) may well be.
TRACEBACK = "Traceback (most recent call last)"


def isolate(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    """Point HOME, logs and caches at ``home`` and drop the machine's pip configuration.

    conftest applies it to every test; a fixture built once per module applies it itself
    (module fixtures run before the per-test one), so nothing ever writes to the real home.
    """
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    monkeypatch.setenv("ASCENDPATCH_LOG_DIR", str(home / "logs"))
    monkeypatch.setenv("ASCENDPATCH_CACHE", str(home / ".cache" / "ascendpatch"))
    for var in ("ASCENDPATCH_PYTHON", "ASCENDPATCH_MANIFEST", "ASCENDPATCH_CRASH_AT",
                "ASCENDPATCH_DATA_DIR", "XDG_CONFIG_HOME"):
        monkeypatch.delenv(var, raising=False)
    # The machine's pip configuration (extra indexes, find-links, a global constraints file)
    # must not leak into tests that run real pip: each test says where packages come from.
    for var in [v for v in os.environ if v.startswith("PIP_")]:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    # pip's settings are read once per process (env/pipconfig): a test is a command of its own,
    # and may rewrite the same pip.conf as the one before it
    from ascendpatch.env import pipconfig

    pipconfig._READ_BEFORE.clear()
    # A slow step off a terminal says it is alive every 10 s (progress.Heartbeat); on a loaded
    # machine that would add lines to outputs tests compare, so only tests/test_heartbeat.py
    # turns it on.
    monkeypatch.setenv("ASCENDPATCH_HEARTBEAT", "0")


@contextlib.contextmanager
def isolated(home: Path) -> Iterator[None]:
    """``isolate`` for the duration of a ``with`` block (for module-scoped fixtures)."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        isolate(monkeypatch, home)
        yield


def make_dist(site: Path, name: str, version: str, files: Mapping[str, str | bytes],
              requires: Sequence[str] = ()) -> Path:
    """Install a fake distribution into ``site`` as pip lays one out; returns its dist-info."""
    site.mkdir(parents=True, exist_ok=True)
    # (package folders may already exist: a test can plant a symlink first)
    return write_distribution(site, name, version, files, requires, summary="test fixture",
                              installer="pip")


def tree_digest(root: Path) -> dict[str, str]:
    """sha256 of every file under root (symlinks by target), for "changed zero bytes" checks."""
    digests: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            digests[rel] = "link:" + str(path.readlink())
        elif path.is_file():
            digests[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return digests


def write_manifest(path: Path, artifacts: list[dict[str, object]], **extra: object) -> Path:
    import yaml

    doc = {"name": extra.pop("name", "test"), **extra, "artifacts": artifacts}
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


@dataclass(frozen=True)
class Run:
    code: int
    out: str
    err: str

    @property
    def json(self) -> dict[str, Any]:
        doc = json.loads(self.out)
        assert isinstance(doc, dict)
        return doc


def unmount(where: Path) -> None:
    """Unmount a file system a test mounted (lazily when something still holds it)."""
    subprocess.run(["umount", str(where)], check=False)
    if os.path.ismount(where):
        subprocess.run(["umount", "-l", str(where)], check=False)


def past_racy_window(path: Path) -> None:
    """Wait until what a test just wrote under ``path`` is older than the stat cache's racy
    window (ascendpatch/stamps.racy), as files installed minutes before an audit are: a
    repeat audit then trusts their stat instead of hashing them again."""
    from ascendpatch import stamps

    st = path.stat()
    coarse = not (st.st_mtime_ns % stamps.SECOND_NS and st.st_ctime_ns % stamps.SECOND_NS)
    time.sleep((stamps.COARSE_RACY_NS if coarse else stamps.FINE_RACY_NS) / 1e9)


def run_cli(*args: str | Path) -> Run:
    """Run the real CLI entry point in-process, capturing stdout and stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([str(a) for a in args])
        except SystemExit as exc:  # argparse usage errors
            code = int(exc.code or 0)
    return Run(code, out.getvalue(), err.getvalue())


def run_process(*args: str | Path, env: Mapping[str, str] | None = None,
                timeout: float = 120) -> Run:
    """Run ``python -m ascendpatch`` as a real separate process."""
    full_env = {**os.environ, **(env or {})}
    proc = subprocess.run([sys.executable, "-m", "ascendpatch", *map(str, args)],
                          capture_output=True, text=True, env=full_env, timeout=timeout,
                          check=False, stdin=subprocess.DEVNULL)
    return Run(proc.returncode, proc.stdout, proc.stderr)


def pytest_command(basetemp: Path, *args: str) -> list[str]:
    """The command of a pytest run inside a test, its temp folders all under ``basetemp``.

    Without ``--basetemp`` a pytest run makes a numbered folder in the machine's
    ``/tmp/pytest-of-<user>`` and, as it exits, deletes every older one no live run locks there:
    other runs' folders, a developer's, a finished CI step's (gigabytes of venvs, which kept
    one such run past its 120 s timeout on a loaded CI machine).
    """
    return [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--basetemp",
            str(basetemp), *args]


def ctrl_c_as_a_terminal_gives_it() -> None:
    """preexec_fn for a child the test will ^C: SIGINT back to its default disposition.
    A job started in the background by a non-interactive shell (as CI runners and `cmd &` do)
    inherits SIGINT *ignored*, and Python then installs no KeyboardInterrupt handler at all."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


# The same, for a ``python -c`` script that sends itself SIGINT.
CTRL_C_PRELUDE = "import signal as _s; _s.signal(_s.SIGINT, _s.default_int_handler)\n"


@contextlib.contextmanager
def chdir(path: Path) -> Iterator[None]:
    old = Path.cwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


def build_wheel(folder: Path, name: str, version: str, requires: Sequence[str] = (),
                files: Mapping[str, str] | None = None) -> Path:
    """A real (tiny, pure-Python) wheel that pip installs: METADATA, WHEEL, RECORD."""
    import zipfile

    norm = name.replace("-", "_")
    dist_info = f"{norm}-{version}.dist-info"
    meta = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}",
            "Summary: test wheel built by the ascendpatch tests",
            *(f"Requires-Dist: {r}" for r in requires)]
    contents = {rel: text.encode() for rel, text in (files or
                                                     {f"{norm}/__init__.py": ""}).items()}
    contents[f"{dist_info}/METADATA"] = ("\n".join(meta) + "\n").encode()
    contents[f"{dist_info}/WHEEL"] = (b"Wheel-Version: 1.0\nGenerator: ascendpatch-tests\n"
                                      b"Root-Is-Purelib: true\nTag: py3-none-any\n")
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / f"{norm}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for rel, data in contents.items():
            archive.writestr(rel, data)
        archive.writestr(f"{dist_info}/RECORD", record_text(contents, f"{dist_info}/RECORD"))
    return wheel


# The demo distribution most target tests patch: two modules and one patch that changes both
# (so a crash or a reader can fall between the two files).
DEMO_MOD = "".join(f"value_{i} = {i}\n" for i in range(1, 21))
DEMO_OTHER = "".join(f"other_{i} = {i}\n" for i in range(1, 11))
DEMO_PATCH = """\
--- a/demo/mod.py
+++ b/demo/mod.py
@@ -4,3 +4,4 @@
 value_4 = 4
 value_5 = 5
+value_5b = 55
 value_6 = 6
--- a/demo/other.py
+++ b/demo/other.py
@@ -2,3 +2,3 @@
 other_2 = 2
-other_3 = 3
+other_3 = 33
 other_4 = 4
"""


class IndexRecorder(http.server.BaseHTTPRequestHandler):
    """A package index on 127.0.0.1 that answers 404 and records every path asked for."""

    requests: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        IndexRecorder.requests.append(self.path)
        self.send_response(404)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def fake_cann(tmp_path: Path) -> dict[str, str]:
    """A sourced CANN/ATB environment (simulated: folders holding empty libhccl.so / libatb.so)."""
    toolkit = tmp_path / "Ascend/ascend-toolkit/latest"
    atb = tmp_path / "Ascend/nnal/atb/latest/atb/cxx_abi_1"
    for lib_dir, lib in ((toolkit / "lib64", "libhccl.so"), (atb / "lib", "libatb.so")):
        lib_dir.mkdir(parents=True)
        (lib_dir / lib).write_bytes(b"")
    (toolkit / "ascend_toolkit_install.info").write_text("package_name=Ascend-cann\n"
                                                          "version=9.0.0\n")
    return {"ASCEND_TOOLKIT_HOME": str(toolkit), "ASCEND_HOME_PATH": str(toolkit),
            "ATB_HOME_PATH": str(atb),
            "LD_LIBRARY_PATH": f"{toolkit / 'lib64'}:{atb / 'lib'}"}


def make_demo_target(site: Path, folder: Path, mod: str = DEMO_MOD,
                     other: str = DEMO_OTHER) -> Path:
    """The demo distribution in ``site`` and, in ``folder``, ``fix.patch`` (DEMO_PATCH) and the
    manifest ``m.yaml`` naming it as the diff fix ``demo-fix``; returns the manifest's path."""
    make_dist(site, "demo", "1.2.0", {"demo/__init__.py": "", "demo/mod.py": mod,
                                      "demo/other.py": other})
    (folder / "fix.patch").write_text(DEMO_PATCH)
    return write_manifest(folder / "m.yaml", [{
        "id": "demo-fix", "title": "demo fix", "kind": "diff", "distribution": "demo",
        "versions": ">=1.0", "source": "fix.patch"}])


# The smallest patched target (the audit and fleet tests): demo/mod.py, and one patch that adds
# the line ``a2 = 2`` to it.
SMALL_PATCH = """\
--- a/demo/mod.py
+++ b/demo/mod.py
@@ -1,2 +1,3 @@
 a = 1
+a2 = 2
 b = 3
"""


def make_small_demo(site: Path, version: str = "1.0") -> None:
    """The demo distribution SMALL_PATCH applies to."""
    make_dist(site, "demo", version, {"demo/__init__.py": "", "demo/mod.py": "a = 1\nb = 3\n"})


def write_small_manifest(folder: Path) -> Path:
    """``folder``/m.yaml, whose one artifact (demo-fix) is SMALL_PATCH on demo>=1."""
    (folder / "fix.patch").write_text(SMALL_PATCH)
    return write_manifest(folder / "m.yaml", [{
        "id": "demo-fix", "title": "demo fix", "kind": "diff", "distribution": "demo",
        "versions": ">=1", "source": "fix.patch"}])
