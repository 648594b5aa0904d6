"""`ascendpatch smoke` against small OpenAI-compatible servers started on 127.0.0.1 (threads)."""

from __future__ import annotations

import http.server
import json
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ascendpatch.deploy import smoke
from ascendpatch.deploy.text import printable
from tests.kit import TRACEBACK, run_cli

EVIL_ID = "model\x1b]0;pwned\x07\x1b[2J"
# a new line that forges an [OK] line, and rich markup that would open an OSC 8 link
FORGED_ID = "m\n[OK] chat completion with top_p=0.9: 200 \\[link=http://evil/]x\\[/link]"
DRIP_GAP = 0.25  # seconds between two bytes of a dripping answer
# Bodies real vLLM 0.22.1 sent (tests/test_smoke_realvllm.py runs that server)
ENGINE_DEAD = {"error": {"message": "EngineCore encountered an issue. See stack trace (above) for "
                                    "the root cause.", "type": "InternalServerError",
                         "param": None, "code": 500}}
TOO_LONG = {"error": {"message": "max_tokens=8 cannot be greater than max_model_len="
                                 "max_total_tokens=4. Please request fewer output tokens. "
                                 "(parameter=max_tokens, value=8)", "type": "BadRequestError",
                      "param": "max_tokens", "code": 400}}


