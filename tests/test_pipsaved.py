"""pip's settings are kept between runs (env/pipsaved.py) and taken only while nothing they
were read from has changed: pip's own list of its configuration files, the environment, the
working folder, the interpreter, pip itself. Every read here is real pip's, in a real
interpreter; a kept answer is proven used by a read that cannot start any interpreter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ascendpatch.env import inscript, pipconfig, pipsaved
from tests.kit import past_racy_window

READER = pipconfig.Reader(Path(sys.executable))  # (its own pip)


@pytest.fixture
def conf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The global pip.conf (``$XDG_CONFIG_DIRS/pip/pip.conf``), with HOME and the XDG folders
    of the test's own, old enough (the racy window) for its stat to prove it unchanged."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_DIRS", str(tmp_path / "xdg"))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    for name in [n for n in os.environ if n.startswith("PIP_")]:
        monkeypatch.delenv(name)
    path = tmp_path / "xdg" / "pip" / "pip.conf"
    path.parent.mkdir(parents=True)
    path.write_text("[global]\nindex-url = https://mirror.example/simple\n")
    monkeypatch.chdir(tmp_path)
    past_racy_window(path)
    return path


def _read() -> list[tuple[str, str]]:
    """A new command's read (the in-process memo lives as long as one command)."""
    pipconfig._READ_BEFORE.clear()
    return pipconfig.read(READER, "install")


