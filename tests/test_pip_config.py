"""Issue 25 item 2: every index access goes through pip, with pip's own configuration.

The index is a PEP 503 folder index on 127.0.0.1 (a real sdist and a real wheel of demo,
built here) named ONLY in the user's pip.conf ($HOME/.config/pip/pip.conf of a fresh HOME;
PIP_INDEX_URL and PIP_CONFIG_FILE unset; the machine's global pip.conf, when there is one, is
read too, as pip reads it). The trap is a second server on 127.0.0.1 set as the proxy for every
other host: what the code before this change contacted (its https://pypi.org/simple fallback)
reaches it, and any request it records fails the test. Real pip throughout: the one this
tool depends on, and pip 24.0 (the oldest it allows: no ``pip index versions --json`` yet),
put first on PYTHONPATH.
"""

from __future__ import annotations

import base64
import http.server
import os
import socket
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from ascendpatch.env import releases
from tests.kit import Run, build_wheel, cachefill, run_cli, wheels, write_small_manifest
from tests.kit.caches import PRISTINE, demo_sdist
from tests.kit.localindex import Recorder, serving, serving_folder, sha256, write_pages

pytestmark = pytest.mark.integration

SECRET = "s3cr3t-pw"  # the password of the index URL in pip.conf: never shown


class Trap(http.server.BaseHTTPRequestHandler):
    """The proxy for every host but 127.0.0.1: records what reaches it and refuses it."""

    seen: ClassVar[list[str]] = []

    def _refuse(self) -> None:
        Trap.seen.append(f"{self.command} {self.path}")
        self.send_response(403)
        self.end_headers()

    do_GET = do_CONNECT = do_HEAD = do_POST = _refuse

    def log_message(self, *args: object) -> None:
        pass


def folder_index(root: Path) -> Path:
    """root/simple/demo/index.html (PEP 503) listing demo 1.0 (an sdist only: no wheel for
    pip download --only-binary to find) and demo 2.0 (a wheel), each with its sha256."""
    files = root / "files"
    files.mkdir(parents=True)
    (files / "demo-1.0.tar.gz").write_bytes(demo_sdist())
    build_wheel(files, "demo", "2.0", files={"demo/__init__.py": "", "demo/mod.py": PRISTINE})
    return write_pages(root)


def user_pip_conf(index_url: str, *extra: str) -> Path:
    """The fresh HOME's user pip.conf naming ``index_url``; no other pip configuration than
    the machine's global one (PIP_CONFIG_FILE, PIP_* and XDG_CONFIG_HOME unset)."""
    conf = Path(os.environ["HOME"]) / ".config" / "pip" / "pip.conf"
    conf.parent.mkdir(parents=True)
    conf.write_text("\n".join(["[global]", f"index-url = {index_url}", *extra]) + "\n")
    return conf


OLDEST_PIP = "24.0"


@pytest.fixture(scope="module")
def oldest_pip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """pip 24.0 unpacked, for PYTHONPATH (its wheel from the index, cached outside the
    checkout)."""
    (wheel,) = cachefill.downloaded(wheels.CACHE / "pip", f"pip-{OLDEST_PIP}-*.whl",
                                    f"pip=={OLDEST_PIP}")
    unpacked = tmp_path_factory.mktemp("pip24")
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(unpacked)
    return unpacked


@pytest.fixture(params=["installed", OLDEST_PIP])
def any_pip(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if request.param == OLDEST_PIP:
        monkeypatch.setenv("PYTHONPATH", str(request.getfixturevalue("oldest_pip")))
        shown = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True,
                               text=True, check=True).stdout
        assert shown.startswith(f"pip {OLDEST_PIP} "), shown


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """(the index's port, a project with m.yaml: demo-fix on demo>=1), the trap armed."""
    for var in ("PIP_CONFIG_FILE", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS",
                "XDG_CONFIG_HOME"):
        monkeypatch.delenv(var, raising=False)
    Trap.seen = []
    with serving_folder(folder_index(tmp_path / "served")) as port, serving(Trap) as trap:
        for var in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"):
            monkeypatch.setenv(var, f"http://127.0.0.1:{trap}")
        for var in ("NO_PROXY", "no_proxy"):
            monkeypatch.setenv(var, "127.0.0.1")
        project = tmp_path / "project"
        project.mkdir()
        write_small_manifest(project)
        yield port, project
    assert Trap.seen == [], f"a request left pip's configured index: {Trap.seen}"


def cli(project: Path, *args: str) -> Run:
    return run_cli("--manifest", project / "m.yaml", *args)


@pytest.mark.usefixtures("any_pip")
def test_catalog_check_lists_the_releases_on_the_index_of_the_user_pip_conf(
        env: tuple[int, Path]) -> None:
    port, project = env
    user_pip_conf(f"http://127.0.0.1:{port}/simple")
    result = cli(project, "catalog-check")
    assert result.code == 0, result.out + result.err
    assert "demo 1.0: applies" in result.out and "demo 2.0: applies" in result.out, result.out
    assert "/simple/demo/" in Recorder.seen


