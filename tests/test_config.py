"""The remembered target: ascendpatch.toml upwards, then the user's config, and the precedence
flag > environment > config > discovery, which ``-v`` names on every command."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ascendpatch import config
from ascendpatch.errors import InvalidInputError
from ascendpatch.shell import remember
from tests.kit import chdir, make_dist, run_cli, seconduid, tree_digest, write_manifest


def _site(folder: Path) -> Path:
    make_dist(folder, "vllm-ascend", "0.13.0", {"vllm_ascend/__init__.py": ""})
    return folder


def _target_line(err: str) -> str:
    return next(line for line in err.splitlines() if line.startswith("target "))


def _manifest_line(err: str) -> str:
    return next(line for line in err.splitlines() if line.startswith("manifest "))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project folder with ascendpatch.toml naming a site-packages beside it (relative)."""
    folder = tmp_path / "project"
    (folder / "deep" / "er").mkdir(parents=True)
    _site(tmp_path / "project" / "env" / "site-packages")
    (folder / "ascendpatch.toml").write_text('site-packages = "env/site-packages"\n')
    return folder


def test_a_project_config_is_found_from_a_subfolder(project: Path) -> None:
    with chdir(project / "deep" / "er"):
        done = run_cli("-v", "status")
    assert done.code == 0, done.err
    assert _target_line(done.err) == (f"target site-packages {project}/env/site-packages "
                                      f"(from {project}/ascendpatch.toml)")
    assert _manifest_line(done.err) == ("manifest default (the bundled catalog: no --manifest, "
                                        "$ASCENDPATCH_MANIFEST or config)")