class Server(http.server.BaseHTTPRequestHandler):
    mode: ClassVar[str] = "ok"
    served: ClassVar[str] = "/models/Muse-Glimmer-30B-w8a8"
    redirect_to: ClassVar[str] = ""
    hits: ClassVar[list[str]] = []

    def _send(self, status: int, doc: object) -> None:
        body = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _drip(self, data: bytes) -> None:
        for byte in data:  # one byte at a time, as a stuck or hostile server might
            try:
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
            except OSError:  # the client gave up, as it should (no traceback on stderr: a
                return  # later in-process test would capture it as its own output)
            time.sleep(DRIP_GAP)

    def do_GET(self) -> None:
        Server.hits.append(self.path)
        if self.path == "/v1/models" and Server.mode == "deep":
            body = b"[" * 200_000
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        elif self.path == "/v1/models" and Server.mode == "huge":
            self._send(200, {"data": [], "padding": "x" * (9 * 1024 * 1024)})
        elif self.path == "/v1/models" and Server.mode == "drip-body":
            self.send_response(200)
            self.send_header("Content-Length", "1000")
            self.end_headers()
            self._drip(b"{" * 1000)
        elif self.path == "/v1/models" and Server.mode == "drip-headers":
            self._drip(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
        elif self.path == "/v1/models" and Server.mode in ("redirect", "redirect-home"):
            self.send_response(302)
            self.send_header("Location", Server.redirect_to)
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif self.path in ("/v1/models", "/moved/v1/models"):
            served = {"evil": EVIL_ID, "forged": FORGED_ID}.get(Server.mode, self.served)
            self._send(200, {"object": "list", "data": [{"id": served, "object": "model"}]})
        else:
            self._send(404, {"error": "not found"})

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        top_p = request.get("top_p", 1.0) < 1.0
        if Server.mode == "drop" and top_p:
            self.connection.shutdown(2)  # what a dead EngineCore looks like to a client
            self.close_connection = True
            return
        if Server.mode == "died" and top_p:
            # vLLM answers 500 with no body on EngineDeadError, then the API server exits
            self.send_response(500)
            self.send_header("Content-Length", "0")
            self.end_headers()
            self.wfile.flush()
            threading.Thread(target=_stop, args=(self.server,), daemon=True).start()
            return
        if Server.mode in ("died-json", "500-alive") and top_p:
            self._send(500, ENGINE_DEAD)  # what vLLM 0.22.1 sends, then its API server exits
            if Server.mode == "died-json":
                threading.Thread(target=_stop, args=(self.server,), daemon=True).start()
            return
        if Server.mode == "too-long":
            self._send(400, TOO_LONG)
            return
        if request["model"] != self.served:
            self._send(404, {"message": f"The model `{request['model']}` does not exist."})
            return
        self._send(200, {"choices": [{"message": {"role": "assistant", "content": "OK"}}]})

    def log_message(self, *args: object) -> None:
        pass


def _stop(server: http.server.ThreadingHTTPServer) -> None:
    server.shutdown()
    server.server_close()


def _start(host: str = "127.0.0.1", port: int = 0) -> http.server.ThreadingHTTPServer:
    server = http.server.ThreadingHTTPServer((host, port), Server)
    server.daemon_threads = True
    # (a short poll interval: shutdown() waits for it, and every test stops a server)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    return server


@pytest.fixture
def url() -> Iterator[str]:
    Server.mode = "ok"
    Server.hits = []
    server = _start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_success(url: str) -> None:
    result = run_cli("smoke", "--url", url)
    assert result.code == 0, result.out
    assert "[OK] GET /v1/models: 200" in result.out
    assert "[OK] chat completion with top_p=0.9: 200 in" in result.out


def test_model_id_mismatch(url: str) -> None:
    result = run_cli("smoke", "--url", url, "--model", "Muse-Glimmer-30B")
    assert result.code == 1
    assert "[FAIL] model 'Muse-Glimmer-30B' is not what the server exposes" in result.out
    assert "POST /v1/chat/completions: 404" in result.out


def test_server_dropping_top_p_requests(url: str) -> None:
    Server.mode = "drop"
    result = run_cli("smoke", "--url", url, "--json")
    assert result.code == 1
    chat = next(r for r in result.json["results"] if r["id"] == "chat")
    assert chat["level"] == "FAIL"
    assert "dropped the connection on a top_p=0.9 request" in chat["message"]
    assert "ascendpatch apply sampler-topk-topp-fallback" in chat["message"]


def test_empty_500_then_dead_server_is_enginecore_dying(url: str) -> None:
    Server.mode = "died"
    result = run_cli("smoke", "--url", url)
    assert result.code == 1, result.out
    assert "[FAIL] EngineCore died on the top_p request" in result.out
    assert "fix: ascendpatch apply sampler-topk-topp-fallback" in result.out


@pytest.mark.parametrize(("mode", "expected"), [
    # vLLM 0.22.1's answer to EngineCore's death: on 89ee836 a bare ``500: {"error": ...``
    ("died-json", "[FAIL] EngineCore died on the top_p request: POST /v1/chat/completions with "
                  "top_p=0.9 for '/models/Muse-Glimmer-30B-w8a8' answered 500 (EngineCore "
                  "encountered an issue. See stack trace (above) for the root cause.), then "
                  "the server went away"),
    # (waits out the 3 s in which a dying vLLM would have gone)
    pytest.param("500-alive", "[FAIL] POST /v1/chat/completions: 500 (EngineCore encountered an "
                              "issue. See stack trace (above) for the root cause.), and the "
                              "server still answers: the serve log names the cause",
                 marks=pytest.mark.integration),
    ("too-long", "[FAIL] POST /v1/chat/completions: 400: the server refused smoke's short chat "
                 "request as invalid (max_tokens=8 cannot be greater than max_model_len="),
])
def test_vllm_error_answers_in_their_own_words(url: str, mode: str, expected: str) -> None:
    Server.mode = mode
    result = run_cli("smoke", "--url", url)
    assert result.code == 1, result.out
    assert expected in result.out
    assert ("fix: ascendpatch apply sampler-topk-topp-fallback" in result.out) == \
        (mode == "died-json")


def test_nothing_listening() -> None:
    result = run_cli("smoke", "--url", "http://127.0.0.1:9", "--timeout", "5")
    assert result.code == 1, result.out
    assert "connection refused: nothing listens on 127.0.0.1:9; is the server up?" in result.out


def test_a_huge_answer_is_refused(url: str) -> None:
    Server.mode = "huge"
    result = run_cli("smoke", "--url", url)
    assert result.code == 1 and "the answer is larger than 8 MB: refused" in result.out


def test_a_deeply_nested_answer_is_not_a_model_list(url: str) -> None:
    """200,000 open brackets: json.loads raised RecursionError on 89ee836 (exit 3)."""
    Server.mode = "deep"
    result = run_cli("smoke", "--url", url)
    assert result.code == 1, result.out + result.err
    assert "not an OpenAI model list" in result.out and "unexpected" not in result.err


# Waits out real timers (seconds): integration tier.
@pytest.mark.integration
@pytest.mark.parametrize("mode", ["drip-body", "drip-headers"])
def test_timeout_bounds_the_whole_request(url: str, mode: str) -> None:
    """A server dripping a byte every DRIP_GAP s never lets a per-read timeout expire: the
    deadline must cover the whole request."""
    Server.mode = mode
    timeout = 3 * DRIP_GAP  # every read is answered well within it
    start = time.monotonic()
    result = run_cli("smoke", "--url", url, "--timeout", str(timeout))
    took = time.monotonic() - start
    assert result.code == 1 and "failed: timed out" in result.out, result.out
    assert took < 4 * timeout, f"took {took:.1f} s with --timeout {timeout}"


def test_a_redirect_to_another_host_is_not_followed(url: str) -> None:
    other = _start("127.0.0.2")
    try:
        Server.mode = "redirect"
        Server.redirect_to = f"http://127.0.0.2:{other.server_address[1]}/v1/models"
        result = run_cli("smoke", "--url", url)
        assert result.code == 1
        assert "the server redirects to another host (http://127.0.0.2:" in result.out
        assert Server.hits == ["/v1/models"]  # 127.0.0.2 was never asked
    finally:
        other.shutdown()
        other.server_close()


def test_a_redirect_on_the_same_server_is_followed(url: str) -> None:
    Server.mode = "redirect-home"
    Server.redirect_to = "/moved/v1/models"
    result = run_cli("smoke", "--url", url)
    assert "[OK] GET /v1/models: 200" in result.out, result.out


def test_escape_sequences_from_the_server_are_neutralised(url: str) -> None:
    Server.mode = "evil"
    result = run_cli("smoke", "--url", url)
    assert "\x1b" not in result.out and "\x07" not in result.out
    assert "\\x1b]0;pwned\\x07" in result.out


@pytest.mark.parametrize("args", [
    ("--url", "http://[::1"), ("--url", "ftp://127.0.0.1"), ("--url", "http://127.0.0.1:99999"),
    ("--url", "http://127.0.0.1:1", "--timeout", "-1"),
    ("--url", "http://127.0.0.1:1", "--timeout", "nan"),
    ("--url", "http://127.0.0.1:1", "--timeout", "0"),
    ("--url", "http://127.0.0.1:1", "--wait", "nan"),
    ("--url", "http://127.0.0.1:1", "--wait", "-3"),
])
def test_bad_input_is_a_usage_error(args: tuple[str, ...]) -> None:
    result = run_cli("smoke", *args)
    assert result.code == 2, result.out + result.err
    assert TRACEBACK not in result.err


def test_url_credentials_are_never_echoed() -> None:
    result = run_cli("smoke", "--url", "http://admin:s3cret@127.0.0.1:9", "--timeout", "2")
    assert result.code == 1 and "s3cret" not in result.out + result.err


# Waits out real timers (seconds): integration tier.
@pytest.mark.integration
def test_wait_until_the_server_is_ready() -> None:
    with socket.socket() as probe:  # a free port, bound later by the "slow starting" server
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    Server.mode = "ok"
    started: list[http.server.ThreadingHTTPServer] = []
    timer = threading.Timer(0.5, lambda: started.append(_start(port=port)))
    timer.start()
    try:
        result = run_cli("smoke", "--url", f"http://127.0.0.1:{port}", "--wait", "30",
                         "--timeout", "2")
        assert result.code == 0, result.out
        assert "[OK] server ready after" in result.out
        assert "(1 tries)" not in result.out, "the first try came before the server"
    finally:
        timer.join()
        for server in started:
            server.shutdown()
            server.server_close()


# Waits out real timers (seconds): integration tier.
@pytest.mark.integration
def test_wait_gives_up_with_the_last_error() -> None:
    result = run_cli("smoke", "--url", "http://127.0.0.1:9", "--wait", "2", "--timeout", "1")
    assert result.code == 1
    assert "[FAIL] server not ready after 2 s" in result.out and "is the server up?" in result.out


@pytest.mark.parametrize("color", ["never", "always"])
def test_a_model_id_cannot_forge_lines_or_links(url: str, color: str) -> None:
    Server.mode = "forged"
    result = run_cli("smoke", "--url", url, "--color", color)
    lines = result.out.replace("\x1b[32m", "").replace("\x1b[0m", "").splitlines()
    assert not any(line.startswith("[OK] chat completion") for line in lines), result.out
    assert "\x1b]8" not in result.out and "\\x0a[OK] chat completion" in result.out
    assert "\\[link=http://evil/]x\\[/link]" in result.out  # shown as the server sent it


def test_a_redirect_to_a_non_ascii_location_is_a_clear_failure() -> None:
    """A Location header is latin-1 on the wire; a path http.client cannot send is refused,
    not an exit 3 crash."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)

        def answer() -> None:
            for _ in range(2):
                try:
                    conn, _ = listener.accept()
                except OSError:
                    return
                with conn:
                    conn.recv(65536)
                    conn.sendall(b"HTTP/1.1 302 Found\r\nLocation: /v1/mod\xe9ls\x1b[2J\r\n"
                                 b"Content-Length: 0\r\nConnection: close\r\n\r\n")

        threading.Thread(target=answer, daemon=True).start()
        result = run_cli("smoke", "--url", f"http://127.0.0.1:{listener.getsockname()[1]}",
                         "--timeout", "5")
    assert result.code == 1, result.out + result.err
    assert "redirect to an invalid location" in result.out and "\x1b" not in result.out


def _blocked(native_id: int) -> int:
    status = Path(f"/proc/self/task/{native_id}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines()
                    if line.startswith("SigBlk:")), 16)


def test_the_deadline_thread_never_takes_a_ctrl_c() -> None:
    """The kernel hands a process signal to any thread that does not block it; the deadline
    timer blocks SIGINT/SIGTERM, so ^C always reaches the main thread, which is in recv()."""
    interrupt, terminate = 1 << (signal.SIGINT - 1), 1 << (signal.SIGTERM - 1)
    deaf, plain = threading.Timer(60, lambda: None), threading.Timer(60, lambda: None)
    try:
        smoke._start_deaf(deaf)
        plain.start()  # the control: a thread started as before
        assert deaf.native_id is not None and plain.native_id is not None
        assert _blocked(deaf.native_id) & (interrupt | terminate) == interrupt | terminate
        assert _blocked(plain.native_id) & interrupt == 0
        assert _blocked(threading.get_native_id()) & interrupt == 0  # restored in the caller
    finally:
        deaf.cancel()
        plain.cancel()


_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=400),
                     lambda inner: st.lists(inner, max_size=4) |
                     st.dictionaries(st.sampled_from(["error", "message", "type", "x"]) |
                                     st.text(max_size=8), inner, max_size=4),
                     max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(body=_JSON.map(lambda doc: json.dumps(doc).encode()) | st.binary(max_size=600))
def test_any_error_body_gives_a_short_printable_reason_or_none(body: bytes) -> None:
    """Whatever a server sends as an error body: never an exception, at most 300 characters,
    nothing deploy.text.printable would escape (it is shown on a terminal, on one line)."""
    said = smoke.vllm_error(body)
    assert said is None or (0 < len(said) <= 300 and printable(said) == said)
