"""`ascendpatch smoke` against a small OpenAI-compatible server started on 127.0.0.1."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from typing import ClassVar

import pytest

from tests.kit import run_cli


class Server(http.server.BaseHTTPRequestHandler):
    mode: ClassVar[str] = "ok"
    served: ClassVar[str] = "/models/Muse-Glimmer-30B-w8a8"

    def _send(self, status: int, doc: object) -> None:
        body = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path == "/v1/models":
            self._send(200, {"object": "list", "data": [{"id": self.served, "object": "model"}]})
        else:
            self._send(404, {"error": "not found"})

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if Server.mode == "drop" and request.get("top_p", 1.0) < 1.0:
            self.connection.shutdown(2)  # what a dead EngineCore looks like to a client
            self.close_connection = True
            return
        if request["model"] != self.served:
            self._send(404, {"message": f"The model `{request['model']}` does not exist."})
            return
        self._send(200, {"choices": [{"message": {"role": "assistant", "content": "OK"}}]})

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def url() -> Iterator[str]:
    Server.mode = "ok"
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Server)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


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


def test_nothing_listening() -> None:
    result = run_cli("smoke", "--url", "http://127.0.0.1:9", "--timeout", "5")
    assert result.code == 1 and "is the server up?" in result.out
