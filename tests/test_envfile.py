"""Kind env-file, through the real CLI on real files: one KEY=value set or removed in a dotenv
file under ${MODEL_DIR}, everything else byte for byte, judged by readers we did not write:
python-dotenv's dotenv_values and bash's `set -a; . file`."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest
from dotenv import dotenv_values
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.kit import Run, run_cli, seconduid, tree_digest, write_manifest

# Comments, blank lines, `export`, quotes, an inline comment and mixed line endings: all of it
# must come back byte for byte.
SERVE_ENV = (b"# serve environment of the model package\r\n"
             b"ASCEND_RT_VISIBLE_DEVICES=0,1\r\n"
             b"\r\n"
             b"export VLLM_WORKER_MULTIPROC_METHOD=spawn  # NPU needs spawn\n"
             b"HCCL_BUFFSIZE='512'\r\n"
             b"# VLLM_USE_V1=0 (commented out: not a definition)\r\n"
             b"TAIL=no-newline")


@pytest.fixture
def model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    monkeypatch.setenv("MODEL_DIR", str(folder))
    return folder


def manifest(tmp_path: Path, **options: object) -> Path:
    return write_manifest(tmp_path / "m.yaml", [{
        "id": "serve-env", "title": "serve env", "kind": "env-file",
        "options": {"file": "${MODEL_DIR}/serve.env", "key": "VLLM_USE_V1", **options}}])


def cli(site: Path, path: Path, *args: str) -> Run:
    return run_cli("--site-packages", site, "--manifest", path, *args)


def bash_reads(env_file: Path, key: str) -> str | None:
    """What a shell sees after `set -a; . serve.env` (None: unset)."""
    script = f'set -a; . "$1"; if [ -n "${{{key}+x}}" ]; then printf "%s" "${key}"; ' \
             'else exit 7; fi'
    proc = subprocess.run(["bash", "-c", script, "bash", str(env_file)], capture_output=True,
                          text=True, check=False, env={"PATH": "/usr/bin:/bin"})
    return None if proc.returncode == 7 else proc.stdout


def test_set_apply_reapply_status_revert(tmp_path: Path, site: Path, model: Path) -> None:
    env_file = model / "serve.env"
    env_file.write_bytes(SERVE_ENV)
    before = dotenv_values(env_file)
    path = manifest(tmp_path, value="1")

    plan = cli(site, path, "plan")
    assert plan.code == 1 and "+VLLM_USE_V1=1" in plan.out, plan.out
    assert cli(site, path, "status").code == 1

    first = cli(site, path, "apply")
    assert (first.code, first.out.strip()) == (0, "[OK] Applied serve env"), first.out + first.err
    applied = env_file.read_bytes()
    assert applied == SERVE_ENV + b"\r\nVLLM_USE_V1=1\r\n"  # CRLF dominates; the tail kept
    assert dotenv_values(env_file) == {**before, "VLLM_USE_V1": "1"}
    # (bash reads "1\r" from a CRLF file, ours or not: it is judged on LF files below)

    digest = tree_digest(tmp_path)
    again = cli(site, path, "apply")
    assert (again.code, again.out.strip()) == (0, "[OK] serve env already applied")
    assert tree_digest(tmp_path) == digest
    status = cli(site, path, "--json", "status")
    assert status.code == 0 and status.json["results"][0]["status"] == "already-applied"

    reverted = cli(site, path, "revert")
    assert (reverted.code, reverted.out.strip()) == (0, "[OK] Reverted serve env")
    assert env_file.read_bytes() == SERVE_ENV
    assert "VLLM_USE_V1" not in dotenv_values(env_file)
    assert bash_reads(env_file, "VLLM_USE_V1") is None


def test_a_missing_file_is_created_and_revert_removes_it(tmp_path: Path, site: Path,
                                                         model: Path) -> None:
    path = manifest(tmp_path, value="hello world #1")  # needs quotes in every reader
    assert cli(site, path, "apply").code == 0
    env_file = model / "serve.env"
    assert env_file.read_bytes() == b"VLLM_USE_V1='hello world #1'\n"
    assert dotenv_values(env_file) == {"VLLM_USE_V1": "hello world #1"}
    assert bash_reads(env_file, "VLLM_USE_V1") == "hello world #1"
    assert cli(site, path, "revert").code == 0
    assert not env_file.exists() and model.is_dir()


def test_another_value_is_a_conflict_that_force_overwrites(tmp_path: Path, site: Path,
                                                           model: Path) -> None:
    env_file = model / "serve.env"
    original = SERVE_ENV.replace(b"HCCL_BUFFSIZE='512'\r\n",
                                 b"HCCL_BUFFSIZE='512'\r\n  export VLLM_USE_V1=\"0\"  # old\r\n")
    env_file.write_bytes(original)
    path = manifest(tmp_path, value="1")
    refused = cli(site, path, "apply")
    assert refused.code == 1
    assert "conflict in serve.env" in refused.out and "--force" in refused.out
    assert env_file.read_bytes() == original

    forced = cli(site, path, "apply", "--force")
    assert forced.code == 0, forced.out + forced.err
    assert env_file.read_bytes() == original.replace(b'  export VLLM_USE_V1="0"  # old\r\n',
                                                     b"  export VLLM_USE_V1=1  # old\r\n")
    assert dotenv_values(env_file)["VLLM_USE_V1"] == "1"
    assert cli(site, path, "apply").out.strip() == "[OK] serve env already applied"
    assert cli(site, path, "revert").code == 0
    assert env_file.read_bytes() == original
    assert dotenv_values(env_file)["VLLM_USE_V1"] == "0"


def test_remove_mode(tmp_path: Path, site: Path, model: Path) -> None:
    env_file = model / "serve.env"
    env_file.write_bytes(SERVE_ENV)
    path = write_manifest(tmp_path / "m.yaml", [{
        "id": "serve-env", "title": "serve env", "kind": "env-file",
        "options": {"file": "${MODEL_DIR}/serve.env", "key": "VLLM_WORKER_MULTIPROC_METHOD",
                    "remove": True}}])
    assert dotenv_values(env_file)["VLLM_WORKER_MULTIPROC_METHOD"] == "spawn"
    assert cli(site, path, "apply").code == 0
    assert env_file.read_bytes() == SERVE_ENV.replace(
        b"export VLLM_WORKER_MULTIPROC_METHOD=spawn  # NPU needs spawn\n", b"")
    assert "VLLM_WORKER_MULTIPROC_METHOD" not in dotenv_values(env_file)
    assert bash_reads(env_file, "VLLM_WORKER_MULTIPROC_METHOD") is None
    digest = tree_digest(tmp_path)
    assert cli(site, path, "apply").out.strip() == "[OK] serve env already applied"
    assert tree_digest(tmp_path) == digest
    assert cli(site, path, "revert").code == 0
    assert env_file.read_bytes() == SERVE_ENV
    assert dotenv_values(env_file)["VLLM_WORKER_MULTIPROC_METHOD"] == "spawn"


@pytest.mark.parametrize(("text", "says"), [
    (b"VLLM_USE_V1=0\nA=1\nexport VLLM_USE_V1=1\n", "VLLM_USE_V1 is defined 2 times (lines 1, 3)"),
    (b"A=1\nVLLM_USE_V1='unclosed\n", "line 2: the VLLM_USE_V1 line cannot be read"),
    (b"VLLM_USE_V1\n", "line 1: the VLLM_USE_V1 line cannot be read"),
])
def test_ambiguous_files_are_refused_naming_the_file_and_the_fix(
        tmp_path: Path, site: Path, model: Path, text: bytes, says: str) -> None:
    env_file = model / "serve.env"
    env_file.write_bytes(text)
    path = manifest(tmp_path, value="1")
    before = tree_digest(tmp_path)
    for command in ("apply", "status"):
        result = cli(site, path, command)
        assert result.code == 1, result.out + result.err
        said = result.out + result.err
        assert f"{env_file}" in said and says in said and "fix:" in said, said
    assert tree_digest(tmp_path) == before


@pytest.mark.parametrize(("options", "says"), [
    ({"value": "it's"}, "a quote, backslash or control character"),
    ({"value": "1", "remove": True}, "give either 'value' (set the key) or 'remove: true'"),
    ({}, "give either 'value'"),
    ({"value": "1", "key": "NOT-A-KEY"}, "artifacts[0].options.key: 'NOT-A-KEY' is not a "
                                         "variable name"),
])
def test_bad_options_exit_2(tmp_path: Path, site: Path, model: Path,
                            options: dict[str, object], says: str) -> None:
    result = cli(site, manifest(tmp_path, **options), "apply")
    assert result.code == 2 and says in result.err, result.out + result.err
    assert not (model / "serve.env").exists()


def test_unset_model_dir_names_the_variable(tmp_path: Path, site: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MODEL_DIR", raising=False)
    result = cli(site, manifest(tmp_path, value="1"), "apply")
    assert result.code == 2
    assert "needs ${MODEL_DIR}, which is not set" in result.err
    assert "export MODEL_DIR=" in result.err


def key_manifest(tmp_path: Path, key: str, **options: object) -> Path:
    return write_manifest(tmp_path / "k.yaml", [{
        "id": "serve-env", "title": "serve env", "kind": "env-file",
        "options": {"file": "${MODEL_DIR}/serve.env", "key": key, **options}}])


def test_a_key_is_matched_exactly_not_as_a_prefix(tmp_path: Path, site: Path,
                                                  model: Path) -> None:
    """`MODEL` is its own variable: a `MODEL_DIR=` line is not a second definition of it
    (89ee836 refused: "MODEL is defined 2 times")."""
    env_file = model / "serve.env"
    env_file.write_bytes(b"MODEL_DIR=/models/a\nMODELS=2\n")
    path = key_manifest(tmp_path, "MODEL", value="glimmer")
    result = cli(site, path, "apply")
    assert result.code == 0, result.out + result.err
    assert env_file.read_bytes() == b"MODEL_DIR=/models/a\nMODELS=2\nMODEL=glimmer\n"
    assert dotenv_values(env_file) == {"MODEL_DIR": "/models/a", "MODELS": "2",
                                       "MODEL": "glimmer"}
    assert bash_reads(env_file, "MODEL") == "glimmer"


def test_remove_never_touches_a_line_inside_another_multiline_value(
        tmp_path: Path, site: Path, model: Path) -> None:
    """A line that looks like `VLLM_USE_V1=1` but sits inside PROMPT's quoted multi-line
    value is PROMPT's text for python-dotenv and bash alike: there is nothing to remove (89ee836
    deleted it and reported [OK], changing PROMPT)."""
    env_file = model / "serve.env"
    text = b'PROMPT="first line\nVLLM_USE_V1=1\nlast line"\nOTHER=x\n'
    env_file.write_bytes(text)
    assert dotenv_values(env_file)["PROMPT"] == "first line\nVLLM_USE_V1=1\nlast line"
    assert bash_reads(env_file, "VLLM_USE_V1") is None  # the readers agree: it is not set
    result = cli(site, manifest(tmp_path, remove=True), "apply")
    assert result.code == 0, result.out + result.err
    assert env_file.read_bytes() == text


def test_remove_of_a_real_entry_keeps_a_neighbouring_multiline_value(
        tmp_path: Path, site: Path, model: Path) -> None:
    env_file = model / "serve.env"
    env_file.write_bytes(b'PROMPT="a\nVLLM_USE_V1=1\nb"\n\nexport VLLM_USE_V1=0 # old\nZ=1\n')
    result = cli(site, manifest(tmp_path, remove=True), "apply")
    assert result.code == 0, result.out + result.err
    assert env_file.read_bytes() == b'PROMPT="a\nVLLM_USE_V1=1\nb"\n\nZ=1\n'
    assert bash_reads(env_file, "VLLM_USE_V1") is None
    assert dotenv_values(env_file)["PROMPT"] == "a\nVLLM_USE_V1=1\nb"


def test_an_unreadable_line_elsewhere_refuses_the_file(tmp_path: Path, site: Path,
                                                       model: Path) -> None:
    """After an unclosed quote, bash reads the rest of the file as that value and dotenv skips
    the line: the two disagree about what VLLM_USE_V1 is, so nothing is changed."""
    env_file = model / "serve.env"
    env_file.write_bytes(b"A='unclosed\nVLLM_USE_V1=0\n")
    before = env_file.read_bytes()
    result = cli(site, manifest(tmp_path, value="1"), "apply")
    assert result.code == 1
    assert "line 1: this line cannot be read" in result.out + result.err
    assert env_file.read_bytes() == before


def test_an_empty_value_before_a_comment_keeps_the_comment_a_comment(
        tmp_path: Path, site: Path, model: Path) -> None:
    """`KEY= # note` is an empty value and a comment; setting it must not glue the two
    (`KEY=1#` reads "1#"). Found by the property test below."""
    env_file = model / "serve.env"
    env_file.write_bytes(b"VLLM_USE_V1= # set by the image\n")
    result = cli(site, manifest(tmp_path, value="1"), "apply", "--force")
    assert result.code == 0, result.out + result.err
    assert env_file.read_bytes() == b"VLLM_USE_V1=1 # set by the image\n"
    assert dotenv_values(env_file) == {"VLLM_USE_V1": "1"}
    assert bash_reads(env_file, "VLLM_USE_V1") == "1"


def test_a_conflict_on_a_secret_key_shows_neither_value(tmp_path: Path, site: Path,
                                                        model: Path) -> None:
    env_file = model / "serve.env"
    env_file.write_bytes(b"HF_TOKEN=hf_the_old_secret\n")
    path = key_manifest(tmp_path, "HF_TOKEN", value="hf_the_new_secret")
    for command in ("status", "apply"):
        result = cli(site, path, command)
        said = result.out + result.err
        assert result.code == 1 and "values hidden" in said, said
        assert "hf_the_old_secret" not in said and "hf_the_new_secret" not in said


_NAMES = st.sampled_from(["VLLM_USE_V1", "VLLM_USE_V1X", "XVLLM_USE_V1", "A", "MODEL_DIR"])
_VALUES = st.text(alphabet="ab1 #=/\n'\"", max_size=8)


@st.composite
def _dotenv_files(draw: st.DrawFn, names: st.SearchStrategy[str] = _NAMES) -> str:
    lines = []
    for _ in range(draw(st.integers(0, 6))):
        name, value = draw(names), draw(_VALUES)
        quote = draw(st.sampled_from(["", "'", '"']))
        if (quote and quote not in value) or (not quote and not set(value) & set("\n'\"")):
            lines.append(f"{draw(st.sampled_from(['', 'export ', '  ']))}{name}="
                         f"{quote}{value}{quote}")
        else:
            lines.append(draw(st.sampled_from(["# comment", "", "B=plain"])))
    return "\n".join(lines) + draw(st.sampled_from(["", "\n"]))


@settings(max_examples=250, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=_dotenv_files(), remove=st.booleans())
def test_what_python_dotenv_reads_is_what_it_acts_on(text: str, remove: bool,
                                                     tmp_path: Path) -> None:
    """Any dotenv file: after the kind's edit python-dotenv sees exactly the one change (the key
    set or gone) and every other variable as before, or the kind refused the file."""
    from ascendpatch.errors import RefusedError
    from ascendpatch.kinds.envfile import EnvOptions, _finding

    path = tmp_path / "serve.env"
    opts = EnvOptions(path, "VLLM_USE_V1", None if remove else "1")
    data = text.encode()
    try:
        finding = _finding(opts, path, data)
    except RefusedError:
        return
    assert finding.desired.known and finding.desired.data is not None
    path.write_bytes(data)
    before = dotenv_values(path)
    path.write_bytes(finding.desired.data)
    after = dotenv_values(path)
    expected = {k: v for k, v in before.items() if k != "VLLM_USE_V1"}
    if not remove:
        expected["VLLM_USE_V1"] = "1"
    assert dict(after) == expected, (text, finding.desired.data)


def test_a_secret_files_backup_is_as_private_as_the_file(monkeypatch: pytest.MonkeyPatch) \
        -> None:
    """`apply --force` on a 0600 serve.env holding HF_TOKEN: its backup keeps the mode and
    owner, the backups folder is 0700 (also one left 0755 by an older run), and a real second
    user (uid 65534) cannot read it. On 89ee836 the backup was 0644 under 0755 folders."""
    with seconduid.open_folder() as top:
        site, model = top / "site", top / "model"
        site.mkdir()
        model.mkdir()
        (site / "visible.txt").write_text("anyone may read this\n")  # the walk itself works
        (site / ".ascendpatch" / "backups").mkdir(parents=True, mode=0o755)
        env_file = model / "serve.env"
        original = b"HF_TOKEN=hf_the_secret_token\nVLLM_USE_V1=0\n"
        env_file.write_bytes(original)
        env_file.chmod(0o640)
        os.chown(env_file, 4242, 4343)
        monkeypatch.setenv("MODEL_DIR", str(model))
        forced = cli(site, manifest(top, value="1"), "apply", "--force")
        assert forced.code == 0, forced.out + forced.err
        backups = site / ".ascendpatch" / "backups"
        backup = backups / hashlib.sha256(original).hexdigest()
        assert backup.read_bytes() == original
        info = backup.stat()
        assert (oct(info.st_mode & 0o777), info.st_uid, info.st_gid) == ("0o640", 4242, 4343)
        assert seconduid.modes([backups]) == ["0o700"]
        assert seconduid.run("cat", site / "visible.txt").returncode == 0
        stolen = seconduid.run("cat", backup)
        assert stolen.returncode != 0 and "hf_the_secret_token" not in stolen.stdout
        assert cli(site, manifest(top, value="1"), "revert").code == 0
        assert env_file.read_bytes() == original


SECRET_ENV = (b"# model package\n"
              b"HF_TOKEN=hf_context_secret_1\n"
              b"export API_KEY='key_context_secret_2'  # for the router\n"
              b"DB_PASSWORD=\"multi\nline_secret_3\"\n"
              b"ASCEND_RT_VISIBLE_DEVICES=0,1\n")
SECRETS = ("hf_context_secret_1", "key_context_secret_2", "line_secret_3", "hf_manifest_4")


@pytest.mark.parametrize("key, value", [("VLLM_USE_V1", "1"), ("HF_TOKEN", "hf_manifest_4")])
def test_diffs_never_show_a_secret_value(tmp_path: Path, site: Path, model: Path, key: str,
                                         value: str) -> None:
    """plan, apply --dry-run --diff, status and apply --diff, as text and --json: every
    secret-named value is *** in the diff's context lines, and in its -/+ lines when the key
    set is itself secret. On 89ee836 the context lines showed them."""
    env_file = model / "serve.env"
    env_file.write_bytes(SECRET_ENV if key != "HF_TOKEN" else
                         SECRET_ENV.replace(b"HF_TOKEN=hf_context_secret_1\n", b""))
    path = key_manifest(tmp_path, key, value=value)
    runs = [cli(site, path, *args) for args in (
        ("plan",), ("--json", "plan"), ("apply", "--dry-run", "--diff"),
        ("--json", "apply", "--dry-run", "--diff"), ("status",), ("--json", "status"))]
    runs.append(cli(site, path, "--json", "apply", "--diff"))
    assert runs[-1].code == 0, runs[-1].out + runs[-1].err
    for run in runs:
        said = run.out + run.err
        assert not [s for s in SECRETS if s in said], said
    diff = runs[-1].json["results"][0]["diff"]
    assert " export API_KEY=***  # for the router\n" in diff, diff
    assert " DB_PASSWORD=***\n" in diff and " ASCEND_RT_VISIBLE_DEVICES=0,1\n" in diff
    assert f"+{key}={'***' if key == 'HF_TOKEN' else value}\n" in diff
    assert value.encode() in env_file.read_bytes()  # only what is shown is masked


_SECRET_NAMES = st.sampled_from(["HF_TOKEN", "API_KEY", "MY_SECRET_X", "VLLM_USE_V1", "A"])


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=_dotenv_files(_SECRET_NAMES))
def test_masked_hides_exactly_the_secret_values(text: str, tmp_path: Path) -> None:
    """Any dotenv file, read back by python-dotenv: the same variables in the same order,
    each secret-named non-empty value read as ***, every other value as before."""
    from ascendpatch.kinds.envfile import masked
    from ascendpatch.redact import MASK, is_secret

    path = tmp_path / "serve.env"
    path.write_text(text)
    before = dotenv_values(path)
    path.write_text(masked(text))
    after = dotenv_values(path)
    assert list(after) == list(before), (text, masked(text))
    for name, value in before.items():
        wanted = MASK if is_secret(name) and value else value
        assert after[name] == wanted, (name, text, masked(text))
