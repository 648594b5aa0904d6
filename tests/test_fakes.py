"""The seam fakes of tests/kit/fakes.py: what they refuse, and (integration tier) that the real
seams still answer what the fakes were recorded from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ascendpatch.env import inscript, introspection, pipadapter, target
from ascendpatch.env.pipadapter import Source
from tests.kit import make_dist
from tests.kit.fakes import (
    PROBE_CASES,
    RECORDED,
    FakeInscript,
    FakePip,
    introspection_doc,
    probe_key,
    real_venv,
    record_introspection,
    record_pip_report,
    record_probe,
    recorded_pip_report,
)


def test_a_script_nobody_answered_fails_loudly(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeInscript().install(monkeypatch)
    python, _ = fake.target(tmp_path / "venv")
    with pytest.raises(AssertionError, match="no answer for the script"):
        inscript.run_json(python, "print('{}')")
    with pytest.raises(inscript.ScriptError, match="does not exist"):
        inscript.run_json(tmp_path / "nope", "print('{}')")


def test_calls_are_recorded_with_args_env_and_timeout(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeInscript().install(monkeypatch)
    python, _ = fake.target(tmp_path / "venv")
    fake.answer("probe", {"ok": 1})
    fake.answer("broken", inscript.ScriptTimeout("did not answer"))
    assert inscript.run_json(python, "probe", ["a"], 7, {"X": "1"}) == {"ok": 1}
    with pytest.raises(inscript.ScriptTimeout):
        inscript.run_json(python, "broken")
    (probe, broken) = fake.calls
    assert (probe.args, probe.env, probe.timeout) == (("a",), {"X": "1"}, 7)
    assert broken.timeout == 120.0


def test_the_fake_target_reads_as_a_real_one(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeInscript().install(monkeypatch)
    python, site = fake.target(tmp_path / "venv")
    make_dist(site, "demo", "1.0", {"demo/__init__.py": ""})
    tgt = target.from_python(python)
    assert tgt.python == python and tgt.root == site
    demo = tgt.get("demo")
    assert demo is not None and demo.version == "1.0"


def test_fake_pip_records_the_command_and_writes_the_recorded_report(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    FakeInscript().install(monkeypatch).target(tmp_path / "venv")
    pip = FakePip(report=recorded_pip_report()).install(monkeypatch)
    tgt = target.from_python(tmp_path / "venv" / "bin" / "python")
    house = tmp_path / "house"
    house.mkdir()
    report = pipadapter.dry_run_report(tgt, ["tiny-dep==1.0"], Source(house, offline=True))
    assert report == recorded_pip_report()
    assert pip.verbs() == ["install"]
    assert {"--dry-run", "--no-index", "tiny-dep==1.0"} <= set(pip.calls[0].cmd)
    failing = FakePip(returncode=1, stderr="ERROR: No matching distribution found for x\n")
    failing.install(monkeypatch)
    with pytest.raises(pipadapter.PipError, match="no release on the index satisfies x"):
        pipadapter.install(tgt, ["x"], Source(house, offline=True))


# ------------------------------------------------ the reference: the real seams, real processes


@pytest.mark.integration
@pytest.mark.parametrize(("vllm_ascend", "body"), PROBE_CASES,
                         ids=[probe_key(v, b) for v, b in PROBE_CASES])
def test_the_real_probe_still_answers_what_was_recorded(tmp_path: Path, vllm_ascend: str,
                                                        body: str) -> None:
    recorded = json.loads((RECORDED / "probes.json").read_text())[probe_key(vllm_ascend, body)]
    assert record_probe(tmp_path, vllm_ascend, body) == recorded, \
        "the probe changed: python -m tests.kit.fakes records it again"


@pytest.mark.integration
def test_the_real_introspection_reads_as_the_fake_one(tmp_path: Path) -> None:
    python, site = real_venv(tmp_path / "venv")
    make_dist(site, "demo", "1.0", {"demo/__init__.py": ""})
    real = inscript.run_json(python, introspection.script())
    fake = introspection_doc(python, site)
    assert real.keys() == fake.keys()
    for key in ("site_packages", "distributions", "executable", "prefix"):
        assert real[key] == fake[key], key
    recorded = json.loads((RECORDED / "introspect.json").read_text())
    assert record_introspection(tmp_path / "again").keys() == recorded.keys()


@pytest.mark.integration
def test_real_pip_still_reports_what_was_recorded(tmp_path: Path) -> None:
    real, recorded = record_pip_report(tmp_path), recorded_pip_report()
    real.pop("pip_version")
    recorded.pop("pip_version")
    assert real == recorded
