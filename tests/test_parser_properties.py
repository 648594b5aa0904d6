"""Property tests of the parsers of untrusted input (issue 22 item 6): whatever bytes a target,
a node or a manifest author hands them, each ends in its documented result or error, or the
command in exit 0/1/2 with one line, within Hypothesis' deadline (a time bound per example,
on local runs: tests/kit/properties.py) and, where a test says so, under an address-space
limit (RLIMIT_AS, in a subprocess); never a traceback. Snapshots have their own suite
(tests/test_snapshot_input.py), and so do env files (tests/test_envfile.py) and bounded JSON
(tests/test_untrusted.py).

Suites and bounds (examples per run are the ``max_examples``; the counts a run made are printed
with ``pytest --hypothesis-show-statistics``):

* RECORD (env/target.read_record, and ``audit`` on it): 300 and 100 examples, deadline 2 s;
  a FIFO and a 2 GiB RECORD under RLIMIT_AS (768 MiB).
* manifests (manifest/loader.load, and ``--manifest FILE status``): 300 and 60 examples,
  deadlines 2 s and 3 s; the alias bomb under RLIMIT_AS (768 MiB).
* patches (patchfile/diffpatch parse_patch): 400 examples, deadline 1 s.
* log lines (deploy/logs triage over stream_lines): 200 examples, deadline 2 s.
* printed text (deploy/text.printable): 300 examples, deadline 1 s; ``--hosts`` files
  (commands/fleet_report.read_hosts): 200 examples, deadline 1 s.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.kit import TRACEBACK, make_dist, run_cli
from tests.kit.properties import deadline

FIXTURES = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]


def _verdict(*args: str | Path) -> int:
    """A command run in-process: exit 0/1/2, no traceback, an error in one line (then, for a
    manifest's other problems, one indented line each)."""
    run = run_cli("--color", "never", *args)
    everything = run.out + run.err
    assert TRACEBACK not in everything and "unexpected error" not in everything, everything
    assert run.code in (0, 1, 2), everything
    if run.code == 2:
        lines = [line for line in run.err.splitlines() if line.strip()]
        assert len([line for line in lines if not line.startswith("    ")]) == 1, run.err
    return run.code


def _limited(limit_mb: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (limit_mb << 20, limit_mb << 20))


def _process(*args: str | Path, limit_mb: int = 768) -> subprocess.CompletedProcess[str]:
    """``python -m ascendpatch ARGS`` under an address-space limit and a timeout."""
    return subprocess.run([sys.executable, "-m", "ascendpatch", "--color", "never",
                           *map(str, args)], capture_output=True, text=True, timeout=120,
                          check=False, preexec_fn=lambda: _limited(limit_mb))


# --------------------------------------------------------------------------- RECORD

_FIELD = st.sampled_from(["demo/mod.py", "demo/__init__.py", "../outside", "/abs/path",
                          "a\0b", "é/ü.py", '"quoted,path"', '"', "", ",", "sha256=",
                          "sha256=AAAA", "sha256=" + "A" * 43, "md5=x", "12", "²", "-1",
                          "9" * 30, " 3", "\t", "\r"]) | st.text(max_size=6)
_ROW = st.lists(_FIELD, min_size=0, max_size=4).map(",".join)
RECORDS = (st.lists(_ROW, max_size=8).map(lambda rows: "\n".join(rows).encode(
    "utf-8", "surrogatepass")) | st.binary(max_size=120))


def _fresh(tmp_path: Path) -> Path:
    """A folder of its own for one Hypothesis example (the fixture's is shared by them)."""
    return Path(tempfile.mkdtemp(dir=tmp_path))


def _write_record(site: Path, data: bytes) -> Path:
    info = make_dist(site, "demo", "1.0", {"demo/__init__.py": "", "demo/mod.py": "a = 1\n"})
    (info / "RECORD").write_bytes(data)
    return info


@settings(max_examples=300, deadline=deadline(2000), suppress_health_check=FIXTURES)
@given(data=RECORDS)
def test_any_record_reads_as_rows_never_an_error(data: bytes, tmp_path: Path) -> None:
    from ascendpatch.env.target import read_record

    info = _write_record(_fresh(tmp_path) / "site", data)
    for rel, digest, size in read_record(info):
        assert rel and "\0" not in rel
        assert digest is None or digest.startswith("sha256=")
        assert size is None or size >= 0


@settings(max_examples=100, deadline=deadline(2000), suppress_health_check=FIXTURES)
@given(data=RECORDS)
def test_audit_of_any_record_ends_in_0_1_2(data: bytes, tmp_path: Path) -> None:
    site = _fresh(tmp_path) / "site"
    _write_record(site, data)
    _verdict("--site-packages", site, "audit")


def test_a_record_that_is_a_fifo_or_huge_is_no_rows_not_a_hang(tmp_path: Path) -> None:
    """A FIFO RECORD used to hang every audit; a 2 GiB one (sparse) was read whole, and under
    a 768 MiB address-space limit that is MemoryError, exit 3."""
    site = tmp_path / "site"
    info = _write_record(site, b"")
    (info / "RECORD").unlink()
    os.mkfifo(info / "RECORD")
    other = make_dist(site, "other", "1.0", {"other/__init__.py": ""})
    with (other / "RECORD").open("r+b") as handle:
        handle.truncate(2 << 30)
    run = _process("--site-packages", site, "audit")
    assert run.returncode == 1, run.stderr
    assert "[FAIL] unreadable demo-1.0.dist-info/RECORD (demo 1.0: its RECORD is a FIFO, not " \
        "a regular file; its files are unchecked)" in run.stdout, run.stdout
    assert "other-1.0.dist-info/RECORD (other 1.0: its RECORD is larger than 64 MiB" \
        in run.stdout and TRACEBACK not in run.stderr


# --------------------------------------------------------------------------- manifests

_WORDS = st.sampled_from(["name", "extends", "description", "protected", "artifacts", "id",
                          "title", "kind", "diff", "env-file", "file", "distribution",
                          "versions", ">=1", "source", "variants", "targets", "options",
                          "needed_if", "calls_unguarded", "stack", "packages", "launch",
                          "../../etc/passwd", "default", "sha256", "before", "after", "<<"])
_SCALAR = _WORDS | st.integers(-2, 2) | st.booleans() | st.none() | st.text(max_size=5)
_TREE = st.recursive(_SCALAR, lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(_WORDS, inner, max_size=4), max_leaves=20)
_YAML_BITS = st.sampled_from(["&a ", "*a", "<<: *a\n", "- ", ": ", "\n  ", "[", "]", "{",
                              "}", "!!python/object:os.system ", "%YAML 1.1\n", "---\n", "\t",
                              '"', "'", "#", "? ", "|\n", ">-\n", "\x00", "\ufeff"])


@st.composite
def manifest_text(draw: st.DrawFn) -> bytes:
    """A manifest-shaped tree dumped as YAML, perhaps with YAML syntax spliced in, or bytes."""
    if draw(st.integers(0, 9)) == 0:
        return draw(st.binary(max_size=80))
    import yaml

    text = yaml.safe_dump(draw(_TREE), allow_unicode=True)
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(_YAML_BITS) + text[at:]
    return text.encode("utf-8", "surrogatepass")


@settings(max_examples=300, deadline=deadline(2000), suppress_health_check=FIXTURES)
@given(data=manifest_text())
def test_any_manifest_loads_or_is_one_manifest_error(data: bytes, tmp_path: Path) -> None:
    from ascendpatch.errors import ManifestError
    from ascendpatch.manifest.loader import load
    from ascendpatch.manifest.model import Manifest

    path = _fresh(tmp_path) / "m.yaml"
    path.write_bytes(data)
    try:
        assert isinstance(load(str(path)), Manifest)
    except ManifestError as exc:
        assert exc.problems and all(str(path) in p or "manifest" in p for p in exc.problems)
        assert "\n" not in str(exc)


@settings(max_examples=60, deadline=deadline(3000), suppress_health_check=FIXTURES)
@given(data=manifest_text())
def test_any_manifest_given_to_a_command_ends_in_0_1_2(data: bytes, tmp_path: Path) -> None:
    folder = _fresh(tmp_path)
    (folder / "site").mkdir()
    (folder / "m.yaml").write_bytes(data)
    _verdict("--site-packages", folder / "site", "--manifest", folder / "m.yaml", "status")


def test_an_alias_bomb_is_refused_at_once_under_a_memory_limit(tmp_path: Path) -> None:
    """A 1 KB manifest of nested aliases that expands to 10^9 values: the schema walk took
    minutes (exponential in the nesting); now one line, exit 2, under 768 MiB of address
    space. An alias that contains itself is refused the same way."""
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]
    bomb, loop = tmp_path / "bomb.yaml", tmp_path / "loop.yaml"
    bomb.write_text("\n".join(lines) + "\n")
    loop.write_text("a: &a [*a]\n")
    (tmp_path / "site").mkdir()
    for path, words in ((bomb, "aliases expand it by more than 100000 values"),
                        (loop, "an alias refers to a value that contains it")):
        run = _process("--site-packages", tmp_path / "site", "--manifest", path, "status")
        assert run.returncode == 2 and words in run.stderr, run.stderr
        assert run.stderr.count("\n") == 1


