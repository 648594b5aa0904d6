"""Endpoint smoke test: GET /v1/models, then one short chat completion with top_p=0.9 (the
request that used to kill EngineCore, field note 003 pitfall 1). Standard library HTTP only."""

from __future__ import annotations

import http.client
import json
import socket
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Step:
    ok: bool
    message: str
    seconds: float = 0.0


def _request(url: str, body: dict[str, Any] | None, timeout: float) \
        -> tuple[int, bytes, float]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method="POST" if data else "GET",
                                     headers={"Content-Type": "application/json"})
    start = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read(), time.perf_counter() - start
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), time.perf_counter() - start


def models(base: str, timeout: float) -> tuple[Step, list[str]]:
    url = f"{base}/v1/models"
    try:
        status, payload, took = _request(url, None, timeout)
    except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
        return Step(False, f"GET {url} failed: {_reason(exc)}; is the server up?"), []
    if status != 200:
        return Step(False, f"GET {url} answered {status}", took), []
    try:
        ids = [str(m["id"]) for m in json.loads(payload)["data"]]
    except (ValueError, KeyError, TypeError):
        return Step(False, f"GET {url}: not an OpenAI model list", took), []
    return Step(True, f"GET /v1/models: 200 in {took * 1000:.0f} ms, serving "
                      f"{', '.join(ids) or 'no model'}", took), ids


def chat(base: str, model: str, timeout: float) -> Step:
    body = {"model": model, "messages": [{"role": "user", "content": "Reply with OK."}],
            "max_tokens": 8, "temperature": 0.7, "top_p": 0.9}
    url = f"{base}/v1/chat/completions"
    try:
        status, payload, took = _request(url, body, timeout)
    except (http.client.RemoteDisconnected, ConnectionResetError,
            http.client.IncompleteRead) as exc:
        return Step(False, f"the server dropped the connection on a top_p=0.9 request "
                           f"({type(exc).__name__}): EngineCore has probably died on the fused "
                           f"top-k/top-p operator; fix: ascendpatch apply "
                           f"sampler-topk-topp-fallback, restart, and check: ascendpatch logs")
    except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
        return Step(False, f"POST {url} failed: {_reason(exc)}")
    if status == 404:
        return Step(False, f"POST /v1/chat/completions: 404 for model {model!r}: the request's "
                           "model id must be the id the server exposes (field note 000 §2.1)",
                    took)
    if status != 200:
        return Step(False, f"POST /v1/chat/completions: {status}: "
                           f"{payload[:200].decode(errors='replace')}", took)
    try:
        text = json.loads(payload)["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        return Step(False, "POST /v1/chat/completions: 200 but no choices in the answer", took)
    return Step(True, f"chat completion with top_p=0.9: 200 in {took * 1000:.0f} ms "
                      f"({len(str(text))} characters)", took)


def _reason(exc: BaseException) -> str:
    reason = getattr(exc, "reason", exc)
    if isinstance(reason, socket.timeout | TimeoutError):
        return "timed out"
    return str(reason)
