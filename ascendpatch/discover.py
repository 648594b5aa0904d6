"""Which interpreter is the target when --python is not given.

Order: ``$ASCENDPATCH_PYTHON``; then the candidates below, first one with vllm-ascend installed.
The vllm-omni images put their Python at /usr/local/python3.12.13/bin (field note 000 §1.4),
whose system python3 is a 3.10 without pip.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from ascendpatch.errors import TargetError
from ascendpatch.target import Target, from_python

ENV_VAR = "ASCENDPATCH_PYTHON"
ANCHOR_DISTRIBUTION = "vllm-ascend"


def candidates(env: Mapping[str, str], preferred: Sequence[str] = ()) -> list[Path]:
    found: list[Path] = [Path(p) for p in preferred]
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


def find_target(env: Mapping[str, str], inspect: Callable[[Path], Target] = from_python,
                preferred: Sequence[str] = ()) -> Target:
    """``preferred``: the manifest's own ``target.python`` candidates, tried first."""
    explicit = env.get(ENV_VAR)
    if explicit:
        return inspect(Path(explicit))
    tried: list[str] = []
    for path in candidates(env, preferred):
        if not path.exists():
            tried.append(f"{path} (absent)")
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
        fix=f"pass --python PATH, set {ENV_VAR}, or use --site-packages DIR",
    )


def default_env() -> Mapping[str, str]:
    return os.environ
