"""Stand-in distributions: installed metadata (and, for torch / torch_npu, tiny modules) that
make an environment *look* complete on a machine without an NPU.

Every stand-in says what it is: its METADATA Summary and its INSTALLER read
"ascendpatch stand-in (simulated)", and its modules' docstrings say they are not the real
package. They exist so that the sandbox and the tests can run install, apply, verify, audit and
revert end to end with the real vllm-ascend wheel; nothing here pretends to compute anything.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from ascendpatch.env.reqs import applicable
from ascendpatch.hashing import record_text

INSTALLER = "ascendpatch stand-in (simulated)"
SUMMARY = "ascendpatch stand-in (simulated): NOT the real package, metadata only"
# Written last into a sandbox's prefix by `ascendpatch sandbox`: its presence marks a complete
# sandbox, an environment whose NPU stack is simulated by these stand-ins.
SANDBOX_MARKER = "ascendpatch-sandbox.json"


def is_sandbox(prefix: str | None) -> bool:
    return prefix is not None and (Path(prefix) / SANDBOX_MARKER).is_file()


TORCH_MODULE = '''"""STAND-IN torch written by ascendpatch (simulated): NOT PyTorch.

It only offers ``torch.ops.<namespace>`` so that operator probes can run without an NPU.
"""

class _Namespace:
    pass


class _Ops:
    def __getattr__(self, name):
        namespace = _Namespace()
        setattr(self, name, namespace)
        return namespace


ops = _Ops()
__version__ = "{version}"
'''

TORCH_NPU_MODULE = '''"""STAND-IN torch_npu by ascendpatch (simulated): NOT the real torch_npu."""
import torch  # noqa: F401  (the real torch_npu imports torch first, too)

__version__ = "{version}"
{body}'''

TORCH_NPU_OPS = ("npu_top_k_top_p", "npu_dynamic_quant", "npu_quant_matmul")


def is_standin(metadata_dir: Path) -> bool:
    """Whether this installed distribution is one of ours (its INSTALLER says so)."""
    try:
        return (metadata_dir / "INSTALLER").read_text().strip() == INSTALLER
    except OSError:
        return False


LABEL = " (stand-in: simulated, no NPU)"


def torch_npu_body(ops: Iterable[str] = TORCH_NPU_OPS, import_error: str | None = None) -> str:
    if import_error is not None:
        return f"raise ImportError({import_error!r})\n"
    lines = []
    for op in ops:
        lines.append(f"\n\ndef {op}(*args, **kwargs):\n"
                     f"    raise RuntimeError('{op}: stand-in operator, no NPU in a sandbox')\n")
    return "".join(lines)


def version_satisfying(spec: SpecifierSet) -> str:
    """A version that ``spec`` admits: its own pins and bounds first, then simple guesses."""
    candidates = []
    for item in spec:
        base = item.version.replace(".*", "")
        candidates.append(base)
        if item.operator in ("<", "<=", "!="):
            candidates.append("0.0.1")
        if item.operator in (">", ">="):
            candidates.append(base + ".post1")
    candidates += ["1.0", "0.0.1", "99.0"]
    for candidate in candidates:
        try:
            if spec.contains(Version(candidate), prereleases=True):
                return candidate
        except ValueError:
            continue
    raise ValueError(f"no stand-in version satisfies {spec}")


def write_distribution(site: Path, name: str, version: str,
                       files: Mapping[str, str | bytes] | None = None,
                       requires: Iterable[str] = (), summary: str = SUMMARY,
                       installer: str = INSTALLER) -> Path:
    """Lay out an installed distribution the way pip does, with a real RECORD."""
    dist_info = site / f"{canonicalize_name(name).replace('-', '_')}-{version}.dist-info"
    dist_info.mkdir(parents=True, exist_ok=False)
    meta = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}",
            f"Summary: {summary}", *(f"Requires-Dist: {r}" for r in requires)]
    contents: dict[str, bytes] = {k: v.encode() if isinstance(v, str) else v
                                  for k, v in (files or {}).items()}
    contents[f"{dist_info.name}/METADATA"] = ("\n".join(meta) + "\n").encode()
    contents[f"{dist_info.name}/INSTALLER"] = (installer + "\n").encode()
    for rel, data in contents.items():
        path = site / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    (dist_info / "RECORD").write_text(record_text(contents, f"{dist_info.name}/RECORD"))
    return dist_info


def modules_for(name: str, version: str, torch_npu_body_text: str | None = None) \
        -> dict[str, str]:
    key = canonicalize_name(name)
    if key == "torch":
        return {"torch/__init__.py": TORCH_MODULE.format(version=version)}
    if key == "torch-npu":
        body = torch_npu_body_text if torch_npu_body_text is not None else torch_npu_body()
        return {"torch_npu/__init__.py": TORCH_NPU_MODULE.format(version=version, body=body)}
    return {}


def satisfy(site: Path, requirements: Iterable[str], installed: Iterable[str],
            markers: Mapping[str, str] | None = None,
            torch_npu_body_text: str | None = None) -> list[tuple[str, str]]:
    """Write a stand-in for every requirement that nothing installed satisfies yet."""
    have = {canonicalize_name(n) for n in installed}
    created = []
    for req in applicable(requirements, markers):
        key = canonicalize_name(req.name)
        if key in have:
            continue
        version = version_satisfying(req.specifier)
        write_distribution(site, req.name, version,
                           modules_for(req.name, version, torch_npu_body_text))
        have.add(key)
        created.append((req.name, version))
    return created
