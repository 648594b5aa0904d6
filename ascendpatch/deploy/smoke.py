"""Endpoint smoke test: GET /v1/models, then one short chat completion with top_p=0.9 (the
request that killed EngineCore when the fused top-k/top-p operator was missing,
vllm-project/vllm-ascend#11999). Standard library HTTP only.

The server is untrusted: an answer larger than ``MAX_BODY`` is refused, ``timeout`` bounds each
whole request (connect, headers and body: a server dripping one byte a second is cut off at the
deadline by closing the socket), redirects are followed only on the same scheme, host and port,
and anything the server says is shown with its control characters escaped.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import math
import signal
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ascendpatch.deploy.text import printable
from ascendpatch.results import Hint, Phrase
from ascendpatch.untrusted import load_json

MAX_BODY = 8 * 1024 * 1024
MAX_REDIRECTS = 5
FIX_TOP_P = Phrase(Hint(("apply", "sampler-topk-topp-fallback")),
                   ", restart the server, and check: ", Hint(("logs", "<serve log>")))


@dataclass(frozen=True)
class Step:
    ok: bool
    message: str
    seconds: float = 0.0
    fix: str = ""


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes
    seconds: float


class SmokeError(Exception):
    """The request failed; ``str()`` says why in a few words."""


class Dropped(SmokeError):
    """The server closed the connection without an answer."""


@dataclass(frozen=True)
class Endpoint:
    scheme: str
    host: str
    port: int
    base_path: str

    @property
    def origin(self) -> tuple[str, str, int]:
        return self.scheme, self.host.lower(), self.port

    def shown(self) -> str:
        """The URL without credentials (never echoed)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}{self.base_path}"


def parse_url(url: str) -> Endpoint:
    """Raises ValueError with the reason for anything that is not http(s)://HOST[:PORT][/path]."""
    parts = urllib.parse.urlsplit(url)  # ValueError for "http://[::1"
    if parts.scheme not in ("http", "https"):
        raise ValueError("must start with http:// or https://")
    if not parts.hostname:
        raise ValueError("names no host")
    port = parts.port  # ValueError for a port out of range or not a number
    path = parts.path.rstrip("/").removesuffix("/v1")
    return Endpoint(parts.scheme, parts.hostname, port or (443 if parts.scheme == "https"
                                                           else 80), path)


def _connection(endpoint: Endpoint, timeout: float) -> http.client.HTTPConnection:
    cls = http.client.HTTPSConnection if endpoint.scheme == "https" else \
        http.client.HTTPConnection
    return cls(endpoint.host, endpoint.port, timeout=timeout)


def _read_body(response: http.client.HTTPResponse) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = response.read1(65536)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > MAX_BODY:
            raise SmokeError(f"the answer is larger than {MAX_BODY // (1024 * 1024)} MB: refused")
        chunks.append(chunk)


def _start_deaf(thread: threading.Thread) -> None:
    """Start a helper thread with SIGINT/SIGTERM blocked in it. The kernel gives a process
    signal to any thread that does not block it: had the timer thread taken the ^C, the main
    thread would sit in recv() until the deadline instead of stopping now."""
    if threading.current_thread() is not threading.main_thread():
        thread.start()
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        thread.start()  # a new thread starts with its creator's mask
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _once(endpoint: Endpoint, method: str, path: str, body: bytes | None,
          deadline: float) -> tuple[http.client.HTTPResponse, bytes]:
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise SmokeError("timed out")
    conn = _connection(endpoint, remaining)
    expired = threading.Event()
    sockets: list[socket.socket] = []

    def cut() -> None:  # the deadline covers headers and body, however slowly they come
        expired.set()
        for sock in sockets:  # (conn.sock is None once a closing answer's headers are read)
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    timer = threading.Timer(remaining, cut)
    timer.daemon = True
    _start_deaf(timer)
    try:
        conn.connect()
        sockets.append(conn.sock)
        if expired.is_set():
            cut()
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        conn.request(method, endpoint.base_path + path, body=body, headers=headers)
        response = conn.getresponse()
        payload = _read_body(response)
        if expired.is_set():  # the body ended because the deadline closed the socket
            raise SmokeError("timed out")
        if response.length:  # fewer bytes than Content-Length announced
            raise Dropped("IncompleteRead")
        return response, payload
    except (http.client.RemoteDisconnected, ConnectionResetError,
            http.client.IncompleteRead, BrokenPipeError) as exc:
        if expired.is_set():
            raise SmokeError("timed out") from None
        raise Dropped(type(exc).__name__) from None
    except TimeoutError:
        raise SmokeError("timed out") from None
    except (OSError, http.client.HTTPException) as exc:
        if expired.is_set():
            raise SmokeError("timed out") from None
        raise SmokeError(printable(str(getattr(exc, "strerror", None) or exc))) from None
    finally:
        timer.cancel()
        conn.close()


