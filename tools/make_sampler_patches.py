"""Maintainer tool: (re)generate the sampler top-k/top-p fallback patches from real wheels.

    python tools/make_sampler_patches.py [--wheels DIR]

For every vllm-ascend release below it reads ``vllm_ascend/sample/sampler.py`` from the wheel
(downloaded with ``pip download --no-deps`` into the test cache) or, for sdist-only releases,
from the sdist (taken from the index's JSON API into the test cache's ``sdists``), groups
releases by file content, inserts the guard, writes one patch per distinct content under
``patches/vllm-ascend/sampler-topk-topp-fallback/`` and prints the manifest variants. Every
patch is written by ascendpatch.diffwrite, which checks it with the engine: applied to the
upstream file it gives the guarded file byte for byte.

The fix (field note 003 pitfall 1, vllm-project/vllm-ascend#11999): the fused NPU function that
``apply_top_k_top_p`` selects on A2/A3 starts with a cached check; when the operator is
missing it runs the file's own PyTorch implementation with the same arguments.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from ascendpatch.diffwrite import patch_text  # noqa: E402

TARGET = "vllm_ascend/sample/sampler.py"
OUT = REPO / "patches" / "vllm-ascend" / "sampler-topk-topp-fallback"
# Every release on PyPI whose sampler calls a fused top-k/top-p operator unguarded.
VERSIONS = ["0.14.0rc1", "0.15.0rc1", "0.16.0rc1", "0.17.0rc1", "0.18.0rc1", "0.18.0",
            "0.19.1rc1", "0.20.2rc1", "0.21.0rc1", "0.22.1rc1", "0.23.0rc1", "0.23.0",
            "0.24.0rc1", "0.25.1rc1", "0.26.0rc1", "0.27.1rc1", "0.28.0rc1", "0.29.0rc1"]
# Of these, the ones with no wheel on PyPI: their file comes from the sdist (index JSON API).
SDIST_ONLY = {"0.27.1rc1", "0.28.0rc1", "0.29.0rc1"}

CUSTOM_OP_PROBE = '''\
# ascendpatch: sampler-topk-topp-fallback (vllm-project/vllm-ascend#11999).
# torch.ops._C_ascend.npu_apply_top_k_top_p exists only after the vllm_ascend_C
# library has been loaded in this process. Probe it at first use (after loading
# the library the way vllm-ascend does), cache the answer, and run this file's
# PyTorch implementation instead when the operator is missing.
_ASCENDPATCH_TOPK_TOPP_OP = None


def _ascendpatch_topk_topp_op_available() -> bool:
    global _ASCENDPATCH_TOPK_TOPP_OP
    if _ASCENDPATCH_TOPK_TOPP_OP is None:
        try:
            from vllm_ascend.utils import enable_custom_op

            enable_custom_op()
        except Exception:  # the attribute probe below decides
            pass
        try:
            found = hasattr(torch.ops._C_ascend, "npu_apply_top_k_top_p")
        except Exception:
            found = False
        if not found:
            import logging

            logging.getLogger("vllm.ascendpatch").warning(
                "torch.ops._C_ascend.npu_apply_top_k_top_p is not available in this "
                "process; top-k/top-p sampling uses the PyTorch implementation "
                "(ascendpatch sampler fallback)"
            )
        _ASCENDPATCH_TOPK_TOPP_OP = found
    return _ASCENDPATCH_TOPK_TOPP_OP


'''

TORCH_NPU_PROBE = '''\
# ascendpatch: sampler-topk-topp-fallback (field note 003, pitfall 1).
# Some torch_npu builds lack npu_top_k_top_p, and the first top-k/top-p request
# then kills EngineCore. Probe it at first use, cache the answer, and run this
# file's PyTorch implementation instead when the operator is missing.
_ASCENDPATCH_TOPK_TOPP_OP = None


def _ascendpatch_topk_topp_op_available() -> bool:
    global _ASCENDPATCH_TOPK_TOPP_OP
    if _ASCENDPATCH_TOPK_TOPP_OP is None:
        try:
            found = hasattr(torch_npu, "npu_top_k_top_p")
        except Exception:
            found = False
        if not found:
            import logging

            logging.getLogger("vllm.ascendpatch").warning(
                "torch_npu.npu_top_k_top_p is not available in this torch_npu build; "
                "top-k/top-p sampling uses the PyTorch implementation "
                "(ascendpatch sampler fallback)"
            )
        _ASCENDPATCH_TOPK_TOPP_OP = found
    return _ASCENDPATCH_TOPK_TOPP_OP


'''

GUARD = (
    "    if _ASCENDPATCH_TOPK_TOPP_OP is not True and not _ascendpatch_topk_topp_op_available():\n"
    "        return _apply_top_k_top_p_pytorch({args})\n"
)
# 0.20.2rc1 only: its PyTorch reduce-sample path returns the full logits, while every caller
# of the fused path unpacks (values, indices). Sampling over the full masked logits with
# identity indices draws from the same distribution, so pair them up.
GUARD_FULL_LOGITS = (
    "    if _ASCENDPATCH_TOPK_TOPP_OP is not True and not _ascendpatch_topk_topp_op_available():\n"
    "        out = _apply_top_k_top_p_pytorch({args})\n"
    "        if get_ascend_config().enable_reduce_sample and not isinstance(out, tuple):\n"
    "            # this release's PyTorch reduce path returns full logits; callers of the fused\n"
    "            # path unpack (values, indices): index every column.\n"
    "            return out, torch.arange(out.shape[-1], device=out.device).expand_as(out)\n"
    "        return out\n"
)
_FUNC = re.compile(r"^def (_apply_top_k_top_p_(?:ascendc|torch_npu))\(\n(?P<params>(?:    .*\n)+?)"
                   r"\) -> torch\.Tensor:\n", re.M)


@dataclass
class Family:
    sha256: str
    versions: list[str]
    original: str


def sdist_file(sdists: Path, version: str) -> bytes:
    from ascendpatch.releases import download_sdist, read_member

    sdists.mkdir(parents=True, exist_ok=True)
    found = sorted(sdists.glob(f"vllm_ascend-{version}.tar.gz"))
    path = found[0] if found else download_sdist("vllm-ascend", version, sdists)
    if path is None:
        raise SystemExit(f"no sdist of vllm-ascend {version} on the index")
    data = read_member(path, TARGET)
    if data is None:
        raise SystemExit(f"{path.name} has no {TARGET}")
    return data


def wheel_file(wheels: Path, version: str) -> bytes:
    if version in SDIST_ONLY:
        return sdist_file(wheels.parent / "sdists", version)
    found = sorted(wheels.glob(f"vllm_ascend-{version}-*.whl"))
    if not found:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary",
                        ":all:", "-d", str(wheels), f"vllm-ascend=={version}"], check=True)
        found = sorted(wheels.glob(f"vllm_ascend-{version}-*.whl"))
    with zipfile.ZipFile(found[0]) as archive:
        return archive.read(TARGET)


def guarded(original: str) -> str:
    match = _FUNC.search(original)
    if match is None:
        raise SystemExit("no fused top-k/top-p function found: this release needs a new recipe")
    params = [line.strip().split(":")[0] for line in match.group("params").splitlines()]
    probe = CUSTOM_OP_PROBE if "ascendc" in match.group(1) else TORCH_NPU_PROBE
    recipe = GUARD_FULL_LOGITS if "return full_logits" in original else GUARD
    guard = recipe.format(args=", ".join(params))
    start, end = match.start(), match.end()
    return original[:start] + probe + original[start:end] + guard + original[end:]


def make_patch(original: str, patched: str, family: Family) -> str:
    """The header and diffwrite's diff, which adds no-newline markers and is checked by
    applying it with the engine: the patch reproduces the guarded file byte for byte."""
    after = hashlib.sha256(patched.encode()).hexdigest()
    header = (
        "ascendpatch: sampler top_k/top_p fallback for vllm-ascend "
        f"{', '.join(family.versions)}\n"
        "Why: vllm-project/vllm-ascend#11999; field note 003, pitfall 1.\n"
        f"upstream {TARGET} sha256: {family.sha256}\n"
        f"patched sha256: {after}\n"
        "Generated by tools/make_sampler_patches.py from the release "
        f"{'sdists' if set(family.versions) <= SDIST_ONLY else 'wheels'}."
    )
    return patch_text(header, [(TARGET, original.encode(), patched.encode())])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--wheels", type=Path,
                        default=Path.home() / ".cache" / "ascendpatch-test" / "wheels")
    args = parser.parse_args()
    args.wheels.mkdir(parents=True, exist_ok=True)
    families: dict[str, Family] = {}
    for version in VERSIONS:
        data = wheel_file(args.wheels, version)
        digest = hashlib.sha256(data).hexdigest()
        families.setdefault(digest, Family(digest, [], data.decode())).versions.append(version)
    OUT.mkdir(parents=True, exist_ok=True)
    for family in families.values():
        patched = guarded(family.original)
        text = make_patch(family.original, patched, family)
        name = f"{family.versions[0]}.patch"
        (OUT / name).write_text(text)
        print(f"# {name}: {', '.join(family.versions)}")
        print(f"#   before {family.sha256}")
        print(f"#   after  {hashlib.sha256(patched.encode()).hexdigest()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
