"""Endpoint smoke test: GET /v1/models, then one short chat completion with top_p=0.9 (the
request that killed EngineCore when the fused top-k/top-p operator was missing,
vllm-project/vllm-ascend#11999). Standard library HTTP only.

What vLLM 0.22.1 really answers (tests/test_smoke_realvllm.py runs it): an error is a JSON
``{"error": {"message", "type", "param", "code"}}``; when EngineCore dies on a request the API
server answers 500 with ``EngineCore encountered an issue. See stack trace (above) for the
root cause.`` and exits a fraction of a second later (older servers sent an empty 500); an
unknown model is 404 ``The model `X` does not exist.``; a request it cannot serve is 400 with
its reason. While it loads the model its port is bound but not listening: connection refused,
exactly as with no server at all, so on this host the process table tells the two apart.

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

from ascendpatch.deploy import procs
from ascendpatch.deploy.launch import flag_value
from ascendpatch.deploy.text import printable
from ascendpatch.results import Hint, Phrase
from ascendpatch.untrusted import load_json

MAX_BODY = 8 * 1024 * 1024
MAX_REDIRECTS = 5
WAIT_HINT = 600  # seconds: a large model loads in minutes
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


class Refused(SmokeError):
    """Nothing accepts connections on the address (ECONNREFUSED)."""


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
    except ConnectionRefusedError:
        raise Refused("connection refused") from None
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
    except Refused:
        return refused(endpoint, url), []
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


def refused(endpoint: Endpoint, url: str) -> Step:
    """Connection refused: no server, or (found on this host) a vllm serve still starting."""
    starting = local_server(endpoint)
    if starting is not None:
        return Step(False, f"GET {url}: connection refused, and vllm serve (PID {starting}) "
                           f"for port {endpoint.port} is running on this host: it is still "
                           "starting (vLLM accepts connections once the model is loaded)",
                    fix=Phrase("wait for it: ", Hint(("smoke", "--url", endpoint.shown(),
                                                        "--wait", str(WAIT_HINT)))))
    return Step(False, f"GET {url}: connection refused: nothing listens on "
                       f"{printable(endpoint.host)}:{endpoint.port}; is the server up? (on this "
                       "host and port; vLLM also refuses connections until its model is "
                       "loaded: --wait SECONDS waits for it)")


def local_server(endpoint: Endpoint) -> int | None:
    """The PID of a live ``vllm serve`` on this host for the endpoint's port (vLLM's default
    8000 when its command line gives none); None for an address not on this host."""
    if endpoint.host.lower() not in _LOOPBACK and not endpoint.host.startswith("127."):
        return None
    for proc in procs.all_procs():
        argv = proc.argv
        if proc.is_vllm_server and not proc.is_vllm and not proc.zombie and \
                (flag_value(argv, "--port") or "8000") == str(endpoint.port):
            return proc.pid
    return None


_LOOPBACK = ("localhost", "::1", "0.0.0.0")


def vllm_error(body: bytes) -> str | None:
    """The message of vLLM's error answer ``{"error": {"message": ...}}`` (escaped, at most
    300 characters), or None when the body is not one."""
    try:
        error = _doc(body, "the error answer")["error"]
        message = error["message"] if isinstance(error, dict) else error
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(message, str) or not message.strip():
        return None
    text = printable(message.strip())
    return text if len(text) <= 300 else text[:297] + "..."


def _gone(endpoint: Endpoint, seconds: float = 3.0,
          sleep: Callable[[float], None] = time.sleep) -> bool:
    """After a 500 on the top_p request: does the server go away (vLLM shuts the API server
    down right after EngineDeadError, within a second)?"""
    deadline = time.monotonic() + seconds
    while True:
        sleep(0.25)
        step, _ = models(endpoint, 5.0)
        if not step.ok:
            return True
        if time.monotonic() > deadline:
            return False


def _engine_died(model: str, said: str | None) -> str:
    answered = f"answered 500 ({said})" if said else "answered 500 with an empty body"
    return (f"EngineCore died on the top_p request: POST /v1/chat/completions with top_p=0.9 "
            f"for {printable(model)!r} {answered}, then the server went away; the fused "
            f"top-k/top-p operator is missing or failed on this host (vllm-ascend selects it "
            f"with no check)")


def _refusal(status: int, said: str | None, model: str) -> str:
    """The words for an error answer other than EngineCore's death."""
    head = f"POST /v1/chat/completions: {status}"
    if status == 404:
        return (f"{head} for model {printable(model)!r} ({said or 'no such model'}): the "
                "request's model id must be the id the server exposes (its model path unless "
                "--served-model-name is set)")
    if status == 400:
        reason = said or "no reason given"
        return (f"{head}: the server refused smoke's short chat request as invalid ({reason}); "
                "its serve flags (--max-model-len) or the model (no chat template) say why")
    if status == 500:
        return (f"{head} ({said or 'empty body'}), and the server still answers: the serve log "
                "names the cause")
    return f"{head}: {said}" if said else f"{head}: (no JSON error message)"


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
    if answer.status != 200:
        said = vllm_error(answer.body)
        if said is None and answer.body.strip():
            said = printable(answer.body[:200].decode(errors="replace"))
        if answer.status == 500 and _gone(endpoint):
            return Step(False, _engine_died(model, said), took, fix=FIX_TOP_P)
        return Step(False, _refusal(answer.status, said, model), took)
    try:
        text = _doc(answer.body, "the chat answer")["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        return Step(False, "POST /v1/chat/completions: 200 but no choices in the answer", took)
    return Step(True, f"chat completion with top_p=0.9: 200 in {took * 1000:.0f} ms "
                      f"({len(str(text))} characters)", took)


def valid_seconds(value: float) -> bool:
    return math.isfinite(value) and value > 0