def request(endpoint: Endpoint, method: str, path: str, doc: dict[str, Any] | None,
            timeout: float) -> Answer:
    """One request, redirects followed only within the same origin, bounded by ``timeout``."""
    start = time.monotonic()
    deadline = start + timeout
    body = json.dumps(doc).encode() if doc is not None else None
    current = endpoint
    for _ in range(MAX_REDIRECTS + 1):
        response, payload = _once(current, method, path, body, deadline)
        if response.status not in (301, 302, 303, 307, 308):
            return Answer(response.status, payload, time.monotonic() - start)
        location = response.getheader("Location") or ""
        target = urllib.parse.urljoin(f"{current.shown()}{path}", location)
        try:
            if not target.isascii():  # a Location is latin-1 on the wire: not sendable
                raise ValueError(target)
            moved = parse_url(target)
        except ValueError:
            raise SmokeError(f"redirect to an invalid location ({printable(location[:200])})") \
                from None
        if moved.origin != endpoint.origin:
            raise SmokeError(f"the server redirects to another host ({printable(moved.shown())}"
                             "): not followed; point --url at the server itself")
        parts = urllib.parse.urlsplit(target)
        current, path = Endpoint(moved.scheme, moved.host, moved.port, ""), \
            parts.path + (f"?{parts.query}" if parts.query else "")
    raise SmokeError(f"more than {MAX_REDIRECTS} redirects")


def _doc(body: bytes, what: str) -> Any:
    """The server's JSON, bounded (ascendpatch.untrusted): a hostile answer nested 100,000
    deep is "not a model list", never a RecursionError."""
    return load_json(body, what)


def models(endpoint: Endpoint, timeout: float) -> tuple[Step, list[str]]:
    url = f"{endpoint.shown()}/v1/models"
    try:
        answer = request(endpoint, "GET", "/v1/models", None, timeout)
    except SmokeError as exc:
        return Step(False, f"GET {url} failed: {exc}; is the server up?"), []
    if answer.status != 200:
        return Step(False, f"GET {url} answered {answer.status}", answer.seconds), []
    try:
        ids = [str(m["id"]) for m in _doc(answer.body, "the model list")["data"]]
    except (ValueError, KeyError, TypeError):
        return Step(False, f"GET {url}: not an OpenAI model list", answer.seconds), []
    shown = printable(", ".join(ids)) or "no model"
    return Step(True, f"GET /v1/models: 200 in {answer.seconds * 1000:.0f} ms, serving "
                      f"{shown}", answer.seconds), ids


def wait_ready(endpoint: Endpoint, seconds: float, timeout: float,
               sleep: Callable[[float], None] = time.sleep) -> Step:
    """Poll GET /v1/models until it answers 200 (the readiness check of a serving script:
    the server loads its weights before it listens)."""
    start = time.monotonic()
    deadline = start + seconds
    tries = 0
    last = ""
    while True:
        tries += 1
        left = deadline - time.monotonic()
        step, _ = models(endpoint, max(0.1, min(timeout, left)))
        if step.ok:
            took = time.monotonic() - start
            return Step(True, f"server ready after {took:.0f} s ({tries} tries)", took)
        last = step.message
        if time.monotonic() + 1.0 > deadline:
            return Step(False, f"server not ready after {seconds:g} s ({tries} tries); last: "
                               f"{last}", time.monotonic() - start)
        sleep(1.0)


def _engine_died(endpoint: Endpoint, model: str) -> str | None:
    """After an empty 500 on the top_p request: is the server gone too?"""
    time.sleep(0.5)  # vLLM shuts the API server down right after EngineDeadError
    step, _ = models(endpoint, 5.0)
    if step.ok:
        return None
    return (f"EngineCore died on the top_p request: POST /v1/chat/completions with top_p=0.9 "
            f"for {printable(model)!r} answered 500 with an empty body, then GET /v1/models "
            f"failed; the fused top-k/top-p operator is missing or failed on this host "
            f"(vllm-ascend selects it with no check)")


def chat(endpoint: Endpoint, model: str, timeout: float) -> Step:
    body = {"model": model, "messages": [{"role": "user", "content": "Reply with OK."}],
            "max_tokens": 8, "temperature": 0.7, "top_p": 0.9}
    url = f"{endpoint.shown()}/v1/chat/completions"
    try:
        answer = request(endpoint, "POST", "/v1/chat/completions", body, timeout)
    except Dropped as exc:
        return Step(False, f"the server dropped the connection on a top_p=0.9 request ({exc}): "
                           f"EngineCore has probably died on the fused top-k/top-p operator",
                    fix=FIX_TOP_P)
    except SmokeError as exc:
        return Step(False, f"POST {url} failed: {exc}")
    took = answer.seconds
    if answer.status == 404:
        return Step(False, f"POST /v1/chat/completions: 404 for model {printable(model)!r}: the "
                           "request's model id must be the id the server exposes (its model "
                           "path unless --served-model-name is set)", took)
    if answer.status == 500 and not answer.body.strip():
        died = _engine_died(endpoint, model)
        if died:
            return Step(False, died, took, fix=FIX_TOP_P)
    if answer.status != 200:
        excerpt = printable(answer.body[:200].decode(errors="replace"))
        return Step(False, f"POST /v1/chat/completions: {answer.status}: {excerpt}", took)
    try:
        text = _doc(answer.body, "the chat answer")["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        return Step(False, "POST /v1/chat/completions: 200 but no choices in the answer", took)
    return Step(True, f"chat completion with top_p=0.9: 200 in {took * 1000:.0f} ms "
                      f"({len(str(text))} characters)", took)


def valid_seconds(value: float) -> bool:
    return math.isfinite(value) and value > 0