# --------------------------------------------------------------------------- patches

_PATCH_LINES = st.sampled_from([
    "--- a/demo/mod.py", "+++ b/demo/mod.py", "--- /dev/null", "+++ /dev/null",
    "diff --git a/x b/x", "@@ -1,2 +1,3 @@", "@@ -0,0 +1 @@", "@@ -1 +1 @@",
    "@@ -5,1000000 +5 @@", "@@ -99999999999999999999,1 +1 @@", " a = 1", "-b = 3", "+b = 4",
    "\\ No newline at end of file",
    "new file mode 100644", "deleted file mode 100755", "old mode 100644", "new mode 120000",
    "rename from x", "rename to ../y", "Binary files a/x and b/x differ", "GIT binary patch",
    "--- a/../../etc/passwd", "+++ b//abs", "", " ", "+", "-", "@@", "@@ -a,b +c,d @@"])


@settings(max_examples=400, deadline=deadline(1000))
@given(lines=st.lists(_PATCH_LINES | st.text(max_size=10), max_size=14),
       eol=st.sampled_from(["\n", "\r\n"]), raw=st.binary(max_size=40))
def test_any_patch_parses_or_is_one_patch_error(lines: list[str], eol: str, raw: bytes) -> None:
    """parse_patch's one documented error is InvalidInputError (PatchError): any text, bytes
    that are not UTF-8 included, parses to FilePatches or raises it with one line."""
    from ascendpatch.errors import InvalidInputError
    from ascendpatch.patchfile.diffpatch import parse_patch

    for text in (eol.join(lines) + eol, (eol.join(lines)).encode("utf-8", "surrogatepass") + raw):
        try:
            patches = parse_patch(text, origin="hostile.patch")
        except InvalidInputError as exc:
            assert "\n" not in str(exc) and str(exc)
            continue
        for patch in patches:
            assert patch.hunks is not None