@pytest.mark.usefixtures("any_pip")
def test_port_downloads_an_sdist_only_release_from_the_user_pip_conf_index(
        env: tuple[int, Path]) -> None:
    port, project = env
    user_pip_conf(f"http://127.0.0.1:{port}/simple")
    result = cli(project, "port", "demo-fix", "--to", "1.0")
    assert result.code == 0, result.out + result.err
    assert "[OK] demo/mod.py hunk #1: applies exactly" in result.out, result.out
    assert "/files/demo-1.0.tar.gz" in Recorder.seen
    cached = Path(os.environ["ASCENDPATCH_CACHE"]) / "releases" / "demo-1.0.tar.gz"
    assert cached.read_bytes() == demo_sdist()


def test_the_sdist_download_uses_the_user_pip_conf_index(env: tuple[int, Path],
                                                         tmp_path: Path) -> None:
    port, _project = env
    user_pip_conf(f"http://127.0.0.1:{port}/simple")
    (tmp_path / "out").mkdir()
    path = releases.download_sdist("demo", "1.0", tmp_path / "out")
    assert path is not None and path.read_bytes() == demo_sdist()
    assert releases.download_sdist("demo", "3.0", tmp_path / "out") is None


def test_an_sdist_whose_sha256_differs_from_the_index_is_not_kept(
        env: tuple[int, Path], tmp_path: Path) -> None:
    port, project = env
    page = tmp_path / "served" / "simple" / "demo" / "index.html"
    page.write_text(page.read_text().replace(sha256(tmp_path / "served" / "files" /
                                                     "demo-1.0.tar.gz"), "0" * 64))
    user_pip_conf(f"http://127.0.0.1:{port}/simple")
    result = cli(project, "port", "demo-fix", "--to", "1.0")
    assert result.code == 1, result.out + result.err
    assert result.err.startswith(f"[FAIL] demo-1.0.tar.gz from http://127.0.0.1:{port}/simple: "
                                 f"sha256 differs from the index's; not kept"), result.err
    assert not list((Path(os.environ["ASCENDPATCH_CACHE"]) / "releases").glob("*.tar.gz"))


def test_the_password_of_the_pip_conf_index_is_used_and_never_shown(
        env: tuple[int, Path]) -> None:
    port, project = env
    Recorder.auth = base64.b64encode(f"ci:{SECRET}".encode()).decode()
    user_pip_conf(f"http://ci:{SECRET}@127.0.0.1:{port}/simple")
    good = cli(project, "-v", "port", "demo-fix", "--to", "1.0")
    assert good.code == 0, good.out + good.err  # the credential reached the index
    missing = cli(project, "-v", "port", "demo-fix", "--to", "9.0")
    assert missing.code == 1, missing.out + missing.err
    assert f"no wheel or sdist of demo 9.0 on http://ci:***@127.0.0.1:{port}/simple" \
        in missing.err
    for run in (good, missing):
        assert SECRET not in run.out + run.err


def test_an_unreachable_pip_conf_index_is_one_line_naming_it(env: tuple[int, Path]) -> None:
    _port, project = env
    with socket.socket() as sock:  # a port nothing listens on any more
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]
    user_pip_conf(f"http://ci:{SECRET}@127.0.0.1:{closed}/simple", "retries = 1")
    result = cli(project, "catalog-check")
    assert result.code == 1, result.out + result.err
    assert result.err.startswith(f"[FAIL] cannot list demo on http://ci:***@127.0.0.1:{closed}"
                                 f"/simple: [Errno 111] Connection refused; fix: check the index"
                                 f" in pip's configuration"), result.err
    assert len(result.err.strip().splitlines()) == 1 and SECRET not in result.err


def test_a_project_the_pip_conf_index_does_not_have_is_one_line(env: tuple[int, Path]) -> None:
    port, project = env
    user_pip_conf(f"http://127.0.0.1:{port}/elsewhere")  # every page there is a 404
    result = cli(project, "catalog-check")
    assert result.code == 1, result.out + result.err
    assert result.err.startswith(f"[FAIL] no release of demo on http://127.0.0.1:{port}"
                                 f"/elsewhere; fix: check the index"), result.err
    assert len(result.err.strip().splitlines()) == 1


def test_offline_never_asks_the_pip_conf_index(env: tuple[int, Path]) -> None:
    port, project = env
    user_pip_conf(f"http://127.0.0.1:{port}/simple")
    house = project / "house"
    house.mkdir()
    (house / "demo-1.0.tar.gz").write_bytes(demo_sdist())
    result = cli(project, "catalog-check", "--offline", "--wheelhouse", str(house))
    assert result.code == 0, result.out + result.err
    assert "demo 1.0: applies" in result.out
    ported = cli(project, "port", "demo-fix", "--to", "1.0", "--offline", "--wheelhouse",
                 str(house))
    assert ported.code == 0, ported.out + ported.err
    missing = cli(project, "port", "demo-fix", "--to", "2.0", "--offline", "--wheelhouse",
                  str(house))
    assert missing.code == 1 and "is not in the wheelhouse" in missing.err, missing.err
    assert Recorder.seen == []


def test_a_pip_conf_pip_cannot_read_is_one_line(env: tuple[int, Path]) -> None:
    _port, project = env
    conf = user_pip_conf(f"http://ci:{SECRET}@127.0.0.1:1/simple")
    conf.write_bytes(b"\xff\xfe" + conf.read_bytes())  # not UTF-8
    result = cli(project, "catalog-check")
    assert result.code == 1, result.out + result.err
    assert result.err.startswith("[FAIL] pip cannot read its configuration: Configuration file "
                                 "contains invalid UTF-8"), result.err
    assert len(result.err.strip().splitlines()) == 1 and SECRET not in result.err
