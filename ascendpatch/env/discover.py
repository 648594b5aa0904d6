"""Which interpreter is the target when --python is not given.

Order (after --python, ``$ASCENDPATCH_PYTHON`` and the config file: commands/context.py):
``$ASCENDPATCH_PYTHON``; then the candidates below, first one with vllm-ascend installed.
The vllm-omni images put their Python at /usr/local/python3.12.13/bin; their system python3
is a 3.10 without pip.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from ascendpatch.env import introspection
from ascendpatch.env.target import Target, from_python, from_site_packages
from ascendpatch.errors import TargetError

ENV_VAR = introspection.ENV_VAR
ANCHOR_DISTRIBUTION = "vllm-ascend"


def candidates(env: Mapping[str, str], preferred: Sequence[str] = ()) -> list[Path]:
    import shutil  # (here: a run with --python needs none of it, and it costs 2 ms)

    found: list[Path] = [introspection.named(p) for p in preferred]
    found.append(Path("/usr/local/python3.12.13/bin/python3"))
    found += sorted(Path("/usr/local").glob("python3*/bin/python3"), reverse=True)
    found += [Path("/usr/local/bin/python3"), Path("/usr/bin/python3")]
    for name in ("python3", "python"):
        on_path = shutil.which(name, path=env.get("PATH"))
        if on_path:
            found.append(Path(on_path))
    unique: list[Path] = []
    for path in found:
        if path not in unique:
            unique.append(path)
    return unique


def site_packages_beside(python: Path) -> list[Path]:
    """The site-packages folders of an interpreter's prefix, found by layout alone."""
    prefix = python.parent.parent
    found: list[Path] = []
    for pattern in ("lib/python3*/site-packages", "lib64/python3*/site-packages",
                    "local/lib/python3*/dist-packages", "lib/python3/dist-packages"):
        found += sorted(prefix.glob(pattern), reverse=True)
    return [p for p in found if p.is_dir()]


def static_target(python: Path) -> Target | None:
    """The target of a manifest's candidate interpreter *without running it*: the first
    site-packages beside it that holds vllm-ascend (None when there is none)."""
    for folder in site_packages_beside(python):
        target = from_site_packages(folder)
        if target.get(ANCHOR_DISTRIBUTION) is not None:
            return target
    return None


def find_target(env: Mapping[str, str], inspect: Callable[[Path], Target] = from_python,
                preferred: Sequence[str] = (), run_preferred: bool = True) -> Target:
    """``preferred``: the manifest's own ``target.python`` candidates, tried first.

    ``run_preferred`` False (a command that needs no interpreter): those candidates come from
    a manifest, which is data; they are never executed, only looked beside for a site-packages
    with vllm-ascend. The built-in candidates are system paths and run as before."""
    explicit = introspection.from_env(env)
    if explicit is not None:
        return inspect(explicit)
    tried: list[str] = []
    from_manifest = {introspection.named(p) for p in preferred}
    for path in candidates(env, preferred):
        try:
            present = path.exists()
        except OSError as exc:  # (a name too long, a folder not searchable: a manifest's)
            tried.append(f"{path} ({exc.strerror})")
            continue
        if not present:
            tried.append(f"{path} (absent)")
            continue
        if path in from_manifest and not run_preferred:
            found = static_target(path)
            if found is not None:
                return found
            tried.append(f"{path} (not run: this command needs no interpreter; no "
                         f"site-packages with {ANCHOR_DISTRIBUTION} beside it)")
            continue
        try:
            target = inspect(path)
        except TargetError as exc:
            tried.append(f"{path} ({exc.message})")
            continue
        if target.get(ANCHOR_DISTRIBUTION) is not None:
            return target
        tried.append(f"{path} (no {ANCHOR_DISTRIBUTION})")
    raise TargetError(
        "no target interpreter with vllm-ascend installed was found; tried: " + "; ".join(tried),
        fix=f"pass --python PATH, set {ENV_VAR}, name it in a config file (python = \"PATH\" "
            f"in ./ascendpatch.toml or ~/.config/ascendpatch/config.toml), or use "
            f"--site-packages DIR",
    )
