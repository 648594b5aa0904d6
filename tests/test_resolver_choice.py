"""Which uv runs, if any, and with which settings (env/uvbin.py, env/pipconfig.py, resolver).

ascendpatch runs as root on shared hosts: the uv it runs is the one installed with it
(``ascendpatch[fast]``), never one on PATH, and never from a folder a second uid (a real one,
65534, through setpriv) can write. pip's own configuration loader reads real pip.conf files
and PIP_* variables; uv gets them as flags and variables, or pip resolves, saying why.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ascendpatch.env import pipconfig, pipindex, resolver, stackcheck, uvbin
from ascendpatch.env.pipadapter import ONLINE
from ascendpatch.env.target import from_python, from_site_packages
from ascendpatch.errors import InvalidInputError
from tests.kit import seconduid


def test_the_uv_found_is_the_one_installed_with_ascendpatch(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    planted = tmp_path / "bin" / "uv"
    planted.parent.mkdir()
    planted.write_text("#!/bin/sh\ntouch /tmp/planted-uv-ran\n")
    planted.chmod(0o755)
    monkeypatch.setenv("PATH", f"{planted.parent}:{os.environ['PATH']}")
    found = uvbin.find()
    assert found.path is not None, found.why
    assert Path(sys.prefix).resolve() in found.path.parents and found.path != planted
    monkeypatch.setattr(sys, "prefix", str(tmp_path))  # as if ascendpatch lived elsewhere
    elsewhere = uvbin.find()
    assert elsewhere.path is None and "not in ascendpatch's own environment" in elsewhere.why


def test_no_uv_package_means_pip_or_exit_2(monkeypatch: pytest.MonkeyPatch,
                                           tmp_path: Path) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    target = from_site_packages(tmp_path)
    assert resolver.choose(resolver.Mode.AUTO, target).name == "pip"
    with pytest.raises(InvalidInputError, match=r"--resolver uv: uv is not installed with "
                                                r"ascendpatch \(pip install 'ascendpatch\[fast\]'"):
        resolver.choose(resolver.Mode.UV, target)
    assert resolver.choose(resolver.Mode.PIP, target).name == "pip"


def test_a_uv_another_uid_can_replace_is_refused() -> None:
    seconduid.require()
    with seconduid.open_folder() as shared:
        _replaceable(shared)


def _replaceable(shared: Path) -> None:
    (shared / "bin").mkdir(parents=True)
    binary = shared / "bin" / "uv"
    binary.write_bytes(b"#!/bin/sh\n")
    assert uvbin.unsafe(binary) is None
    (shared / "bin").chmod(0o777)  # a folder everyone can write: uid 65534 replaces uv
    replaced = seconduid.run("sh", "-c", f"rm -f {binary} && printf evil > {binary}")
    assert replaced.returncode == 0, replaced.stderr
    binary.unlink()
    binary.write_bytes(b"#!/bin/sh\n")
    assert uvbin.unsafe(binary) == f"{shared / 'bin'} is writable by other users (mode 777)"
    (shared / "bin").chmod(0o1777)  # sticky, like /tmp: 65534 cannot replace root's file
    refused = seconduid.run("sh", "-c", f"rm -f {binary}")
    assert refused.returncode != 0 and binary.exists()
    assert uvbin.unsafe(binary) is None
    os.chown(binary, seconduid.NOBODY, seconduid.NOBODY)
    assert uvbin.unsafe(binary) == f"{binary} is owned by uid 65534, not by this user " \
                                   f"(uid {os.geteuid()}) or root"


def test_pips_own_loader_reads_files_and_environment_in_pips_order(tmp_path: Path) -> None:
    conf = tmp_path / "pip.conf"
    conf.write_text("[global]\nindex-url = https://mirror.example/simple\n"
                    "extra-index-url = https://a.example/simple\n  https://b.example/simple\n"
                    "[install]\nfind-links = /srv/wheels\nconstraint = /srv/c.txt\n"
                    "[download]\nindex-url = https://ignored.example/simple\n")
    # this machine's global /etc/xdg/pip/pip.conf is not read here: XDG_CONFIG_DIRS elsewhere
    env = {"PATH": os.environ["PATH"], "PIP_CONFIG_FILE": str(conf), "HOME": str(tmp_path),
           "XDG_CONFIG_DIRS": str(tmp_path / "none"),
           "PIP_INDEX_URL": "https://user:s3cret@env.example/simple", "PIP_TIMEOUT": "30",
           "PIP_TRUSTED_HOST": "env.example"}
    settings = pipconfig.translate(pipconfig.read(Path(sys.executable), "install", env))
    pairs = set(zip(settings.args[::2], settings.args[1::2], strict=True))
    assert pairs == {("--find-links", "/srv/wheels"), ("--constraint", "/srv/c.txt"),
                     ("--allow-insecure-host", "env.example")}
    expected = {"UV_INDEX_URL": "https://user:s3cret@env.example/simple",
                "UV_EXTRA_INDEX_URL": "https://a.example/simple https://b.example/simple",
                "UV_HTTP_TIMEOUT": "30"}
    assert expected.items() <= settings.env.items()  # (/etc/pip.conf may add a cert)
    assert "s3cret" not in " ".join(settings.args)  # never on a command line `ps` shows


@pytest.mark.parametrize(("pairs", "args", "env"), [
    ([("no-index", "yes"), ("pre", "1")], ("--no-index", "--prerelease", "allow"), {}),
    ([("no-index", "0"), ("pre", "off")], (), {}),
    ([("only-binary", ":all:"), ("no-binary", "foo")],
     ("--only-binary", ":all:", "--no-binary", "foo"), {}),
    ([("cert", "/c.pem"), ("proxy", "http://p:3128")], (),
     {"SSL_CERT_FILE": "/c.pem", "HTTPS_PROXY": "http://p:3128", "HTTP_PROXY": "http://p:3128"}),
    ([("index-url", "https://a/simple"), ("index-url", "https://b/simple")], (),
     {"UV_INDEX_URL": "https://b/simple"}),  # the later one wins, as in pip
    ([("disable-pip-version-check", "1"), ("progress-bar", "off")], (), {}),
])
def test_settings_uv_takes(pairs: list[tuple[str, str]], args: tuple[str, ...],
                           env: dict[str, str]) -> None:
    assert pipconfig.translate(pairs) == pipconfig.UvSettings(args, env)


@pytest.mark.parametrize("name", ["client-cert", "use-feature", "prefer-binary", "user",
                                  "require-hashes", "keyring-provider"])
def test_a_setting_uv_cannot_take_means_pip_saying_which(name: str) -> None:
    with pytest.raises(pipconfig.Untranslatable, match=f"pip's setting '{name}' has no uv"):
        pipconfig.translate([(name, "s3cret-value")])


def test_an_untranslatable_pip_conf_resolves_with_pip(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    conf = tmp_path / "pip.conf"
    conf.write_text("[global]\nclient-cert = /secret/me.pem\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    choice = resolver.choose(resolver.Mode.AUTO, from_site_packages(tmp_path))
    assert choice.name == "pip" and "'client-cert'" in choice.why
    assert "/secret" not in choice.why


def test_a_pip_that_cannot_be_asked_means_pip(tmp_path: Path) -> None:
    fake = tmp_path / "python"
    shutil.copy("/bin/false", fake)
    with pytest.raises(pipconfig.Untranslatable, match="could not be read"):
        pipconfig.read(fake, "install")


def test_a_pip_conf_pip_cannot_parse_never_shows_its_password(tmp_path: Path) -> None:
    """pip's parser quotes the line it cannot read; an index URL's password in it is masked
    (on 1ae4e26 it reached --json's resolver.why and the [WARN] line in clear)."""
    conf = tmp_path / "pip.conf"
    conf.write_text("index-url = https://user:hunter2@mirror.example/simple\n")  # no [section]
    env = {"PATH": os.environ["PATH"], "PIP_CONFIG_FILE": str(conf), "HOME": str(tmp_path),
           "XDG_CONFIG_DIRS": str(tmp_path / "none")}
    with pytest.raises(pipconfig.Untranslatable, match="could not be read") as caught:
        pipconfig.read(Path(sys.executable), "install", env)
    assert "hunter2" not in str(caught.value)


def test_the_pre_flight_cache_key_is_the_pip_settings_the_choice_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pip's configuration is read once per command: the stack pre-flight's cache key used to
    start pip's `download` option parser of its own (pipindex.where: 0.21 s of a 0.47 s
    refused install from a wheelhouse) after the uv choice had read the same settings. The key
    follows the index a pip.conf names, never its credentials."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_DIRS", str(tmp_path / "none"))
    reads: list[object] = []
    real = pipconfig._start

    def counted(*args: Any) -> Any:
        reads.append(args)
        return real(*args)

    monkeypatch.setattr(pipconfig, "_start", counted)
    monkeypatch.setattr(pipindex, "_ask", lambda *a: pytest.fail("a pip run for the key"))
    target = from_python(Path(sys.executable))
    conf = tmp_path / "pip.conf"
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))

    def key(index: str) -> str | None:
        conf.write_text(f"[global]\nindex-url = {index}\n")
        pipconfig._READ_BEFORE.clear()  # a new command (the memo lives as long as one)
        # what resolver.choose reads, whether or not this machine has uv
        pipconfig.read(pipconfig.reader(target), "install", dict(os.environ))
        found = stackcheck._cache_key(target, ["six==1.16.0"], ONLINE)
        assert stackcheck._cache_key(target, ["six==1.16.0"], ONLINE) == found
        return found

    first = key("https://user:t0ken@mirror.example/simple")
    assert first is not None and len(reads) == 1
    assert key("https://user:rotated@mirror.example/simple") == first
    assert key("https://other.example/simple") != first
    assert key("https://evil.example?@mirror.example/simple") != first
    assert len(reads) == 4
    assert pipconfig.identity([("index-url", "https://user:t0ken@mirror.example/simple"),
                               ("extra-index-url", "https://t0ken@a.example/s http://b/s"),
                               ("proxy", "user:hunter2@proxy:3128"),
                               ("progress-bar", "off")]) == [
        ["index-url", "https://mirror.example/simple"],
        ["extra-index-url", "https://a.example/s http://b/s"]]


