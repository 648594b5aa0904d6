"""Help, option names and the refusals of issue 13: what used to be accepted silently."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
from pathlib import Path

import pytest

from ascendpatch.shell.cli import build_parser
from tests.kit import REPO, build_wheel, make_dist, run_cli, write_manifest


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def test_every_subcommand_has_a_description_and_an_example() -> None:
    for name, sub in _subparsers().items():
        assert sub.description and len(sub.description) > 30, name
        assert sub.epilog and sub.epilog.startswith("example:\n  ascendpatch "), name
        assert f" {name}" in sub.epilog, name  # the example runs this very command


def test_every_option_has_help_text() -> None:
    missing = [f"{name} {'/'.join(a.option_strings) or a.dest}"
               for name, sub in _subparsers().items() for a in sub._actions
               if not a.help and not isinstance(a, argparse._HelpAction)]
    assert not missing, missing


def test_timeouts_share_one_name_pattern_and_old_spellings_still_work() -> None:
    timeouts = sorted({o for sub in _subparsers().values() for a in sub._actions
                       for o in a.option_strings if "timeout" in o or o == "--grace"})
    assert timeouts == ["--grace", "--grace-timeout", "--lock-timeout", "--probe-timeout",
                        "--ready-timeout", "--request-timeout", "--timeout"]
    parser = build_parser()
    assert parser.parse_args(["stop", "--grace", "3"]).grace == 3.0
    assert parser.parse_args(["stop", "--grace-timeout", "4"]).grace == 4.0
    assert parser.parse_args(["smoke", "--url", "u", "--timeout", "5"]).timeout == 5.0
    assert parser.parse_args(["smoke", "--url", "u", "--request-timeout", "6"]).timeout == 6.0


def test_force_help_says_what_force_does() -> None:
    text = _subparsers()["apply"].format_help()
    assert "backed up first" in " ".join(text.split())
    assert "A diff conflict (hunks match neither state) is never forced" in " ".join(text.split())


def test_apply_with_an_unknown_artifact_is_refused(site: Path, tmp_path: Path) -> None:
    make_dist(site, "demo", "1.0.0", {"demo/__init__.py": ""})
    manifest = write_manifest(tmp_path / "m.yaml", [])
    before = sorted(p.name for p in site.rglob("*"))
    run = run_cli("--site-packages", site, "--manifest", manifest, "apply", "--with", "bogus")
    assert run.code == 2
    assert "[FAIL] --with bogus: no such artifact in manifest test" in run.err
    assert sorted(p.name for p in site.rglob("*")) == before
    log = tmp_path / "serve.log"
    log.write_text("INFO:     Application startup complete.\n")
    logs = run_cli("--manifest", manifest, "logs", log, "--with", "bogus")
    assert logs.code == 2 and "--with bogus: no such artifact" in logs.err


def test_python_that_is_not_python_says_so() -> None:
    run = run_cli("--python", "/bin/ls", "status")
    assert run.code == 2
    assert run.err.startswith("[FAIL] /bin/ls is not a Python interpreter; fix: ")
    assert len(run.err) < 300  # not the 4 KB introspection script


def test_output_parent_folder_missing_is_exit_2(site: Path, tmp_path: Path) -> None:
    run = run_cli("--site-packages", site, "snapshot", "-o", tmp_path / "nope" / "s.json")
    assert run.code == 2 and "mkdir -p" in run.err
    assert not (tmp_path / "nope").exists()


@pytest.mark.parametrize("argv", [["catalog-check", "--markdown", "{}"],
                                  ["capture", "demo", "--output", "{}"]])
def test_other_output_files_in_a_missing_folder_are_exit_2(argv: list[str],
                                                          tmp_path: Path) -> None:
    target = str(tmp_path / "nope" / "out")
    run = run_cli(*[a.format(target) for a in argv])
    assert run.code == 2 and "does not exist; create it first" in run.err


def test_output_dash_is_stdout(site: Path, tmp_path: Path) -> None:
    make_dist(site, "demo", "1.0.0", {"demo/__init__.py": ""})
    with_file = run_cli("--site-packages", site, "snapshot", "-o", "-")
    assert with_file.code == 0
    assert json.loads(with_file.out)["distributions"]
    assert with_file.err.startswith("[OK] snapshot of ") and "written to stdout" in with_file.err
    assert not (Path.cwd() / "-").exists()


def _fake_sandbox(folder: Path, version: str) -> None:
    site = folder / "lib" / "python3.11" / "site-packages"
    make_dist(site, "vllm-ascend", version, {"vllm_ascend/__init__.py": ""})
    (folder / "ascendpatch-sandbox.json").write_text(json.dumps(
        {"kind": "ascendpatch-sandbox", "vllm_ascend": version, "standins": []}))


def test_sandbox_at_another_version_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "sbx"
    _fake_sandbox(folder, "0.23.0")
    same = run_cli("sandbox", folder, "--vllm-ascend", "0.23.0")
    assert same.code == 0 and "already exists (vllm-ascend 0.23.0" in same.out
    other = run_cli("sandbox", folder)  # the default, 0.18.0
    assert other.code == 1
    assert other.err.startswith(f"[FAIL] sandbox {folder} holds vllm-ascend 0.23.0, not 0.18.0")
    assert "--vllm-ascend 0.23.0" in other.err


def test_sandbox_of_a_release_without_wheel_lists_the_releases(tmp_path: Path) -> None:
    house = tmp_path / "house"
    for version in ("0.11.0", "0.18.0"):
        build_wheel(house, "vllm-ascend", version)
    run = run_cli("sandbox", tmp_path / "sbx", "--vllm-ascend", "9.9.9", "--offline",
                  "--wheelhouse", house)
    assert run.code == 1
    assert "releases with wheels: 0.11.0, 0.18.0" in run.err
    assert not (tmp_path / "sbx").exists()
    bad = run_cli("sandbox", tmp_path / "sbx", "--vllm-ascend", "latest")
    assert bad.code == 2 and "is not a version" in bad.err


def _fake_install(home: Path, prefix: Path) -> Path:
    launcher = prefix / "venv" / "bin" / "ascendpatch"
    launcher.parent.mkdir(parents=True)
    launcher.write_text("#!/bin/sh\n")
    link = home / ".local" / "bin" / "ascendpatch"
    link.parent.mkdir(parents=True)
    link.symlink_to(launcher)
    return link


def _install_sh(*args: str, home: Path, prefix: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(home), "ASCENDPATCH_PREFIX": str(prefix)}
    env.pop("ASCENDPATCH_BIN_DIR", None)
    return subprocess.run(["bash", str(REPO / "install.sh"), *args], capture_output=True,
                          text=True, env=env, timeout=60, check=False, stdin=subprocess.DEVNULL)


def test_install_sh_uninstall_removes_the_venv_and_its_link(tmp_path: Path) -> None:
    home, prefix = tmp_path / "home", tmp_path / "prefix"
    link = _fake_install(home, prefix)
    done = _install_sh("--uninstall", home=home, prefix=prefix)
    assert done.returncode == 0, done.stderr
    assert f"[OK] removed the launcher {link}" in done.stdout
    assert not link.is_symlink() and not (prefix / "venv").exists()
    again = _install_sh("--uninstall", home=home, prefix=prefix)
    assert again.returncode == 0 and "already uninstalled" in again.stdout


def test_install_sh_uninstall_leaves_a_foreign_launcher_alone(tmp_path: Path) -> None:
    home, prefix = tmp_path / "home", tmp_path / "prefix"
    link = _fake_install(home, prefix)
    link.unlink()
    link.write_text("#!/bin/sh\necho someone else's\n")
    done = _install_sh("--uninstall", home=home, prefix=prefix)
    assert done.returncode == 0
    assert "is not ascendpatch's link" in done.stdout and link.is_file()


def test_install_sh_uninstall_of_another_prefix_keeps_the_default_install(tmp_path: Path) \
        -> None:
    """89ee836: `--uninstall --prefix B` deleted the default install's completion file (any
    file with "ascendpatch" in it). Each install records what it wrote; B wrote nothing."""
    home = tmp_path / "home"
    default = home / ".local" / "share" / "ascendpatch"
    _fake_install(home, default)
    completion = home / ".local" / "share" / "bash-completion" / "completions" / "ascendpatch"
    completion.parent.mkdir(parents=True)
    completion.write_text("# bash completion for ascendpatch\n")
    (default / "installed-files").write_text(f"completion {completion}\n")
    other = _install_sh("--uninstall", "--prefix", str(tmp_path / "B"), home=home,
                        prefix=default)
    assert other.returncode == 0, other.stderr
    assert completion.is_file() and (home / ".local" / "bin" / "ascendpatch").is_symlink()
    assert f"left the completion file {completion}: the install in {tmp_path}/B did not" \
           in other.stdout
    own = _install_sh("--uninstall", home=home, prefix=default)
    assert own.returncode == 0, own.stderr
    assert f"[OK] removed the completion file {completion}" in own.stdout
    assert not completion.exists() and not default.exists()


def test_the_sandbox_folder_is_ignored_by_git() -> None:
    """`bash install.sh --sandbox` in a checkout builds ./ascendpatch-sandbox: not a change."""
    done = subprocess.run(["git", "-C", str(REPO), "check-ignore", "-q",
                           "ascendpatch-sandbox/bin/python"], check=False)
    assert done.returncode == 0


@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_completion_comes_from_the_parser(shell: str) -> None:
    pytest.importorskip("shtab")
    from ascendpatch.shell.completion import script

    text = script(shell)
    for word in ("catalog-check", "--vllm-ascend", "--grace-timeout", "--with"):
        assert word in text
