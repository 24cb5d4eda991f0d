"""A local OpenAI-compatible chat server for tests: answers /v1/chat/completions with scripted turns.

Each scripted step is one HTTP answer, taken in order:
- an assistant reply: {"content": str | None, "tool_calls": [{"id", "name", "arguments"}]} (arguments: a dict,
  sent as JSON, or a str sent verbatim, so a test can send malformed JSON);
- a failure: {"status": 429, "headers": {"Retry-After": "1"}}, {"status": 500}, {"status": 401, "body": ...};
- {"sleep": seconds} before answering the next step (a timeout, when the client gives up first);
- {"raw": "text"}: a 200 whose body is not JSON (a malformed reply).
When the script runs out the server answers "FINISH" (a model with nothing more to say).
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL = "fake-kernel-model"
LITELLM_NAME = f"openai/{MODEL}"  # what litellm is told: the fake speaks the OpenAI protocol


def register_price() -> None:
    """A price for the fake model, so litellm's cost tracking (and a money limit) has numbers."""
    import os

    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.register_model(
        {LITELLM_NAME: {"input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6, "litellm_provider": "openai",
                        "mode": "chat", "supports_function_calling": True}}
    )  # fmt: skip


def tool_call(name: str, arguments: dict[str, Any] | str, call_id: str | None = None) -> dict[str, Any]:
    return {
        "id": call_id or f"call_{name}_{time.monotonic_ns() % 10**9}",
        "name": name,
        "arguments": arguments,
    }


def reply(content: str | None = None, *calls: dict[str, Any]) -> dict[str, Any]:
    return {"content": content, "tool_calls": list(calls)}


class FakeOpenAI:
    """Start with `with FakeOpenAI(steps) as server:`; `server.api_base` goes to litellm's api_base."""

    def __init__(self, steps: list[dict[str, Any]], *, api_key: str | None = None) -> None:
        self.steps = list(steps)
        self.api_key = api_key  # when set, any other bearer token gets a 401 that echoes it (as OpenAI does)
        self.requests: list[dict[str, Any]] = []  # every request body received, in order
        self.times: list[float] = []  # when each request arrived (time.monotonic)
        self.lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> FakeOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def _next(self) -> dict[str, Any]:
        with self.lock:
            return self.steps.pop(0) if self.steps else reply("FINISH")

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

            def _send(self, status: int, body: str, headers: dict[str, str] | None = None) -> None:
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                with contextlib.suppress(
                    BrokenPipeError, ConnectionResetError
                ):  # the client gave up (a timeout)
                    self.wfile.write(data)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with server.lock:
                    server.requests.append(body)
                    server.times.append(time.monotonic())
                token = (self.headers.get("Authorization") or "").removeprefix("Bearer ").strip()
                if server.api_key is not None and token != server.api_key:
                    error = {
                        "message": f"Incorrect API key provided: {token}.",
                        "type": "invalid_request_error",
                    }
                    self._send(401, json.dumps({"error": error}))
                    return
                if body.get("model") != MODEL:
                    error = {
                        "message": f"The model `{body.get('model')}` does not exist",
                        "type": "invalid_request_error",
                    }
                    self._send(404, json.dumps({"error": error}))
                    return
                step = server._next()
                if "sleep" in step:
                    time.sleep(step["sleep"])
                    step = server._next()
                if "status" in step:
                    error = {
                        "message": step.get("body", f"scripted error {step['status']}"),
                        "type": "server_error",
                    }
                    self._send(step["status"], json.dumps({"error": error}), step.get("headers"))
                    return
                if "raw" in step:
                    self._send(200, step["raw"])
                    return
                self._send(200, json.dumps(_completion(step, body)))

        return Handler


def _completion(step: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": step.get("content")}
    calls = step.get("tool_calls") or []
    if calls:
        message["tool_calls"] = [
            {
                "id": c["id"],
                "type": "function",
                "function": {
                    "name": c["name"],
                    "arguments": c["arguments"]
                    if isinstance(c["arguments"], str)
                    else json.dumps(c["arguments"]),
                },
            }
            for c in calls
        ]
    prompt = sum(len(str(m.get("content") or "")) for m in request.get("messages", [])) // 4
    completion = (len(step.get("content") or "") + len(json.dumps(calls))) // 4 + 1
    return {
        "id": f"chatcmpl-{time.monotonic_ns()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": MODEL,
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        },
    }
