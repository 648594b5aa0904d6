"""The bundled manifests: all validate, and each stack's pins match the METADATA it names."""

from __future__ import annotations

import email.parser

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from ascendpatch.manifest import loader
from tests.kit import run_cli, wheels

PROTECTED = {"torch", "torch-npu", "torchvision", "torchaudio", "triton-ascend"}
STACK_KEYS = PROTECTED | {"transformers"}


def test_every_bundled_manifest_validates() -> None:
    names = loader.bundled_names()
    assert {"default", "muse-glimmer-w8a8", "vllm-omni-910c", "vllm-ascend-0.23.0",
            "vllm-ascend-0.18.0"} <= set(names)
    for name in names:
        loader.load(name)
    result = run_cli("manifests")
    assert result.code == 0
    assert result.out.count("[OK]") == len(names)


@pytest.mark.parametrize("name", loader.bundled_names())
def test_every_stack_protects_the_npu_stack(name: str) -> None:
    assert {canonicalize_name(p) for p in loader.load(name).protected} >= PROTECTED


def test_field_note_stacks() -> None:
    muse = loader.load("muse-glimmer-w8a8")
    pins = {p.name: p for p in muse.stack.packages}
    assert pins["transformers"].specifier == "==5.16.1" and "5.16.1" in pins["transformers"].reason
    assert pins["vllm-ascend"].specifier == "==0.22.1rc2" and pins["vllm"].specifier == "==0.22.1"
    assert pins["torch-npu"].specifier == "==2.11.0rc4" and muse.stack.cann == "9.0.0"
    assert muse.launch["quantization"] == "ascend"
    assert muse.launch["mm_processor_kwargs"] == {"max_image_tokens": 1024}
    smooth = muse.artifact("smoothquant")
    assert smooth is not None and smooth.enabled is False
    assert all("${MODEL_DIR}" in (v.source or "") for v in smooth.variants)
    omni = loader.load("vllm-omni-910c")
    assert omni.target["image"] == "quay.io/ascend/vllm-omni:v0.25.0-a3"
    assert omni.target["python"] == ["/usr/local/python3.12.13/bin/python3"]
    assert omni.no_deps == ("step-audio2",) and omni.env["HF_HUB_OFFLINE"] == "1"
    assert omni.launch["repetition_penalty"] == 1.0
    assert omni.artifact("whisper-processor-config") is not None


def _requires(metadata_text: str) -> dict[str, SpecifierSet]:  # canonical name -> specifier
    message = email.parser.Parser().parsestr(metadata_text)
    out: dict[str, SpecifierSet] = {}
    for raw in message.get_all("Requires-Dist") or []:
        req = Requirement(raw)
        if req.marker is None:
            out[str(canonicalize_name(req.name))] = req.specifier
    return out


def _stacks_from_metadata() -> list[str]:
    return [n for n in loader.bundled_names() if loader.load(n).stack.from_metadata]


@pytest.mark.integration
@pytest.mark.parametrize("name", _stacks_from_metadata())
def test_stack_pins_match_the_metadata_they_come_from(name: str) -> None:
    manifest = loader.load(name)
    origin = Requirement(manifest.stack.from_metadata or "")
    (version,) = [s.version for s in origin.specifier]
    if version in wheels.SDIST_ONLY:  # its PKG-INFO
        text = wheels.sdist_member(wheels.sdist("vllm-ascend", version), "PKG-INFO").decode()
    else:
        text = wheels.wheel_metadata(version)
    required = _requires(text)
    pins = {str(canonicalize_name(p.name)): SpecifierSet(p.specifier)
            for p in manifest.stack.packages}
    assert pins[str(canonicalize_name(origin.name))] == origin.specifier
    required_names: set[str] = set(required)
    constrained = {pkg for pkg, spec in required.items() if str(spec)}  # bare names pin nothing
    for package in STACK_KEYS & constrained:
        assert package in pins, f"{name}: {package}{required[package]} is not pinned"
        assert pins[package] == required[package], (package, pins[package], required[package])
    for package in set(pins) & required_names:
        assert pins[package] == required[package], package
