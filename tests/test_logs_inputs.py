"""What `ascendpatch logs` reads: standard input, a site's own rules file (validated like a
manifest), big files (a progress bar), and hostile bytes of any kind (exit 0, 1 or 2, never a
traceback)."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ascendpatch import progress
from ascendpatch.deploy import logread
from ascendpatch.deploy.logrules import RULES_FILE, Rule, literals, load_rules, yaml_doc
from ascendpatch.manifest import schema
from tests.kit import REPO, TRACEBACK, run_cli

STARTED = "INFO:     Application startup complete."
KV = ("ERROR 11-30 05:00:00 [core.py:866] ValueError: No available memory for the cache blocks. "
      "Try increasing `gpu_memory_utilization` when initializing the engine.")


def _log(tmp_path: Path, lines: list[str], name: str = "serve.log") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_dash_reads_standard_input() -> None:
    proc = subprocess.run([sys.executable, "-m", "ascendpatch", "logs", "-"],
                          input=f"{KV}\n{STARTED}\n", capture_output=True, text=True,
                          check=False, timeout=120, cwd=REPO)
    assert proc.returncode == 1, proc.stderr
    assert "-:1: kv-cache-no-memory" in proc.stdout


def test_a_site_rules_file_adds_its_own_rules(tmp_path: Path) -> None:
    rules = tmp_path / "site.yaml"
    rules.write_text(yaml.safe_dump({
        "faults": [{"id": "our-nfs-stale", "pattern": "Stale file handle",
                    "fix": "remount /models (our NFS drops handles after failover)"}],
        "benign": [{"id": "our-probe", "pattern": "probe from 10\\.0\\.0\\.1",
                    "why": "the load balancer's health probe"}]}))
    lines = ["OSError: [Errno 116] Stale file handle", "WARNING x probe from 10.0.0.1", STARTED]
    result = run_cli("logs", "--rules", rules, _log(tmp_path, lines))
    assert result.code == 1
    assert "our-nfs-stale" in result.out and "remount /models" in result.out
    assert "the load balancer's health probe" in result.out


def test_a_rules_file_with_wrong_types_is_refused_with_every_problem(tmp_path: Path) -> None:
    rules = tmp_path / "site.yaml"
    rules.write_text(yaml.safe_dump({
        "faults": [{"id": "a", "pattern": 7}, {"pattern": "x"},
                   {"id": "b", "pattern": "x", "versions": "not a specifier"}],
        "benign": {"id": "c"}, "typo": []}))
    result = run_cli("logs", "--rules", rules, _log(tmp_path, [STARTED]))
    assert result.code == 2
    text = result.out + result.err
    for where in ("faults[0].pattern", "faults[1]", "faults[2].versions", "benign", "typo"):
        assert where in text, text
    assert TRACEBACK not in text


def test_a_rules_file_with_a_bad_pattern_is_refused(tmp_path: Path) -> None:
    rules = tmp_path / "site.yaml"
    rules.write_text("faults:\n  - {id: a, pattern: '(unclosed'}\n")
    result = run_cli("logs", "--rules", rules, _log(tmp_path, [STARTED]))
    assert result.code == 2 and "faults[0].pattern: not a regular expression" in \
        result.out + result.err


def test_a_missing_or_malformed_rules_file_is_invalid_input(tmp_path: Path) -> None:
    log = _log(tmp_path, [STARTED])
    assert run_cli("logs", "--rules", tmp_path / "absent.yaml", log).code == 2
    broken = tmp_path / "broken.yaml"
    broken.write_text("faults: [\n")
    assert run_cli("logs", "--rules", broken, log).code == 2


def test_the_bundled_rules_fit_the_rules_file_format_and_cite_threads() -> None:
    doc = yaml_doc()
    assert schema.validate(doc, RULES_FILE) == []
    sources = [str(r["source"]) for kind in doc.values() for r in kind if "source" in r]
    assert len(sources) >= 25
    for source in sources:
        assert all(url.strip().startswith("https://github.com/") for url in source.split(";"))


def test_bytes_that_are_not_utf8_are_read(tmp_path: Path) -> None:
    path = tmp_path / "serve.log"
    path.write_bytes(b"\xff\xfe WARNING \x80\x81 odd\n" + KV.encode() + b"\n" + STARTED.encode())
    result = run_cli("logs", path)
    assert result.code == 1 and "serve.log:2: kv-cache-no-memory" in result.out


class _Recorder:
    def __init__(self) -> None:
        self.tasks: list[tuple[str, int | None]] = []
        self.done = 0

    @contextmanager
    def task(self, label: str, total: int | None) -> Iterator[progress.Advance]:
        self.tasks.append((label, total))

        def advance(count: int) -> None:
            self.done += count

        yield advance

    def command(self, argv: object) -> None:
        del argv

    def output(self, text: str) -> None:
        del text

    def item(self, item: object, show_diff: bool) -> None:
        del item, show_diff

    def notice(self, text: str) -> None:
        del text

    def detail(self, text: str) -> None:
        del text


def test_a_big_log_reports_its_progress(tmp_path: Path) -> None:
    path = tmp_path / "big.log"
    line = b"INFO 11-30 05:00:00 [loggers.py:123] Engine 000: Avg prompt throughput: 0.0\n"
    path.write_bytes(line * (logread.SPINNER_BYTES // len(line) + 10))
    recorder = _Recorder()
    with progress.reporting(recorder):
        count = sum(1 for _ in logread.stream_lines(path))
    assert recorder.tasks == [("reading big.log", path.stat().st_size)]
    assert recorder.done == path.stat().st_size and count > 0
    small = _log(tmp_path, [STARTED], "small.log")
    with progress.reporting(recorder):
        list(logread.stream_lines(small))
    assert len(recorder.tasks) == 1  # a small log: no bar


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.one_of(st.binary(max_size=300), st.sampled_from([
    b"Traceback (most recent call last):", b'  File "x.py", line 1, in f', b"    ^^^^",
    b"(EngineCore_DP0 pid=1) ERROR 11-30 05:00:00 [core.py:1] ", b"[rank0]: KeyError: 'a.b'",
    b"WARNING:root:Warning: Failed to register custom ops, all custom ops will be disabled",
    b"vLLM API server version 0.x", b"\x00\xff\x1b]0;t\x07"])), max_size=40))
def test_any_bytes_give_a_verdict_never_a_traceback(tmp_path: Path, chunks: list[bytes]) -> None:
    path = tmp_path / "fuzz.log"
    path.write_bytes(b"\n".join(chunks))
    result = run_cli("logs", path)
    assert result.code in (0, 1, 2), result.out + result.err
    assert TRACEBACK not in result.err


def test_the_substring_screen_never_hides_a_match() -> None:
    """Lines are screened with plain substrings before any pattern runs; every corpus line a
    bundled pattern matches must hold one of the substrings taken from that pattern."""
    rules = [r for r in load_rules() if r.kind != "marker"]
    lines = [line for path in sorted((REPO / "tests" / "data" / "logs").glob("*.log"))
             for line in path.read_text(encoding="utf-8").splitlines()]
    for rule in rules:
        found = literals(rule)
        for line in lines:
            if found is not None and rule.pattern.search(line):
                assert any(lit in line for lit in found), (rule.id, line)


def test_patterns_that_promise_no_substring_are_always_searched() -> None:
    def rule(pattern: str) -> Rule:
        return Rule("r", "fault", re.compile(pattern), "")

    assert literals(rule("(?i)out of memory")) is None
    assert literals(rule("ab|abcdef")) is None  # a branch too short to screen with
    assert literals(rule("colou?r disabled")) == ("r disabled",)  # 'u' is optional
    assert literals(rule(r"lib(?:a|b)\.so: cannot")) == (".so: cannot",)


def test_a_named_target_that_cannot_be_used_is_exit_2_even_when_no_rule_needs_it(
        tmp_path: Path) -> None:
    """logs asks for the target only when a rule needs the installed vllm-ascend, so on
    f9291d6 `logs --python /wrong/python serve.log` read the log without it, said nothing of
    the flag and exited 0 on a clean log: a flag the user gave was ignored. A named
    target is checked as for every other command; an unnamed one stays optional."""
    log = _log(tmp_path, ["INFO:     Application startup complete."])
    missing = tmp_path / "nowhere" / "bin" / "python"
    result = run_cli("--python", missing, "logs", log)
    assert result.code == 2 and f"{missing} does not exist" in result.err, result
    assert result.out == "", result
    assert run_cli("logs", log).code == 0