def test_flag_beats_environment_beats_config(project: Path, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    other = _site(tmp_path / "other")
    with chdir(project):
        flag = run_cli("-v", "--site-packages", other, "status")
        monkeypatch.setenv("ASCENDPATCH_PYTHON", sys.executable)
        env = run_cli("-v", "status")
        both = run_cli("-v", "status", "--site-packages", other)
    assert _target_line(flag.err) == f"target site-packages {other} (from --site-packages)"
    assert _target_line(env.err).endswith("(from $ASCENDPATCH_PYTHON)")
    assert _target_line(env.err).startswith(f"target {sys.executable} (Python ")
    assert _target_line(both.err) == f"target site-packages {other} (from --site-packages)"


def test_the_project_config_beats_the_user_config(project: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    user = Path(os.environ["HOME"]) / ".config" / "ascendpatch" / "config.toml"
    user.parent.mkdir(parents=True)
    mine = _site(tmp_path / "mine")
    user.write_text(f"site-packages = {json.dumps(str(mine))}\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with chdir(elsewhere):
        alone = run_cli("-v", "status")
    with chdir(project):
        near = run_cli("-v", "status")
    assert _target_line(alone.err) == f"target site-packages {mine} (from {user})"
    assert _target_line(near.err).endswith(f"(from {project}/ascendpatch.toml)")
    xdg = tmp_path / "xdg"
    (xdg / "ascendpatch").mkdir(parents=True)
    (xdg / "ascendpatch" / "config.toml").write_text(f'site-packages = "{project}/env/'
                                                      'site-packages"\n')
    monkeypatch.setenv("XDG_CONFIG_HOME", str(xdg))
    with chdir(elsewhere):
        by_xdg = run_cli("-v", "status")
    assert _target_line(by_xdg.err).endswith(f"(from {xdg}/ascendpatch/config.toml)")


def test_the_manifest_by_flag_environment_and_config(project: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    write_manifest(project / "stack.yaml", [])
    env_manifest = write_manifest(tmp_path / "env.yaml", [])
    flag_manifest = write_manifest(tmp_path / "flag.yaml", [])
    (project / "ascendpatch.toml").write_text('site-packages = "env/site-packages"\n'
                                              'manifest = "stack.yaml"\n')
    with chdir(project / "deep"):
        by_config = run_cli("-v", "status")
        monkeypatch.setenv("ASCENDPATCH_MANIFEST", str(env_manifest))
        by_env = run_cli("-v", "status")
        by_flag = run_cli("-v", "--manifest", flag_manifest, "status")
    assert by_config.code == 0, by_config.err
    assert _manifest_line(by_config.err) == (f"manifest {project}/stack.yaml "
                                             f"(from {project}/ascendpatch.toml)")
    assert _manifest_line(by_env.err) == f"manifest {env_manifest} (from $ASCENDPATCH_MANIFEST)"
    assert _manifest_line(by_flag.err) == f"manifest {flag_manifest} (from --manifest)"


@pytest.mark.parametrize("command", [
    ("status",), ("plan",), ("apply", "--dry-run"), ("revert", "--dry-run"),
    ("verify", "--no-probes"), ("audit",), ("snapshot", "-o", "-")])
def test_every_command_says_which_target_with_v(project: Path, command: tuple[str, ...]) -> None:
    with chdir(project):
        done = run_cli("-v", *command)
    assert done.code in (0, 1), done.err
    assert _target_line(done.err).endswith(f"(from {project}/ascendpatch.toml)"), done.err
    assert "manifest default (" in done.err or command == ("audit",)  # audit: RECORDs only
    quiet = run_cli(*command)  # without -v: not a word of it
    assert "target site-packages" not in quiet.err


TOML_PROBLEMS = [
    (b'python = "x', "not TOML ("),
    (b"python = 3\n", "python must be a string (a path to an interpreter), not an integer"),
    (b'manifest = ["a"]\n', "manifest must be a string"),
    (b'[python]\nx = "y"\n', "python must be a string (a path to an interpreter), not a table"),
    (b'pyhton = "/usr/bin/python3"\n', "unknown key 'pyhton' (did you mean 'python'?)"),
    (b'site_packages = "/x"\n', "unknown key 'site_packages' (did you mean 'site-packages'?)"),
    (b'python = "/a"\nsite-packages = "/b"\n', "python and site-packages both name a target"),
    (b'python = ""\n', "python must be one non-empty line"),
    (b'python = "a\\nb"\n', "python must be one non-empty line"),
    (b'python = "\xff"\n', "not UTF-8 text (byte 10)"),
    (b"x = " + b"[" * 5000 + b"]" * 5000 + b"\n", "config"),
    (b"# " + b"x" * (config.MAX_BYTES + 1) + b"\n", "larger than 64 KiB"),
]


@pytest.mark.parametrize("data, said", TOML_PROBLEMS)
def test_a_bad_config_is_exit_2_naming_file_and_key(project: Path, data: bytes,
                                                     said: str) -> None:
    path = project / "ascendpatch.toml"
    path.write_bytes(data)
    before = tree_digest(project)
    with chdir(project):
        done = run_cli("apply")
    assert done.code == 2
    assert done.err.startswith(f"[FAIL] config {path}: "), done.err
    assert said in done.err and len(done.err.splitlines()) == 1, done.err
    assert tree_digest(project) == before


def test_a_fifo_and_missing_paths_are_exit_2(project: Path) -> None:
    path = project / "ascendpatch.toml"
    path.unlink()
    os.mkfifo(path)
    with chdir(project):
        fifo = run_cli("status")
    assert fifo.code == 2 and f"config {path}: a FIFO, not a regular file" in fifo.err
    path.unlink()
    path.write_text('python = "gone/bin/python"\n')
    with chdir(project / "deep"):
        gone = run_cli("status")
    path.write_text('python = "gone/bin/python"\nmanifest = "nope"\n')
    with chdir(project / "deep"):
        named = run_cli("--python", sys.executable, "status")
    assert gone.code == 2
    assert gone.err.startswith(f"[FAIL] {path}: python = 'gone/bin/python' (relative to the "
                               f"config file's folder {project}): {project}/gone/bin/python "
                               "does not exist; fix: edit or remove that line"), gone.err
    assert named.code == 2
    assert named.err.startswith(f"[FAIL] {path}: manifest = 'nope': no bundled manifest named "
                                "'nope'"), named.err


@pytest.mark.parametrize("line", [
    'manifest = "https://ci:hunter2@mirror.example/stack.yaml"\n',
    'python = "/opt/x/HF_TOKEN=hunter2/bin/python"\n',
    '"API_TOKEN=hunter2" = "x"\n'])
def test_a_secret_in_a_config_value_is_never_shown(project: Path, line: str) -> None:
    (project / "ascendpatch.toml").write_text(line)
    with chdir(project):
        done = run_cli("--json", "status")
    assert done.code == 2
    assert "hunter2" not in done.out + done.err
    assert "ascendpatch.toml" in json.loads(done.out)["error"]["message"]


# -- another user's folder or file: never read (root on a shared host) ----------------------

def _nobody_writes(path: Path, text: str) -> None:
    done = seconduid.run("sh", "-c", f"printf '%s' '{text}' > '{path}'")
    assert done.returncode == 0, done.stderr


def test_a_config_another_uid_wrote_is_never_read() -> None:
    """Root runs in a folder another uid owns, or may write, or whose config it may change:
    that config is not read (a [WARN] says why) and the user's own config applies."""
    seconduid.require()
    user = Path(os.environ["HOME"]) / ".config" / "ascendpatch" / "config.toml"
    user.parent.mkdir(parents=True)
    with seconduid.open_folder() as shared:
        mine = _site(shared / "mine")
        user.write_text(f'site-packages = "{mine}"\n')
        theirs = seconduid.home_for_nobody(shared)  # their folder, their config
        _nobody_writes(theirs / "ascendpatch.toml", 'python = "/tmp/evil/bin/python"')
        (theirs / "project").mkdir()
        open_to_all = shared / "open"  # root's folder that anyone may write into
        open_to_all.mkdir()
        open_to_all.chmod(0o777)
        _nobody_writes(open_to_all / "ascendpatch.toml", 'python = "/tmp/evil/bin/python"')
        writable = shared / "writable"  # root's folder, root's file, that anyone may change
        writable.mkdir()
        (writable / "ascendpatch.toml").write_text("")
        (writable / "ascendpatch.toml").chmod(0o666)
        _nobody_writes(writable / "ascendpatch.toml", 'python = "/tmp/evil/bin/python"')
        for where, why in ((theirs / "project", "owned by uid 65534"),
                           (open_to_all, "writable by other users (mode 777)"),
                           (writable, "writable by other users (mode 666)")):
            with chdir(where):
                done = run_cli("-v", "status")
            assert done.code == 0, done.err
            assert f"[WARN] config {where.parent if where.name == 'project' else where}/" \
                   f"ascendpatch.toml not read: " in done.err, done.err
            assert why in done.err
            assert "/tmp/evil" not in done.out + done.err
            assert _target_line(done.err) == f"target site-packages {mine} (from {user})"


def test_a_trusted_config_above_a_trusted_folder_is_used() -> None:
    seconduid.require()
    with seconduid.open_folder() as shared:
        mine = _site(shared / "mine")
        (shared / "ascendpatch.toml").write_text(f'site-packages = "{mine}"\n')
        (shared / "a" / "b").mkdir(parents=True)
        with chdir(shared / "a" / "b"):
            done = run_cli("-v", "status")
    assert _target_line(done.err).endswith(f"(from {shared}/ascendpatch.toml)")


# -- the reader on any input -----------------------------------------------------------------

VALUES = st.one_of(st.text(max_size=20), st.integers(), st.booleans(), st.floats(),
                   st.lists(st.text(max_size=5), max_size=3))
KEYS = st.one_of(st.sampled_from([*config.KEYS, "pyton", "target"]),
                 st.text(alphabet="abcdefghij-_", min_size=1, max_size=8))


def _toml(value: object) -> str:
    return json.dumps(value) if not isinstance(value, bool) else str(value).lower()


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(KEYS, VALUES, max_size=4))
def test_any_document_is_read_or_refused_in_one_line(tmp_path_factory: pytest.TempPathFactory,
                                                     doc: dict[str, object]) -> None:
    path = tmp_path_factory.mktemp("cfg") / "ascendpatch.toml"
    path.write_text("".join(f"{json.dumps(k)} = {_toml(v)}\n" for k, v in doc.items()))
    try:
        found = config.read(path)
    except InvalidInputError as exc:
        assert str(exc).startswith(f"config {path}: ") and "\n" not in str(exc)
        return
    assert found is not None
    assert set(found.values) <= set(config.KEYS)
    assert all(isinstance(v, str) and v.strip() for v in found.values.values())


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_any_bytes_are_read_or_refused_in_one_line(tmp_path_factory: pytest.TempPathFactory,
                                                   data: bytes) -> None:
    path = tmp_path_factory.mktemp("cfg") / "ascendpatch.toml"
    path.write_bytes(data)
    try:
        config.read(path)
    except InvalidInputError as exc:
        assert "\n" not in str(exc)


@settings(max_examples=200, deadline=None)
@given(st.text(min_size=1, max_size=40))
def test_any_path_written_reads_back_the_same(path: str) -> None:
    try:
        text = config.render({"python": path})
    except ValueError:
        return  # refused, never written wrong
    assert config.read_text(text) == {"python": path}


# -- install.sh's writer --------------------------------------------------------------------

def _remember(*args: str | Path) -> tuple[int, str]:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = remember.main([str(a) for a in args])
    return code, out.getvalue()


def test_remember_writes_once_and_never_overwrites(tmp_path: Path) -> None:
    user = Path(os.environ["HOME"]) / ".config" / "ascendpatch" / "config.toml"
    python = tmp_path / "sbx" / "bin" / "python"
    code, out = _remember("--python", python, "--manifest", "default")
    assert code == 0 and out.startswith(f"[OK] config {user}: python = ")
    assert config.read(user) == config.Config(user, {"python": str(python)})
    code, out = _remember("--python", python, "--manifest", "default")
    assert code == 0 and "already names this target" in out
    before = user.read_bytes()
    code, out = _remember("--python", tmp_path / "other", "--manifest", "muse-glimmer-w8a8")
    assert code == 1 and out.startswith(f"[WARN] config {user} names another target")
    assert f'python = "{tmp_path}/other"; manifest = "muse-glimmer-w8a8"' in out
    assert user.read_bytes() == before
    user.write_text("python = [")
    code, out = _remember("--python", python)
    assert code == 1 and out.startswith(f"[WARN] config {user}: not TOML") and "left alone" in out


def test_remember_as_root_in_a_home_another_uid_owns_writes_nothing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """install.sh as root with a user's HOME: that user (uid 65534, a real home it owns)
    could swap ~/.config/ascendpatch for a link between root's mkdir and its write, so
    nothing is written there; the [WARN] gives the line to add as that user."""
    with seconduid.open_folder() as shared:
        home = seconduid.home_for_nobody(shared)
        monkeypatch.setenv("HOME", str(home))
        monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
        code, out = _remember("--python", shared / "sbx" / "bin" / "python")
        user = home / ".config" / "ascendpatch" / "config.toml"
        assert code == 1 and out.startswith(f"[WARN] config {user} not written: {home} is "
                                            "owned by uid 65534"), out
        assert f'add: python = "{shared}/sbx/bin/python"' in out and out.count("\n") == 1
        assert list(home.iterdir()) == []