# --------------------------------------------------------------------------- log lines

_LOG_LINES = st.sampled_from([
    "INFO:     Application startup complete.", "ERROR 12-01 engine core died",
    "[rank0]: RuntimeError: aclnnApplyTopKTopP not found",
    "(EngineCore pid=1) ERROR EngineCore failed to start", "WARNING VLLM_ASCEND_FOO is not set",
    "smooth quant: 4096 vectors", "\x1b[31mred\x1b[0m", "\x1b]8;;http://evil\x07link\x1b]8;;\x07",
    "\u202egnp.exe", "\r[OK] forged", "Traceback (most recent call last):", "a" * 5000, "",
    "\x00\x00", "é" * 300])


@settings(max_examples=200, deadline=deadline(2000), suppress_health_check=FIXTURES)
@given(lines=st.lists(_LOG_LINES | st.text(max_size=40), max_size=30),
       raw=st.binary(max_size=200), eol=st.sampled_from(["\n", "\r\n", "\r"]))
def test_any_log_is_triaged_and_each_line_printed_on_one_line(lines: list[str], raw: bytes,
                                                             eol: str, tmp_path: Path) -> None:
    """``logs FILE`` over any bytes: exit 0/1, every printed line one line (a server's text
    cannot start a forged [OK] line), no traceback; triage over stream_lines never raises."""
    from ascendpatch.deploy.logs import load_rules, stream_lines, triage

    log = _fresh(tmp_path) / "serve.log"
    log.write_bytes(eol.join(lines).encode("utf-8", "surrogatepass") + raw)
    result = triage(stream_lines(log), load_rules())
    assert result is not None
    run = run_cli("--color", "never", "logs", log)
    assert run.code in (0, 1) and "unexpected error" not in run.err, run.err  # (the log may
    # itself hold a "Traceback" line: it is shown, escaped, as the log's text)
    for line in run.out.splitlines():
        assert line.startswith(("[OK]", "[WARN]", "[FAIL]", "[SKIP]", "    ", "logs:")), line


# --------------------------------------------------------------------------- small ones


@settings(max_examples=300, deadline=deadline(1000))
@given(text=st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF,
                                           categories=None), max_size=40))
def test_printable_text_is_one_line_that_any_utf8_stream_takes(text: str) -> None:
    """deploy/text.printable (every line output prints goes through it): no control
    character, no newline, no lone surrogate left; strict UTF-8 always encodes it."""
    from ascendpatch.deploy.text import printable

    shown = printable(text)
    shown.encode("utf-8")  # strict: a lone surrogate would raise
    assert "\n" not in shown and "\r" not in shown and "\x1b" not in shown


@settings(max_examples=200, deadline=deadline(1000), suppress_health_check=FIXTURES)
@given(data=st.binary(max_size=200) | st.text(max_size=60).map(
    lambda t: t.encode("utf-8", "surrogatepass")))
def test_any_hosts_file_is_names_or_one_error(data: bytes, tmp_path: Path) -> None:
    """fleet-report --hosts FILE: host names (no comment, no blank) or one InvalidInputError."""
    from ascendpatch.commands.fleet_report import read_hosts
    from ascendpatch.errors import InvalidInputError

    path = _fresh(tmp_path) / "hosts.txt"
    path.write_bytes(data)
    try:
        names = read_hosts(path)
    except InvalidInputError as exc:
        assert "\n" not in str(exc) and "hosts.txt cannot be read" in str(exc)
        return
    assert all(name and name == name.strip() and "#" not in name for name in names)
