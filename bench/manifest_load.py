"""Loading a 60 MB manifest: ascendpatch's loader against PyYAML's pure-Python safe_load.

``python bench/manifest_load.py [--mb 60]`` writes a generated manifest (many artifacts with
variants and hashes, the shape of a large catalog) into a temp dir and times, in the same run,
``yaml.safe_load`` of the text (the named baseline: what the loader used before) and
``ascendpatch.manifest.loader.load`` (C parser, duplicate-key checks, schema validation,
model building). Prints both times and the ratio; a benchmark, never a timed test.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import yaml

from ascendpatch.manifest import loader

ARTIFACT = """\
- id: fix-{i}
  title: generated fix {i} for the load benchmark
  kind: diff
  distribution: vllm-ascend
  enabled: false
  variants:
  - versions: ">=0.{a},<0.{b}"
    source: fix-{i}.patch
    targets: [vllm_ascend/worker/model_runner_{i}.py, vllm_ascend/ops/op_{i}.py]
    sha256:
      vllm_ascend/worker/model_runner_{i}.py:
        before: [{h}]
        after: [{h}]
"""


def generate(path: Path, megabytes: float) -> int:
    digest = "ab" * 32
    chunks = ["name: bench\ndescription: generated for bench/manifest_load.py\nartifacts:\n"]
    size, count = len(chunks[0]), 0
    while size < megabytes * 1_000_000:
        text = ARTIFACT.format(i=count, a=count % 50, b=count % 50 + 1, h=digest)
        chunks.append(text)
        size += len(text)
        count += 1
    path.write_text("".join(chunks))
    return count


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mb", type=float, default=60.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.yaml"
        count = generate(path, args.mb)
        text = path.read_text()
        start = time.perf_counter()
        yaml.load(text, Loader=yaml.SafeLoader)  # the safe pure-Python loader
        baseline = time.perf_counter() - start
        start = time.perf_counter()
        manifest = loader.load(str(path))
        ours = time.perf_counter() - start
    assert len(manifest.artifacts) == count
    size = path_size = len(text.encode()) / 1e6
    del path_size
    sys.stdout.write(f"manifest: {size:.1f} MB, {count} artifacts\n"
                     f"baseline yaml.safe_load (pure Python): {baseline:.1f} s\n"
                     f"ascendpatch loader.load (whole load):  {ours:.1f} s\n"
                     f"ratio: {ours / baseline:.2f} (goal <= 0.5)\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