@pytest.fixture
def starts(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every interpreter a read starts."""
    started: list[object] = []
    real = inscript.Running.__init__

    def counted(self: inscript.Running, *args: Any, **kwargs: Any) -> None:
        started.append(args)
        real(self, *args, **kwargs)

    monkeypatch.setattr(inscript.Running, "__init__", counted)
    return started


def _kept_file() -> Path:
    return pipsaved.cache_path(READER.python, READER.pip_path, "install")


def test_a_later_command_takes_the_kept_settings_without_starting_pip(
        conf: Path, starts: list[object]) -> None:
    first = _read()
    assert ("index-url", "https://mirror.example/simple") in first and len(starts) == 1
    assert _kept_file().stat().st_mode & 0o777 == 0o600
    assert _read() == first and len(starts) == 1
    pipconfig.prefetch(READER, "install")  # the parser's head start takes it too
    assert pipconfig._started == {} and len(starts) == 1


def _edit(conf: Path) -> None:
    conf.write_text("[global]\nindex-url = https://other.example/simple\n")


def _user_conf(conf: Path) -> None:
    user = Path(os.environ["HOME"]) / ".config" / "pip" / "pip.conf"
    user.parent.mkdir(parents=True)
    user.write_text("[install]\nfind-links = /opt/more\n")


def _env(conf: Path) -> None:
    os.environ["ASCENDPATCH_TEST_UNRELATED"] = "1"  # (restored by monkeypatch's delenv below)


def _cwd(conf: Path) -> None:
    os.chdir(conf.parent)


def _gone(conf: Path) -> None:
    conf.unlink()


@pytest.mark.parametrize("change", [_edit, _user_conf, _env, _cwd, _gone])
def test_any_change_to_what_they_were_read_from_reads_pip_again(
        conf: Path, starts: list[object], monkeypatch: pytest.MonkeyPatch,
        change: Callable[[Path], None]) -> None:
    monkeypatch.delenv("ASCENDPATCH_TEST_UNRELATED", raising=False)
    before = _read()
    assert _read() == before and len(starts) == 1
    change(conf)
    after = _read()
    assert len(starts) == 2
    assert list(after) == list(_pips_own_answer())


def _pips_own_answer() -> pipconfig.Settings:
    return pipconfig._answer(pipconfig._running(READER, "install", None).running).settings


def test_a_relative_pip_config_file_is_read_again_from_another_folder(
        conf: Path, starts: list[object], monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    for folder, index in (("a", "https://a.example/simple"), ("b", "https://b.example/s")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "pip.conf").write_text(f"[global]\nindex-url = {index}\n")
        past_racy_window(tmp_path / folder / "pip.conf")
    monkeypatch.setenv("PIP_CONFIG_FILE", "pip.conf")
    for folder, index in (("a", "https://a.example/simple"), ("b", "https://b.example/s")) * 2:
        monkeypatch.chdir(tmp_path / folder)
        assert dict(_read())["index-url"] == index
    assert len(starts) == 4  # (one kept file per reader: each folder overwrites the other's)


def test_a_file_changed_within_the_racy_window_is_never_kept(
        conf: Path, starts: list[object]) -> None:
    _edit(conf)  # (just now: a same-size rewrite in the same tick would keep its stat)
    _read()
    assert not _kept_file().exists()
    _read()
    assert len(starts) == 2


def test_a_secret_from_the_environment_is_kept_as_its_variables_name_only(
        conf: Path, starts: list[object], monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "https://ci:s3cr3t-t0ken@private.example/simple"
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", secret)
    first = _read()
    assert ("extra-index-url", secret) in first
    kept = _kept_file().read_bytes()
    assert b"s3cr3t" not in kept and b"PIP_EXTRA_INDEX_URL" in kept
    assert _read() == first and len(starts) == 1  # the value comes from the variable again


def test_a_configuration_that_is_not_a_regular_file_is_never_kept(
        conf: Path, starts: list[object], monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    folder = tmp_path / "a-folder"
    folder.mkdir()
    monkeypatch.setenv("PIP_CONFIG_FILE", str(folder))  # pip skips what it cannot read
    past_racy_window(folder)
    _read()
    _read()
    assert len(starts) == 2 and not _kept_file().exists()


def test_an_environment_changed_under_the_reader_is_never_kept(
        conf: Path, starts: list[object], tmp_path: Path) -> None:
    """A .pth (or sitecustomize) that sets a variable in the target from something no
    fingerprint covers (here HOME, from a file): what pip read came from an environment this
    process cannot see, so the answer is read again each time, and follows that file."""
    root = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    pointer = tmp_path / "home-of-the-day"
    for user, index in (("u1", "https://one.example/s"), ("u2", "https://two.example/s")):
        (tmp_path / user / ".pip").mkdir(parents=True)
        (tmp_path / user / ".pip" / "pip.conf").write_text(f"[global]\nindex-url = {index}\n")
    pointer.write_text(str(tmp_path / "u1"))
    site = next((root / "lib").glob("python3*/site-packages"))
    (site / "sets.pth").write_text(
        f"import os; os.environ['HOME'] = open({str(pointer)!r}).read()\n")
    past_racy_window(site / "sets.pth")
    who = pipconfig._reader(root / "bin" / "python", has_pip=False)
    for user, index in (("u1", "https://one.example/s"), ("u2", "https://two.example/s")):
        pointer.write_text(str(tmp_path / user))
        pipconfig._READ_BEFORE.clear()
        assert dict(pipconfig.read(who, "install"))["index-url"] == index
    assert len(starts) == 2
    assert not pipsaved.cache_path(who.python, who.pip_path, "install").exists()


def test_a_target_without_pip_is_kept_by_its_site_conf_and_this_tools_pip(
        conf: Path, starts: list[object], tmp_path: Path) -> None:
    root = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    (root / "pip.conf").write_text("[install]\npre = true\n")
    past_racy_window(root / "pip.conf")
    who = pipconfig._reader(root / "bin" / "python", has_pip=False)
    for _ in range(2):
        pipconfig._READ_BEFORE.clear()
        assert ("pre", "true") in pipconfig.read(who, "install")
    assert len(starts) == 1
    (root / "pip.conf").write_text("[install]\npre = false\n")
    pipconfig._READ_BEFORE.clear()
    assert ("pre", "false") in pipconfig.read(who, "install") and len(starts) == 2


_ANY_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                         lambda inner: st.lists(inner, max_size=4)
                         | st.dictionaries(st.text(max_size=12), inner, max_size=4),
                         max_leaves=20)
_PATHS = st.lists(st.text(max_size=6))


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=_ANY_JSON | st.fixed_dictionaries(
    {"fingerprint": st.just({}), "settings": st.lists(st.lists(st.text(max_size=5))),
     "where": st.fixed_dictionaries({"config_files": _PATHS, "modules": _PATHS,
                                     "sys_path": _PATHS,
                                     "user_site": st.none() | st.text(max_size=5)})},
    optional={"from_env": st.lists(st.lists(st.text(max_size=5)))}))
def test_a_kept_file_of_any_shape_is_taken_for_nothing(
        conf: Path, starts: list[object], doc: object) -> None:
    """A kept file another version wrote, cut short, or of any shape: no answer, no crash; the
    read asks pip."""
    _kept_file().parent.mkdir(parents=True, exist_ok=True)
    _kept_file().write_text(json.dumps(doc))
    assert pipsaved.load(READER.python, READER.pip_path, "install", pipconfig._READ,
                         None) is None


@settings(max_examples=200, deadline=None)
@given(doc=st.dictionaries(st.sampled_from(["from_env", "config_files", "seen", "opened",
                                            "modules", "sys_path", "user_site", "env", "x"]),
                           _ANY_JSON, max_size=8), count=st.integers(0, 5))
def test_a_readers_account_of_any_shape_is_one_or_none(doc: dict[str, object],
                                                       count: int) -> None:
    """What a reader says its answer came from is the target's to print (a .pth can): any
    shape gives a Provenance whose every part is typed, or None (nothing kept)."""
    told = pipsaved.provenance(doc, count)
    assert told is None or (0 <= told.from_env <= count and len(told.seen) ==
                            len(told.where.config_files) and isinstance(told.env, str))


@pytest.mark.parametrize("raw", [b"[" * 100_000, b"\xff\xfe", b"", b"{" + b" " * 100])
def test_a_broken_kept_file_is_taken_for_nothing(conf: Path, starts: list[object],
                                                 raw: bytes) -> None:
    first = _read()
    _kept_file().write_bytes(raw)
    assert _read() == first and len(starts) == 2


@pytest.mark.parametrize("value", ["https://ci:s3cr3t-t0ken@private.example/simple",
                                   "https://private.example/simple?token=s3cr3t-t0ken",
                                   "https://private.example/simple TOKEN=s3cr3t-t0ken"])
def test_a_credential_from_a_file_is_never_kept(conf: Path, starts: list[object],
                                                value: str) -> None:
    """A pip.conf on a secret mount (a build secret, a Kubernetes secret) must not leave its
    password in a cache that outlives the mount."""
    conf.write_text(f"[global]\nindex-url = {value}\n")
    past_racy_window(conf)
    assert dict(_read())["index-url"] == value
    assert not _kept_file().exists()
    cache = Path(os.environ["ASCENDPATCH_CACHE"])
    assert not any(b"s3cr3t" in p.read_bytes() for p in cache.rglob("*") if p.is_file())
    _read()
    assert len(starts) == 2


def test_a_proxy_with_a_password_in_a_file_is_never_kept(conf: Path) -> None:
    conf.write_text("[global]\nproxy = user:hunter2@proxy.example:3128\n")
    past_racy_window(conf)
    assert ("proxy", "user:hunter2@proxy.example:3128") in _read()
    assert not _kept_file().exists()


def test_a_file_removed_after_pip_read_it_is_not_kept_over(
        conf: Path, starts: list[object]) -> None:
    """The parser's prefetch reads, the file goes, then the command takes the answer: pip's
    reading stands for this run, but the next one reads pip again (before, the removed file's
    index was kept for ever: its stat, "missing", matched)."""
    pipconfig._READ_BEFORE.clear()
    pipconfig.prefetch(READER, "install")
    [(running, _since)] = pipconfig._started.values()
    running.proc.wait()
    conf.unlink()
    assert ("index-url", "https://mirror.example/simple") in pipconfig.read(READER, "install")
    assert not _kept_file().exists()
    assert "index-url" not in dict(_read()) and len(starts) == 2


def _venv(tmp_path: Path) -> tuple[pipconfig.Reader, Path]:
    root = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    return pipconfig._reader(root / "bin" / "python", has_pip=False), root


def test_startup_code_added_or_removed_after_a_save_reads_pip_again(
        conf: Path, starts: list[object], tmp_path: Path) -> None:
    """A .pth that sets PIP_INDEX_URL, added after the answer was kept, then removed: each
    change of the target's sys.path folders reads pip again (a .pth can also print an answer
    of its own: it must not outlive the .pth)."""
    who, root = _venv(tmp_path)
    site = next((root / "lib").glob("python3*/site-packages"))
    past_racy_window(site)
    reads = []
    for step in ("kept", "added", "removed"):
        if step == "added":
            (site / "zz.pth").write_text(
                "import os; os.environ['PIP_INDEX_URL'] = 'https://evil.example/simple'\n")
        elif step == "removed":
            (site / "zz.pth").unlink()
        past_racy_window(site)
        for _ in range(2):
            pipconfig._READ_BEFORE.clear()
            reads.append(dict(pipconfig.read(who, "install")).get("index-url"))
    assert reads == ["https://mirror.example/simple"] * 2 + ["https://evil.example/simple"] * 2 \
        + ["https://mirror.example/simple"] * 2
    assert len(starts) == 4  # kept, added (twice: an environment changed is never kept), removed


def test_a_venv_that_is_no_longer_one_reads_pip_again(
        conf: Path, starts: list[object], tmp_path: Path) -> None:
    """sys.prefix (the site pip.conf's folder) comes from pyvenv.cfg."""
    who, root = _venv(tmp_path)
    (root / "pip.conf").write_text("[install]\nfind-links = /opt/venv-wheels\n")
    past_racy_window(root / "pip.conf")
    for _ in range(2):
        pipconfig._READ_BEFORE.clear()
        assert ("find-links", "/opt/venv-wheels") in pipconfig.read(who, "install")
    (root / "pyvenv.cfg").rename(root / "pyvenv.cfg.away")
    pipconfig._READ_BEFORE.clear()
    assert ("find-links", "/opt/venv-wheels") not in pipconfig.read(who, "install")
    assert len(starts) == 2


def test_the_environments_checksum_never_reaches_a_command_line(conf: Path) -> None:
    """crc32 is linear: from a checksum ``ps`` shows, another user who knows the rest of root's
    environment could solve for a secret in it. The reader says its own checksum on its
    private standard output instead."""
    reading = pipconfig._running(READER, "install", None)
    pipconfig._answer(reading.running)
    assert pipsaved.env_checksum() not in str(reading.running.proc.args)


_APPEARS = """
import atexit, builtins, os
user = os.path.expanduser("~/.config/pip/pip.conf")
real = builtins.open
def hooked(file, *args, **kwargs):  # when pip opens the global file, a user file appears
    if str(file) == {glob!r} and not os.path.exists(user):
        os.makedirs(os.path.dirname(user), exist_ok=True)
        with real(user, "w") as out:
            out.write("[global]\\nindex-url = https://evil.example/simple\\n")
        atexit.register(os.unlink, user)  # and it is gone again when the reader ends
    return real(file, *args, **kwargs)
builtins.open = hooked
"""


def test_a_file_there_only_while_pip_reads_is_never_kept(
        conf: Path, starts: list[object], tmp_path: Path) -> None:
    """Missing before, missing after, read in between (a helper's race, made exact by a hook
    in the target): the stat of what pip opened is what counts."""
    who, root = _venv(tmp_path)
    site = next((root / "lib").glob("python3*/site-packages"))
    hook = tmp_path / "hook.py"
    hook.write_text(_APPEARS.format(glob=str(conf)))
    (site / "appears.pth").write_text(f"import os; exec(open({str(hook)!r}).read(), {{}})\n")
    past_racy_window(site / "appears.pth")
    for _ in range(2):
        pipconfig._READ_BEFORE.clear()
        assert dict(pipconfig.read(who, "install"))["index-url"] == "https://evil.example/simple"
    assert len(starts) == 2  # read each time, never kept
    assert not (Path(os.environ["HOME"]) / ".config" / "pip" / "pip.conf").exists()


def test_a_module_a_pth_imports_edited_in_place_reads_pip_again(
        conf: Path, starts: list[object], tmp_path: Path) -> None:
    who, root = _venv(tmp_path)
    site = next((root / "lib").glob("python3*/site-packages"))
    (site / "aphook.py").write_text("pass\n")
    (site / "aphook.pth").write_text("import aphook\n")
    past_racy_window(site / "aphook.pth")
    for _ in range(2):
        pipconfig._READ_BEFORE.clear()
        assert dict(pipconfig.read(who, "install"))["index-url"] == "https://mirror.example/simple"
    assert len(starts) == 1
    (site / "aphook.py").write_text(
        "import os; os.environ['PIP_INDEX_URL'] = 'https://evil.example/simple'\n")
    pipconfig._READ_BEFORE.clear()
    assert dict(pipconfig.read(who, "install"))["index-url"] == "https://evil.example/simple"
    assert len(starts) == 2


@pytest.mark.parametrize("line", [
    "index-url = https://dl.example.io/s3cr3tEntitlementT0ken/acme/python/simple/",
    "api-token = s3cr3t-t0ken"])
def test_a_token_in_a_path_or_under_a_secret_name_is_never_kept(
        conf: Path, line: str) -> None:
    conf.write_text(f"[global]\n{line}\n")
    past_racy_window(conf)
    _read()
    assert not _kept_file().exists()


def test_a_kept_file_holds_no_checksum_of_a_secret(
        conf: Path, starts: list[object], monkeypatch: pytest.MonkeyPatch) -> None:
    """crc32 is linear: a checksum of the whole environment on a disk (an image layer) is a
    guessing oracle for a short secret in it (a helper recovered one in 2.4 s). The kept
    file's leaves out the values of the PIP_* variables it reads again and of every
    secret-looking name: it is the same whatever they hold."""
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", "https://ci:qzkw@private.example/simple")
    monkeypatch.setenv("DEPLOY_TOKEN", "qzkw")
    _read()
    doc = json.loads(_kept_file().read_text())
    other = dict(os.environ, PIP_EXTRA_INDEX_URL="https://x:y@z/simple", DEPLOY_TOKEN="other")
    assert doc["fingerprint"]["env"] == pipsaved.env_checksum(other, frozenset(doc["masked"]))
    monkeypatch.setenv("DEPLOY_TOKEN", "rotated")
    assert dict(_read())["extra-index-url"] == "https://ci:qzkw@private.example/simple"
    assert len(starts) == 1