def test_a_target_without_pip_is_read_with_its_own_site_pip_conf(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`pip --python TARGET` (how ascendpatch installs into a target without pip, as uv makes
    them) runs this tool's pip under TARGET, so TARGET's site pip.conf counts. On b1c2632 the
    settings were read in this tool's interpreter: a mirror named only there was not handed to
    uv, and two such targets shared one pre-flight cache key across different indexes."""
    monkeypatch.delenv("PIP_CONFIG_FILE")  # (the suite's /dev/null: no file would be read)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_DIRS", str(tmp_path / "none"))
    keys = set()
    for name in ("a", "b"):
        venv = tmp_path / name
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
        index = f"https://site-only-{name}.example/simple"
        (venv / "pip.conf").write_text(f"[global]\nindex-url = {index}\n")
        target = from_python(venv / "bin" / "python")
        assert target.get("pip") is None
        reader = pipconfig.reader(target)
        assert reader.python == venv / "bin" / "python" and reader.pip_path
        assert dict(pipconfig.read(reader, "install"))["index-url"] == index
        said = subprocess.run([sys.executable, "-m", "pip", "--python", str(reader.python),
                               "config", "list"], capture_output=True, text=True, check=True)
        assert index in said.stdout  # pip itself reads it so
        keys.add(stackcheck._cache_key(target, ["six==1.16.0"], ONLINE))
    assert len(keys) == 2 and None not in keys


def test_an_answer_that_is_not_the_readers_is_untranslatable(tmp_path: Path) -> None:
    """A target interpreter that prints something else (a .pth), cannot start, or hangs
    means pip resolves and the pre-flight is not cached: never a traceback."""
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho not json\n")
    fake.chmod(0o755)
    with pytest.raises(pipconfig.Untranslatable, match="no answer"):
        pipconfig.read(fake, "install")
    with pytest.raises(pipconfig.Untranslatable, match="missing does not exist"):
        pipconfig.read(tmp_path / "missing", "install")


def _report(python: Path) -> dict[str, Any]:
    from ascendpatch.env import introspection

    return introspection.start(python).make(lambda info: info)


def test_the_parsers_reader_from_a_report_is_the_commands_reader_of_its_target(
        tmp_path: Path) -> None:
    """The parser picks the reader of pip's settings from the cached report (no Target made:
    cliargs._prefetch); the command picks it from the Target. They must agree, or the head
    start is lost: a real venv with pip (its own), one without (this tool's, run by it)."""
    for pip in (True, False):
        venv = tmp_path / f"pip-{pip}"
        subprocess.run([sys.executable, "-m", "venv", str(venv),
                        *([] if pip else ["--without-pip"])], check=True)
        python = venv / "bin" / "python"
        target = from_python(python)
        assert (target.get("pip") is not None) is pip
        assert pipconfig.reader_of_report(python, _report(python)) == pipconfig.reader(target)


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                           lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                           max_leaves=20)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(["distributions", "sys_path", "name"]), json_values)
       | st.fixed_dictionaries({"distributions": st.lists(
           st.fixed_dictionaries({"name": json_values}) | json_values, max_size=4)}))
def test_a_report_of_any_shape_gives_a_reader_or_none(info: dict[str, Any]) -> None:
    """The report is the target interpreter's (its site may print anything): the parser's
    reading of it never raises."""
    found = pipconfig.reader_of_report(Path("/nonexistent/python"), info)
    assert found is None or found.python == Path("/nonexistent/python")
