"""The image's protected packages, as the resolver of a lock must see them: already there.

A lock leaves torch, torch-npu and the other protected packages to the image, but the
resolver still has to know what they are: vllm-ascend needs ``torch==2.9.0`` and the image's
torch-npu needs ``torch==2.9.0+cpu``, a build the index does not have. So each protected
package the target has installed is handed to the resolver as a metadata-only wheel of
exactly that distribution (its name, version, Requires-Python and Requires-Dist, read from the
installed METADATA: nothing else is copied), in a temp folder, named by a direct-URL
constraint (``torch @ file:///.../torch-2.9.0+cpu-py3-none-any.whl``). The resolver then
takes that copy, and what it requires, and never the index's build of another variant. The
lock leaves these packages out (they are pip-compile's unsafe packages), so no hash of a
metadata-only wheel ever reaches a lock.
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterable
from pathlib import Path

from packaging.utils import canonicalize_name

from ascendpatch.env.target import Distribution, Target
from ascendpatch.hashing import record_text

_KEEP = ("Requires-Python", "Requires-Dist")


def constraints(target: Target, protected: Iterable[str], folder: Path) -> str:
    """A constraints file's text: each installed protected package as a direct URL to its
    metadata-only wheel (written into ``folder``)."""
    lines = []
    for name in sorted({canonicalize_name(p) for p in protected}):
        dist = target.get(name)
        if dist is not None:
            lines.append(f"{dist.name} @ {_wheel(dist, folder).as_uri()}\n")
    return "".join(lines)


def _metadata(dist: Distribution) -> str:
    meta = dist.metadata
    lines = ["Metadata-Version: 2.1", f"Name: {dist.name}", f"Version: {dist.version}",
             "Summary: the target's installed copy, metadata only (ascendpatch lock)"]
    for key in _KEEP:
        lines += [f"{key}: {' '.join(value.split())}" for value in meta.get_all(key) or []]
    return "\n".join(lines) + "\n"


def _wheel(dist: Distribution, folder: Path) -> Path:
    stem = f"{dist.name.replace('-', '_')}-{dist.version}"
    path = folder / f"{stem}-py3-none-any.whl"
    info = f"{stem}.dist-info"
    files = {f"{info}/METADATA": _metadata(dist).encode(),
             f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: ascendpatch\n"
                              b"Root-Is-Purelib: true\nTag: py3-none-any\n"}
    with zipfile.ZipFile(path, "w") as archive:
        for rel, data in files.items():
            archive.writestr(rel, data)
        archive.writestr(f"{info}/RECORD", record_text(files, f"{info}/RECORD"))
    return path
