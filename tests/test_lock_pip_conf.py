"""Issue 27: a lock holds no index option, and no output shows an index's password.

pip-compile writes the index options it was given or found in pip's configuration into its
output, credentials in clear text (pip-tools #1193, #1099); users commit their lock. Here the
index is a PEP 503 folder index on 127.0.0.1 (tests/kit/localindex.py) that answers 401 without
the Basic credential ``user:SECRETTOKEN``, named only in a pip.conf (PIP_CONFIG_FILE) as an
``extra-index-url`` with that credential in its URL, with ``trusted-host`` and ``find-links``
beside it; the machine's global pip.conf, when there is one, is read too, as pip reads it. The
real ``lock`` runs once per resolver (real pip-compile, real uv) on a stack that resolves and
once on one whose dependency no index has, and once more with real pip-compile run as before
this fix (without its --no-emit-* options: a pip-tools that writes the options all the same):
five resolutions for the whole module.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ascendpatch.env import pipadapter
from tests.kit import Run, build_wheel, isolated, run_cli, wheels, write_manifest
from tests.kit.localindex import Recorder, serving_folder, write_pages

pytestmark = pytest.mark.integration

TOKEN = "SECRETTOKEN"
RESOLVERS = ("pip", "uv")
INDEX_OPTIONS = ("--index-url", "-i", "--extra-index-url", "--trusted-host", "--find-links",
                 "-f")
NO_EMIT = ("--no-emit-index-url", "--no-emit-trusted-host", "--no-emit-find-links")


def _index(root: Path) -> Path:
    files = root / "files"
    build_wheel(files, "lockleak-top", "1.0", ["lockleak-dep>=1"])
    build_wheel(files, "lockleak-dep", "1.0")
    build_wheel(files, "lockleak-broken", "1.0", ["lockleak-absent>=1"])  # on no index
    return write_pages(root)


def _pip_conf(path: Path, port: int, links: Path) -> Path:
    path.write_text("[global]\n"
                    f"extra-index-url = http://user:{TOKEN}@127.0.0.1:{port}/simple\n"
                    f"trusted-host = 127.0.0.1:{port}\n"
                    f"find-links = {links}\n")
    return path


def _manifest(path: Path, pin: str) -> Path:
    return write_manifest(path, [], name=path.stem, protected=["torch"],
                          stack={"packages": {pin: "==1.0"}})


def _as_before(compile_: Callable[..., Any]) -> Callable[..., Any]:
    """pip-compile without the options that keep index options out of its output."""
    def run(*args: Any, **kwargs: Any) -> Any:
        given = list(args)
        given[3] = [word for word in given[3] if word not in NO_EMIT]
        return compile_(*given, **kwargs)
    return run


def _lock(python: Path, manifest: Path, out: Path, resolver: str) -> tuple[Run, str]:
    run = run_cli("-v", "--json", "--python", python, "--manifest", manifest, "lock", "-o", out,
                  "--resolver", resolver)
    return run, out.read_text() if out.exists() else ""


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[Run, str]]]:
    """{"pip" / "uv" / "pip-broken" / "uv-broken" / "emitted": (the run, the lock it wrote or
    ""), "seen": (the paths the index was asked for, as a Run's out, "")}."""
    tmp = tmp_path_factory.mktemp("lockleak")
    links = tmp / "links"  # a find-links folder (empty): pip's configuration names it
    links.mkdir()
    good = _manifest(tmp / "good.yaml", "lockleak-top")
    broken = _manifest(tmp / "broken.yaml", "lockleak-broken")
    with isolated(tmp / "home"), pytest.MonkeyPatch.context() as env, \
            serving_folder(_index(tmp / "served")) as port:
        Recorder.auth = base64.b64encode(f"user:{TOKEN}".encode()).decode()
        env.setenv("PIP_CONFIG_FILE", str(_pip_conf(tmp / "pip.conf", port, links)))
        env.setenv("PIP_CACHE_DIR", str(wheels.CACHE / "pip-http"))
        python = wheels.make_venv(tmp / "target")
        done = {}
        for resolver in RESOLVERS:
            done[resolver] = _lock(python, good, tmp / f"{resolver}.lock", resolver)
            done[f"{resolver}-broken"] = _lock(python, broken, tmp / f"{resolver}-broken.lock",
                                               resolver)
        done["seen"] = (Run(0, "\n".join(Recorder.seen), ""), "")
        env.setattr(pipadapter, "pip_compile", _as_before(pipadapter.pip_compile))
        done["emitted"] = _lock(python, good, tmp / "emitted.lock", "pip")
        yield done


@pytest.mark.parametrize("resolver", RESOLVERS)
def test_the_lock_resolves_through_the_pip_conf_index(runs: dict[str, tuple[Run, str]],
                                                      resolver: str) -> None:
    run, lock = runs[resolver]
    assert run.code == 0, run.out + run.err
    assert run.json["resolver"]["name"] == resolver
    assert "lockleak-top==1.0 \\" in lock and "lockleak-dep==1.0 \\" in lock, lock
    assert "/simple/lockleak-dep/" in runs["seen"][0].out  # the credential reached the index


def _options(lock: str) -> list[str]:
    return [line for line in lock.splitlines()
            if line.split() and line.split()[0].split("=")[0] in INDEX_OPTIONS]


@pytest.mark.parametrize("resolver", RESOLVERS)
def test_the_lock_holds_no_index_option(runs: dict[str, tuple[Run, str]],
                                        resolver: str) -> None:
    _run, lock = runs[resolver]
    assert lock and _options(lock) == [], lock


def test_a_lock_the_resolver_wrote_an_index_option_into_is_refused(
        runs: dict[str, tuple[Run, str]]) -> None:
    run, lock = runs["emitted"]
    assert run.code == 1, run.out + run.err
    assert lock == ""
    message = run.json["error"]["message"]
    assert message.startswith("pip-compile wrote --extra-index-url into the lock of manifest "
                              "good (line 1 of its output) although told not to; nothing was "
                              "locked; fix: "), message
    assert "\n" not in message


@pytest.mark.parametrize("resolver", RESOLVERS)
def test_a_failing_resolution_says_why_without_the_token(runs: dict[str, tuple[Run, str]],
                                                         resolver: str) -> None:
    run, lock = runs[f"{resolver}-broken"]
    assert run.code == 1, run.out + run.err
    assert lock == ""
    assert "lockleak-absent" in run.out, run.out
    assert "nothing was locked" in run.out


KEYS = [*RESOLVERS, *(f"{r}-broken" for r in RESOLVERS), "emitted"]


@pytest.mark.parametrize("key", KEYS)
def test_no_lock_holds_the_token(runs: dict[str, tuple[Run, str]], key: str) -> None:
    _run, lock = runs[key]
    assert TOKEN not in lock


@pytest.mark.parametrize("key", KEYS)
def test_no_output_shows_the_token(runs: dict[str, tuple[Run, str]], key: str) -> None:
    run, _lock = runs[key]
    assert TOKEN not in run.out, run.out  # --json
    assert TOKEN not in run.err, run.err  # -v: the commands run and what they printed
