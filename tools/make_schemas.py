"""Regenerate ascendpatch/data/manifest.schema.json from the manifest schema in the code.

    python tools/make_schemas.py          # rewrite it
    python tools/make_schemas.py --check  # exit 1 when it is out of date
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ascendpatch.manifest.export import manifest_schema

TARGET = Path(__file__).resolve().parents[1] / "ascendpatch" / "data" / "manifest.schema.json"


def rendered() -> str:
    return json.dumps(manifest_schema(), indent=2) + "\n"


def main(argv: list[str]) -> int:
    text = rendered()
    if "--check" in argv:
        current = TARGET.read_text() if TARGET.exists() else ""
        if current != text:
            print(f"{TARGET} is out of date: run python tools/make_schemas.py")
            return 1
        return 0
    TARGET.write_text(text)
    print(f"wrote {TARGET}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
