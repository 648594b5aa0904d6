"""Every command's --json output against the published schema (ascendpatch/data/*.schema.json).

The fast tier runs every command on a target built in a temp dir (commands that need the index
run their refusal or usage-error path, which prints the same envelope); the integration tier
adds the success documents of those commands on real vllm-ascend wheels.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from ascendpatch.catalog import data_root
from ascendpatch.shell import cliargs
from tests.kit import DEMO_MOD, DEMO_OTHER, DEMO_PATCH, make_dist, run_cli, wheels, write_manifest

jsonschema = pytest.importorskip("jsonschema")

DATA = Path(__file__).resolve().parent.parent / "ascendpatch" / "data"


def validator(name: str) -> Any:
    schema = json.loads((DATA / name).read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def assert_valid(doc: dict[str, Any]) -> None:
    errors = sorted(validator("output.schema.json").iter_errors(doc), key=str)
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors)
    assert doc["ok"] is (doc["exit_code"] == 0)


@pytest.fixture
def world(site: Path, tmp_path: Path) -> dict[str, Path]:
    make_dist(site, "demo", "1.0.0", {"demo/__init__.py": "", "demo/mod.py": DEMO_MOD,
                                       "demo/other.py": DEMO_OTHER})
    (tmp_path / "fix.patch").write_text(DEMO_PATCH)
    manifest = write_manifest(tmp_path / "m.yaml", [
        {"id": "demo-fix", "title": "demo fix", "kind": "diff", "distribution": "demo",
         "versions": ">=1.0", "source": "fix.patch"},
        {"id": "demo-extra", "title": "demo extra file", "kind": "file", "enabled": False,
         "distribution": "demo", "versions": ">=1.0", "source": "fix.patch",
         "targets": ["demo/extra.py"]},
    ])
    log = tmp_path / "serve.log"
    log.write_text("INFO:     Application startup complete.\n")
    return {"site": site, "manifest": manifest, "tmp": tmp_path, "log": log}


def _dead_pid() -> int:
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    return int(proc.stdout)


def _every_command(w: dict[str, Path]) -> dict[str, list[list[str]]]:
    """Command lines per command: success paths, plus refusals for those that need an index."""
    t = ["--site-packages", str(w["site"]), "--manifest", str(w["manifest"])]
    tmp = w["tmp"]
    return {
        "apply": [[*t, "apply", "--dry-run", "--diff"], [*t, "apply"], [*t, "apply"],
                  [*t, "apply", "--with", "bogus"]],
        "plan": [[*t, "plan"]],
        "status": [[*t, "status"]],
        "verify": [[*t, "verify", "--no-probes"]],
        "snapshot": [[*t, "snapshot", "-o", str(tmp / "a.json")],
                     [*t, "snapshot", "-o", "-"], [*t, "snapshot", "-o", str(tmp / "no/a.json")]],
        "audit": [[*t, "audit"]],
        "revert": [[*t, "revert", "--dry-run"], [*t, "revert"]],
        "diff": [["diff", str(tmp / "a.json"), str(tmp / "a.json")]],
        "install": [[*t, "install", "--dry-run"]],  # --site-packages: exit 2 (needs --python)
        "lock": [[*t, "lock", "-o", str(tmp / "x.lock")]],
        "sandbox": [["sandbox", str(tmp / "sbx"), "--vllm-ascend", "not-a-version"]],
        "bundle": [["bundle"]],  # usage error: DIR is missing
        "logs": [[*t, "logs", str(w["log"])]],
        "smoke": [["smoke", "--url", "http://127.0.0.1:9", "--request-timeout", "2"]],
        "check-launch": [["check-launch", "--", "vllm", "serve", str(tmp)]],
        "serve": [[*t, "serve"], [*t, "serve", "--", "vllm", "serve", str(tmp / "missing")]],
        "stop": [["stop", "--pid", str(_dead_pid())]],
        "capture": [[*t, "capture", "demo", "--id", "demo-cap",
                     "--output", str(tmp / "cap.patch")]],
        "port": [[*t, "port", "no-such-artifact", "--to", "0.18.0"]],
        "catalog-check": [[*t, "catalog-check", "1.0.0", "--offline", "--wheelhouse",
                           str(tmp)]],  # no release archive there: refused
        "fleet-report": [["fleet-report", str(tmp / "a.json"), str(tmp / "a.json")]],
        "manifests": [["manifests"]],
    }


def test_every_command_is_covered(world: dict[str, Path]) -> None:
    assert set(_every_command(world)) == {c.name for c in cliargs.COMMANDS}


def test_every_commands_json_fits_the_schema(world: dict[str, Path]) -> None:
    seen: dict[str, set[int]] = {}
    for name, lines in _every_command(world).items():
        for argv in lines:
            run = run_cli("--json", *argv)
            assert run.out.strip().startswith("{"), (argv, run.out, run.err)
            doc = run.json
            assert_valid(doc)
            assert doc["exit_code"] == run.code, argv
            seen.setdefault(name, set()).add(run.code)
    assert seen["apply"] == {0, 1, 2}  # applied, pending (--dry-run), and a refused --with
    assert seen["snapshot"] == {0, 2}  # a missing -o folder is exit 2, never 3


def test_verify_items_have_a_status_and_ok_matches_the_exit_code(world: dict[str, Path]) -> None:
    t: list[str | Path] = ["--site-packages", world["site"], "--manifest", world["manifest"]]
    doc = run_cli(*t, "verify", "--no-probes", "--json").json
    assert all(item["status"] in ("ok", "skipped", "warning", "failed") for item in doc["results"])
    status = run_cli(*t, "status", "--json")  # not applied yet: changes pending
    assert (status.code, status.json["ok"]) == (1, False)


def test_usage_errors_are_json_when_json_is_given() -> None:
    run = run_cli("apply", "--bogus", "--json")
    assert run.code == 2 and run.err == ""
    doc = run.json
    assert_valid(doc)
    assert doc["command"] == "apply" and "--bogus" in doc["error"]["message"]


def test_manifests_gives_ids_pins_and_optional_artifacts_as_fields() -> None:
    doc = run_cli("manifests", "--json").json
    assert_valid(doc)
    by_id = {item["id"]: item["data"] for item in doc["results"]}
    muse = by_id["muse-glimmer-w8a8"]
    assert muse["pins"]["vllm-ascend"] == "==0.22.1rc2"
    assert "smoothquant" in muse["optional"]
    assert {"id": "smoothquant", "kind": "dropin", "enabled": False,
            "title": "SmoothQuant W8A8 drop-in", "distribution": "vllm-ascend",
            "files": ["vllm_ascend/quantization/methods/w8a8_dynamic.py"]} in muse["artifacts"]


def test_status_lists_optional_artifacts(world: dict[str, Path]) -> None:
    t: list[str | Path] = ["--site-packages", world["site"], "--manifest", world["manifest"]]
    out = run_cli(*t, "status").out
    assert ("[SKIP] demo extra file: optional, not enabled (not-applied); enable: ascendpatch "
            f"--site-packages {world['site']} --manifest {world['manifest']} apply --with "
            "demo-extra") in out.splitlines()


def test_bundled_manifests_fit_the_published_manifest_schema() -> None:
    check = validator("manifest.schema.json")
    manifests = sorted((data_root() / "manifests").glob("*.yaml"))
    assert len(manifests) >= 5
    for path in manifests:
        errors = [e.message for e in check.iter_errors(yaml.safe_load(path.read_text()))]
        assert not errors, (path.name, errors)


def test_manifest_schema_rejects_what_the_loader_rejects(tmp_path: Path) -> None:
    check = validator("manifest.schema.json")
    bad = {"name": "Bad Name", "artifacts": [{"id": "x", "title": "t"}], "colour": "red"}
    messages = " ".join(e.message for e in check.iter_errors(bad))
    assert "'kind' is a required property" in messages
    assert "'colour' was unexpected" in messages
    assert "does not match" in messages  # the id pattern of 'name'


def test_published_manifest_schema_is_generated_from_the_code() -> None:
    proc = subprocess.run([sys.executable, "tools/make_schemas.py", "--check"],
                          cwd=DATA.parent.parent, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.integration
def test_index_commands_json_fits_the_schema(tmp_path: Path) -> None:
    """sandbox, install --dry-run, port and catalog-check on the real 0.18.0 wheel (offline)."""
    house = tmp_path / "house"
    house.mkdir()
    wheel = wheels.wheel("0.18.0")
    (house / wheel.name).symlink_to(wheel)
    offline = ["--offline", "--wheelhouse", str(house)]
    sandbox = tmp_path / "sbx"
    python = str(sandbox / "bin" / "python")
    runs = [["sandbox", str(sandbox), *offline],
            ["sandbox", str(sandbox), "--vllm-ascend", "0.23.0", *offline],  # refused: 1
            ["--python", python, "install", "--dry-run", *offline],
            ["--python", python, "lock", "-o", "-", *offline],  # no pip-tools offline: 1
            ["port", "sampler-topk-topp-fallback", "--to", "0.18.0", *offline],
            ["catalog-check", "0.18.0", *offline]]
    codes = []
    for argv in runs:
        run = run_cli(*argv, "--json")
        assert_valid(run.json)
        codes.append(run.code)
    assert codes[0] == 0 and codes[1] == 1 and codes[-1] == 0
