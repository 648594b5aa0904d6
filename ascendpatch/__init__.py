"""ascendpatch: patch and install manager for vLLM / vllm-ascend environments on Ascend NPUs."""

from __future__ import annotations

__version__ = "0.1.0"
