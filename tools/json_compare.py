"""Every offline command's output on a sandbox, normalised, for before/after comparisons.

    python tools/json_compare.py OUT_DIR [--work DIR]     run every command, write OUT_DIR
    python tools/json_compare.py --compare A B            diff two such folders (exit 1 if any)

A refactoring that promises "no user-visible change" is checked by running this on the tree
before and after it and comparing the two folders. It builds a sandbox target (``ascendpatch
sandbox --offline``, the real vllm-ascend wheel from the test cache the integration tier fills,
``$ASCENDPATCH_TEST_CACHE`` or ``~/.cache/ascendpatch-test``), then runs each command twice on a
fresh copy of it: once with ``--json`` and once as plain text, with a fixed HOME, fixed paths
and a fixed environment. What legitimately differs between two runs (the work folder, the
checkout, the venv, timestamps, durations, pids, the package's version) is replaced by
placeholders, so two runs on the same tree give identical folders.

OUT_DIR gets, per invocation, ``NN-name.json`` (argv, exit code, the parsed ``--json`` document,
stderr) and ``NN-name.txt`` (the plain-text run: exit code, stdout, stderr), plus
``exit-codes.json`` with both exit codes of every invocation. Run it with the interpreter of the
venv the tree is installed in (it starts ``sys.executable -m ascendpatch``).
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SANDBOX_RELEASE = "0.18.0"
OTHER_RELEASE = "0.23.0"
STACK = f"vllm-ascend-{SANDBOX_RELEASE}"  # a bundled stack manifest: lock and install pin it
# One work folder per venv, so two developers' runs never share it (it is normalised away).
DEFAULT_WORK = Path(tempfile.gettempdir()) / f"ascendpatch-json-compare-{Path(sys.prefix).name}"
# One wheelhouse for every run, at a fixed path: pip records the wheel's URL in the sandbox's
# direct_url.json, which snapshot hashes, so its path must not differ between two runs.
WHEELHOUSE = Path(tempfile.gettempdir()) / "ascendpatch-json-compare-wheelhouse"
CACHE = Path(os.environ.get("ASCENDPATCH_TEST_CACHE",
                            Path.home() / ".cache" / "ascendpatch-test"))
MODES = ("json", "text")
# Files the commands write (besides stdout), kept normalised as ``written-MODE-NAME``.
WRITTEN = ("snap-before.json", "snap-after.json", "fleet.html", "my-fix.patch", "matrix.md")

ISO_TIME = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?")
STAMP = re.compile(r"\b\d{8}[T-]\d{6}(?:[.-]\d+)?Z?\b")  # 20261201T105100 / 20261201-105100
DURATION = re.compile(r"\b\d+(?:\.\d+)?\s?(?:ms|s|sec|seconds)\b")
# Keys whose values are times, durations or pids in every document.
VOLATILE_KEYS = re.compile(r"(^|_)(time|timestamp|started|finished|created|at|when|date|"
                           r"duration|duration_s|elapsed|elapsed_s|seconds|took|pid|pids)$")


@dataclass
class Step:
    """One invocation: a name, argv after ``ascendpatch``, and what it needs prepared."""

    name: str
    argv: Callable[[Context], list[str]]
    prepare: Callable[[Context], None] | None = None
    inside: Sequence[str] = ()  # a command line that runs ascendpatch's (appended) argv


@dataclass
class Context:
    work: Path
    repo: Path

    @property
    def home(self) -> Path:
        return self.work / "home"

    @property
    def sandbox(self) -> Path:
        return self.work / "sandbox"

    @property
    def python(self) -> Path:
        return self.sandbox / "bin" / "python"

    @property
    def wheelhouse(self) -> Path:
        return WHEELHOUSE

    @property
    def files(self) -> Path:
        return self.work / "files"

    def env(self) -> dict[str, str]:
        keep = {k: v for k, v in os.environ.items()
                if k in ("PATH", "LANG", "LC_ALL", "ASCENDPATCH_TEST_CACHE")}
        return {**keep, "HOME": str(self.home), "XDG_CACHE_HOME": str(self.home / ".cache"),
                "ASCENDPATCH_LOG_DIR": str(self.home / "logs"),
                "ASCENDPATCH_CACHE": str(self.home / ".cache" / "ascendpatch"),
                "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1",
                "PIP_NO_INDEX": "1", "NO_COLOR": "1", "TERM": "dumb", "COLUMNS": "100",
                "TZ": "UTC", "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"}


def cached_wheel(version: str) -> Path:
    found = sorted((CACHE / "wheels").glob(f"vllm_ascend-{version}-*.whl"))
    if not found:
        raise SystemExit(f"no cached wheel of vllm-ascend {version} in {CACHE / 'wheels'}: run "
                         "the integration tier once (or `pip download --no-deps "
                         f"vllm-ascend=={version} -d {CACHE / 'wheels'}`)")
    return found[0]


def ascendpatch(ctx: Context, argv: Sequence[str], inside: Sequence[str] = (),
                timeout: float = 600) -> tuple[int, str, str]:
    proc = subprocess.run([*inside, sys.executable, "-m", "ascendpatch", *argv],
                          capture_output=True,
                          text=True, env=ctx.env(), cwd=ctx.work, timeout=timeout, check=False,
                          stdin=subprocess.DEVNULL)
    return proc.returncode, proc.stdout, proc.stderr


def fill_wheelhouse() -> None:
    """Copied in once, each wheel atomically: runs of several developers share the folder."""
    WHEELHOUSE.mkdir(exist_ok=True)
    for version in (SANDBOX_RELEASE, OTHER_RELEASE):
        wheel = cached_wheel(version)
        if not (WHEELHOUSE / wheel.name).exists():
            partial = WHEELHOUSE / f".{wheel.name}.{os.getpid()}"
            shutil.copy(wheel, partial)
            os.replace(partial, WHEELHOUSE / wheel.name)


def sandbox_argv(ctx: Context) -> list[str]:
    return ["sandbox", str(ctx.sandbox), "--vllm-ascend", SANDBOX_RELEASE, "--offline",
            "--wheelhouse", str(ctx.wheelhouse)]


def build(ctx: Context, out: Path) -> tuple[Path, dict[str, int]]:
    """The sandbox, built once per mode (its creation is ``00-sandbox``); the ``--json`` one is
    kept pristine at ``work/pristine`` (a venv only works at the path it was built at, so every
    mode then runs on a copy moved back to ``work/sandbox``)."""
    if ctx.work.exists():
        shutil.rmtree(ctx.work)
    ctx.work.mkdir(parents=True)
    fill_wheelhouse()
    codes: dict[str, int] = {}
    for mode in reversed(MODES):
        ctx.home.mkdir()
        code = codes[mode] = record(ctx, mode, "00-sandbox", sandbox_argv(ctx), out)
        if code != 0:
            raise SystemExit(f"sandbox failed ({code}): see {out}/00-sandbox.*")
        shutil.rmtree(ctx.home)
        if mode != "json":
            shutil.rmtree(ctx.sandbox)
    pristine = ctx.work / "pristine"
    ctx.sandbox.rename(pristine)
    return pristine, codes


def write_inputs(ctx: Context) -> None:
    """The small files the read-only commands look at."""
    ctx.files.mkdir()
    (ctx.files / "serve.log").write_text("\n".join([
        "WARNING 11-30 05:00:02 [envs.py:2087] Unknown vLLM environment variable detected: "
        "VLLM_X",
        "WARNING 11-30 05:00:11 [omni.py:12] vllm-omni 0.25.0 version mismatch with vllm 0.25.1",
        "ImportError: libhccl.so: cannot open shared object file: No such file or directory",
        "something nobody has seen before",
        "INFO:     Application startup complete.", ""]))
    model = ctx.files / "Muse-Glimmer-30B-w8a8"
    model.mkdir()
    (model / "quant_model_description.json").write_text('{"model_quant_type": "W8A8"}')
    (model / "config.json").write_text(json.dumps(
        {"architectures": ["MuseGlimmerForConditionalGeneration"],
         "vision_config": {"hidden_size": 1152}}))
    (ctx.files / "deploy.yaml").write_text(
        "stage_args:\n- engine_args: {model_stage: talker}\n  token2wav_n_timesteps: 3\n"
        "  default_sampling_params: {repetition_penalty: 1.2}\n")
    (ctx.files / "hosts.txt").write_text("host-a\nhost-b\nhost-c\n")


# ``stop`` looks at every process of the machine for vLLM leftovers, which other people's test
# runs do have: it runs in a PID namespace of its own (with its own /proc), where the process it
# stops, started there by ``setsid sleep``, is always PID 2 and nothing else is running.
ALONE = ("unshare", "--pid", "--fork", "--mount-proc", "sh", "-c",
         'setsid sleep 300 & "$@" --pid $!', "sh")


def snapshot_to(name: str) -> Callable[[Context], list[str]]:
    return lambda c: ["--python", str(c.python), "snapshot", "-o", str(c.work / name)]


def fleet_folder(ctx: Context) -> None:
    fleet = ctx.work / "fleet"
    fleet.mkdir(exist_ok=True)
    shutil.copy(ctx.work / "snap-before.json", fleet / "host-a.json")
    shutil.copy(ctx.work / "snap-before.json", fleet / "host-b.json")
    shutil.copy(ctx.work / "snap-after.json", fleet / "host-c.json")


def on_target(*argv: str) -> Callable[[Context], list[str]]:
    return lambda c: ["--python", str(c.python), *argv]


def steps() -> list[Step]:
    """The sequence, in order: the state each command sees depends on the ones before it."""
    house = ["--offline", "--wheelhouse"]
    return [
        Step("sandbox-again", sandbox_argv),
        Step("manifests", lambda c: ["manifests"]),
        Step("status-fresh", on_target("status")),
        Step("plan", on_target("plan")),
        Step("snapshot-before", snapshot_to("snap-before.json")),
        Step("apply-dry-run", on_target("apply", "--dry-run")),
        Step("apply-dry-run-diff", on_target("apply", "--dry-run", "--diff")),
        Step("apply", on_target("apply")),
        Step("apply-again", on_target("apply")),
        Step("status-applied", on_target("status")),
        Step("plan-applied", on_target("plan")),
        Step("verify-no-probes", on_target("verify", "--no-probes")),
        Step("verify", on_target("verify")),
        Step("audit", on_target("audit", "--workers", "1")),
        Step("audit-baseline", lambda c: ["--python", str(c.python), "audit", "--workers", "1",
                                          "--baseline", str(c.work / "snap-before.json")]),
        Step("snapshot-stdout", on_target("snapshot", "-o", "-")),
        Step("snapshot-after", snapshot_to("snap-after.json")),
        Step("diff", lambda c: ["diff", str(c.work / "snap-before.json"),
                                str(c.work / "snap-after.json")]),
        Step("diff-same", lambda c: ["diff", str(c.work / "snap-before.json"),
                                     str(c.work / "snap-before.json")]),
        Step("fleet-report", lambda c: ["fleet-report", str(c.work / "fleet"), "--hosts",
                                        str(c.files / "hosts.txt"), "-o",
                                        str(c.work / "fleet.html")], prepare=fleet_folder),
        Step("install-dry-run", lambda c: ["--python", str(c.python), "install", "--dry-run",
                                           *house, str(c.wheelhouse)]),
        Step("revert-dry-run", on_target("revert", "--dry-run")),
        Step("revert", on_target("revert")),
        Step("revert-again", on_target("revert")),
        Step("status-reverted", on_target("status")),
        Step("logs", lambda c: ["logs", str(c.files / "serve.log")]),
        Step("check-launch", lambda c: ["--python", str(c.python), "check-launch", "--", "vllm",
                                        "serve", str(c.files / "Muse-Glimmer-30B-w8a8"),
                                        "--port", "8199"]),
        Step("check-launch-config", lambda c: ["check-launch", "--config",
                                               str(c.files / "deploy.yaml")]),
        Step("catalog-check", lambda c: ["catalog-check", SANDBOX_RELEASE, OTHER_RELEASE,
                                         *house, str(c.wheelhouse)]),
        Step("port", lambda c: ["port", "sampler-topk-topp-fallback", "--to", OTHER_RELEASE,
                                *house, str(c.wheelhouse)]),
        Step("capture-unedited", lambda c: ["--python", str(c.python), "capture",
                                            "vllm-ascend", "--id", "my-fix", "--output",
                                            str(c.work / "my-fix.patch"), *house,
                                            str(c.wheelhouse)]),
        Step("stop-pid", lambda c: ["stop", "--grace-timeout", "5"], inside=ALONE),
        Step("smoke-refused", lambda c: ["smoke", "--url", "http://127.0.0.1:9",
                                         "--model", "m", "--request-timeout", "2"]),
        Step("unknown-artifact", on_target("apply", "no-such-artifact")),
        Step("diff-missing-file", lambda c: ["diff", str(c.work / "nope.json"),
                                             str(c.work / "snap-after.json")]),
        Step("status-quiet", on_target("-q", "status")),
        Step("lock-offline", lambda c: ["--python", str(c.python), "lock", "-o", "-", *house,
                                        str(c.wheelhouse)]),
        Step("lock-stack-offline", lambda c: ["--python", str(c.python), "--manifest", STACK,
                                              "lock", "-o", "-", *house, str(c.wheelhouse)]),
        Step("install-stack-dry-run", lambda c: ["--python", str(c.python), "--manifest",
                                                 STACK, "install", "--dry-run", *house,
                                                 str(c.wheelhouse)]),
        Step("install-offline", lambda c: ["--python", str(c.python), "install", *house,
                                           str(c.wheelhouse)]),
        Step("catalog-check-markdown", lambda c: ["catalog-check", SANDBOX_RELEASE, *house,
                                                  str(c.wheelhouse), "--markdown",
                                                  str(c.work / "matrix.md")]),
        Step("capture-edited", lambda c: ["--python", str(c.python), "capture", "vllm-ascend",
                                          "--id", "my-fix", "--output",
                                          str(c.work / "my-fix.patch"), *house,
                                          str(c.wheelhouse)], prepare=edit_sampler),
        Step("audit-edited", on_target("audit", "--workers", "1")),
    ]


def edit_sampler(ctx: Context) -> None:
    """A hand edit for ``capture`` to turn into a patch (and ``audit`` to find)."""
    sampler = next((ctx.sandbox / "lib").glob("python*/site-packages/vllm_ascend/sample/"
                                              "sampler.py"))
    sampler.write_text(sampler.read_text() + "\n# edited by hand\n")


def replacements(ctx: Context) -> list[tuple[str, str]]:
    """Literal strings to replace, longest first (a path inside another is replaced whole)."""
    import ascendpatch

    pairs = [(str(ctx.work), "<WORK>"), (str(WHEELHOUSE), "<WHEELHOUSE>"),
             (str(ctx.repo), "<REPO>"), (sys.prefix, "<VENV>"),
             (str(CACHE), "<TEST-CACHE>"), (str(Path.home()), "<REAL-HOME>")]
    pairs = [(old, new) for old, new in pairs if old and old != "/"]
    pairs.sort(key=lambda pair: -len(pair[0]))
    version = getattr(ascendpatch, "__version__", "")
    return pairs + ([(f"ascendpatch {version}", "ascendpatch <VERSION>")] if version else [])


def normalise_text(text: str, ctx: Context) -> str:
    for old, new in replacements(ctx):
        text = text.replace(old, new)
    text = ISO_TIME.sub("<TIME>", text)
    text = STAMP.sub("<STAMP>", text)
    return DURATION.sub("<DURATION>", text)


def normalise_doc(doc: Any, ctx: Context, key: str = "", timings: bool = False) -> Any:
    """Strings as ``normalise_text``; values of time-like keys, and every float inside a
    ``timings`` object (audit's phase timings), become placeholders."""
    if isinstance(doc, dict):
        return {k: normalise_doc(v, ctx, k, timings or k == "timings") for k, v in doc.items()}
    if isinstance(doc, list):
        return [normalise_doc(v, ctx, key, timings) for v in doc]
    if timings and isinstance(doc, float):
        return "<SECONDS>"
    if VOLATILE_KEYS.search(key) and isinstance(doc, int | float | str) \
            and not isinstance(doc, bool):
        return f"<{key.upper()}>"
    if isinstance(doc, str):
        return normalise_text(doc, ctx)
    return doc


def run_mode(ctx: Context, pristine: Path, mode: str, out: Path) -> dict[str, int]:
    if ctx.sandbox.exists():
        shutil.rmtree(ctx.sandbox)
    for leftover in ("home", "fleet", "files", *WRITTEN):
        path = ctx.work / leftover
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
    shutil.copytree(pristine, ctx.sandbox, symlinks=True)
    ctx.home.mkdir()
    write_inputs(ctx)
    codes: dict[str, int] = {}
    for number, step in enumerate(steps(), 1):
        if step.prepare is not None:
            step.prepare(ctx)
        codes[f"{number:02d}-{step.name}"] = record(ctx, mode, f"{number:02d}-{step.name}",
                                                   step.argv(ctx), out, step.inside)
    keep_written(ctx, mode, out)
    return codes


def record(ctx: Context, mode: str, name: str, argv: list[str], out: Path,
           inside: Sequence[str] = ()) -> int:
    """Run one invocation in ``mode`` and write its normalised record; returns the exit code."""
    full = ["--json", *argv] if mode == "json" else ["--color", "never", *argv]
    code, stdout, stderr = ascendpatch(ctx, full, inside)
    shown = [*(["(in", "a", "PID", "namespace)"] if inside else []),
             *(normalise_text(a, ctx) for a in full), *(["--pid", "$!"] if inside else [])]
    if mode == "json":
        try:
            document: Any = normalise_doc(json.loads(stdout), ctx) if stdout.strip() else None
        except json.JSONDecodeError:
            document = {"not-json-stdout": normalise_text(stdout, ctx)}
        doc = {"argv": shown, "exit": code, "stdout": document,
               "stderr": normalise_text(stderr, ctx)}
        (out / f"{name}.json").write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    else:
        (out / f"{name}.txt").write_text(
            f"$ ascendpatch {' '.join(shown)}\nexit {code}\n--- stdout\n"
            f"{normalise_text(stdout, ctx)}--- stderr\n{normalise_text(stderr, ctx)}")
    return code


def keep_written(ctx: Context, mode: str, out: Path) -> None:
    for name in WRITTEN:
        path = ctx.work / name
        if not path.exists():
            continue
        if name.endswith(".json"):
            text = json.dumps(normalise_doc(json.loads(path.read_text()), ctx), indent=2,
                              sort_keys=True) + "\n"
        else:
            text = normalise_text(path.read_text(), ctx)
        (out / f"written-{mode}-{name}").write_text(text)


def run_all(out: Path, work: Path) -> None:
    import ascendpatch

    # The checkout of the package that runs, not of this file: the tool may be run from
    # another worktree than the one under test.
    ctx = Context(work=work.resolve(), repo=Path(ascendpatch.__file__).resolve().parents[1])
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    pristine, built = build(ctx, out)
    codes = {mode: run_mode(ctx, pristine, mode, out) for mode in MODES}
    names = sorted(set(codes["json"]) | set(codes["text"]))
    summary = {"00-sandbox": built,
               **{name: {mode: codes[mode].get(name) for mode in MODES} for name in names}}
    (out / "exit-codes.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"{len(summary)} invocations x {len(MODES)} modes written to {out}")


def files_of(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(folder.iterdir()) if p.is_file()}


def compare(a: Path, b: Path) -> Iterator[str]:
    left, right = files_of(a), files_of(b)
    for name in sorted(set(left) | set(right)):
        if name not in right:
            yield f"only in {a}: {name}"
        elif name not in left:
            yield f"only in {b}: {name}"
        elif left[name] != right[name]:
            yield from difflib.unified_diff(left[name].splitlines(), right[name].splitlines(),
                                            f"{a}/{name}", f"{b}/{name}", lineterm="")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", nargs="?", type=Path, help="the output folder to (re)create")
    parser.add_argument("--work", type=Path, default=DEFAULT_WORK,
                        help=f"the fixed work folder, wiped first (default {DEFAULT_WORK})")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("A", "B"))
    args = parser.parse_args(argv)
    if args.compare:
        differences = list(compare(*args.compare))
        print("\n".join(differences) if differences else "no difference")
        return 1 if differences else 0
    if args.out is None:
        parser.error("give OUT_DIR or --compare A B")
    run_all(args.out, args.work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
