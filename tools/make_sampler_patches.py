"""Maintainer tool: (re)generate the sampler top-k/top-p fallback patches from real wheels.

    python tools/make_sampler_patches.py [--wheels DIR]

For every vllm-ascend release below it reads ``vllm_ascend/sample/sampler.py`` from the wheel
(downloaded with ``pip download --no-deps`` into the test cache) or, for sdist-only releases,
from the sdist (taken from the index's JSON API into the test cache's ``sdists``), groups
releases by file content, applies the template of ``tools/sampler-topk-topp-fallback/``, writes
one patch per distinct content under ``patches/vllm-ascend/sampler-topk-topp-fallback/``,
updates the ``after`` sha256 of the matching variant in ``manifests/*.yaml`` and prints the
variants. Every patch is written by ascendpatch.patchfile.diffwrite, which checks it with
the patch matcher: applied to the upstream file it gives the guarded file byte for byte.

The fix (vllm-project/vllm-ascend#11999; issue 16): every call of
the fused NPU operator goes through a guard that runs the operator while it works and, once it
is missing or raises, vLLM's apply_top_k_top_p algorithm (see the template's README).
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

from ascendpatch.env.releases import known_releases  # noqa: E402
from ascendpatch.patchfile.diffwrite import patch_text  # noqa: E402

TARGET = "vllm_ascend/sample/sampler.py"
OUT = REPO / "patches" / "vllm-ascend" / "sampler-topk-topp-fallback"
# Every release whose sampler calls a fused top-k/top-p operator unguarded, less those whose
# sampler.py is byte-identical to another's (ascendpatch/data/releases.yaml, the one list).
VERSIONS = [r.version for r in known_releases()
            if r.sampler_fix == "applies" and r.sampler_as is None]
# Of these, the ones with no wheel on PyPI: their file comes from the sdist (index JSON API).
SDIST_ONLY = {r.version for r in known_releases() if not r.wheel}

TEMPLATE = REPO / "tools" / "sampler-topk-topp-fallback"
OPERATORS = {  # fused function name -> (the operator as the file calls it, its probe)
    "_apply_top_k_top_p_ascendc": ("torch.ops._C_ascend.npu_apply_top_k_top_p",
                                   "probe_custom_op.py.in"),
    "_apply_top_k_top_p_torch_npu": ("torch_npu.npu_top_k_top_p", "probe_torch_npu.py.in"),
}
_FUNC = re.compile(r"^def (_apply_top_k_top_p_(?:ascendc|torch_npu))\(\n", re.M)


@dataclass
class Family:
    sha256: str
    versions: list[str]
    original: str


def sdist_file(sdists: Path, version: str) -> bytes:
    from ascendpatch.env.releases import download_sdist, read_member

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


def helpers(function: str) -> str:
    """The template's block for the family whose fused function is ``function``."""
    op, probe_file = OPERATORS[function]
    probe = (TEMPLATE / probe_file).read_text()
    indented = "".join(f"        {line}" if line.strip() else line
                       for line in probe.splitlines(keepends=True))
    text = (TEMPLATE / "fallback.py.in").read_text()
    return (text.replace("@PROBE@\n", indented).replace("@OP_CALL@", f"{op}(logits, k=k, p=p)")
            .replace("@OP@", op))


def guarded(original: str) -> str:
    """Insert the helpers before the fused function; route every operator call through them."""
    match = _FUNC.search(original)
    if match is None:
        raise SystemExit("no fused top-k/top-p function found: this release needs a new recipe")
    op = OPERATORS[match.group(1)][0]
    head, tail = original[:match.start()], original[match.start():]
    if op + "(" in head or tail.count(op + "(") == 0:
        raise SystemExit(f"{op} is called outside {match.group(1)}: this release needs a new "
                         "recipe")
    return head + helpers(match.group(1)) + tail.replace(op + "(", "_ascendpatch_top_k_top_p(")


def make_patch(original: str, patched: str, family: Family) -> str:
    """The header and diffwrite's diff, which adds no-newline markers and is checked by
    applying it with the patch matcher: the patch reproduces the guarded file byte for byte."""
    after = hashlib.sha256(patched.encode()).hexdigest()
    header = (
        "ascendpatch: sampler top_k/top_p fallback for vllm-ascend "
        f"{', '.join(family.versions)}\n"
        "Why: vllm-project/vllm-ascend#11999; field note 003, pitfall 1; issue 16.\n"
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
        update_catalog(family.sha256, hashlib.sha256(patched.encode()).hexdigest())
    return 0


def update_catalog(before: str, after: str) -> None:
    """Point the ``after`` sha256 of every variant whose ``before`` is ``before`` at ``after``."""
    pattern = re.compile(rf"(before: \[{before}\]\n\s*after: \[)[0-9a-f]{{64}}(\])")
    for manifest in sorted((REPO / "manifests").glob("*.yaml")):
        text = manifest.read_text()
        new = pattern.sub(rf"\g<1>{after}\g<2>", text)
        if new != text:
            manifest.write_text(new)
            print(f"#   updated {manifest.relative_to(REPO)}")


if __name__ == "__main__":
    raise SystemExit(main())
