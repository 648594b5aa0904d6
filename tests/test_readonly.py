"""A read-only command writes nothing into the target, not even bytecode.

Every in-target script (verify's probes, introspection, the registry check) runs through
``env.inscript`` and imports the target's own modules (torch_npu, vllm_ascend). Without ``-B``
the target interpreter writes ``__pycache__`` folders into the target's site-packages (as root,
on a node) unless the user happened to set PYTHONDONTWRITEBYTECODE; 89ee836 did."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from ascendpatch.env import inscript


def test_an_in_target_script_writes_no_bytecode(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site-packages"
    (site / "torch_npu").mkdir(parents=True)
    (site / "torch_npu" / "__init__.py").write_text("OPS = ['npu_top_k_top_p']\n")
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    script = ("import json, sys\nsys.path.insert(0, sys.argv[1])\nimport torch_npu\n"
              "print(json.dumps({'ops': torch_npu.OPS}))\n")
    doc = inscript.run_json(Path(sys.executable), script, [str(site)], env=env)
    assert doc == {"ops": ["npu_top_k_top_p"]}  # the module really was imported
    assert sorted(p.relative_to(site).as_posix() for p in site.rglob("*")) == \
        ["torch_npu", "torch_npu/__init__.py"]
