"""Local model servers that speak the real OpenAI and Anthropic wire formats.

For the tests: point the official SDKs at ``server.base_url`` and
they run unmodified (JSON and server-sent-event streaming), with replies you
script. Listens on 127.0.0.1 only.

    with FakeOpenAIServer() as server:
        server.replies.append(Reply(text="notes", finish="length"))
        client = OpenAIChatClient("gpt-4o", base_url=server.base_url, api_key="x")
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """One scripted answer. ``status`` >= 400 sends an API error instead."""

    text: str = "ok"
    #: OpenAI finish_reason ("stop", "length", "tool_calls") or Anthropic stop_reason
    #: ("end_turn", "max_tokens", "tool_use"); "stop"/"length" are translated.
    finish: str = "stop"
    status: int = 200
    delay_s: float = 0.0
    #: Prompt tokens neither read from nor written to the cache (OpenAI's
    #: prompt_tokens are the sum of the three; Anthropic reports them apart).
    input_tokens: int = 10
    output_tokens: int = 5
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    #: OpenAI only (completion_tokens_details.reasoning_tokens, part of output_tokens).
    reasoning_tokens: int = 0
    #: Tool calls: [{"id", "name", "arguments"(json str)}]; Anthropic sends tool_use blocks.
    tool_calls: list[dict[str, str]] = field(default_factory=list)


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


Responder = Callable[[dict[str, Any]], Reply]


class _FakeServer:
    """Shared machinery: a threaded HTTP server, a reply queue, a request log."""

    def __init__(self, responder: Responder | None = None, default: Reply | None = None) -> None:
        self.replies: deque[Reply] = deque()
        self.requests: list[Received] = []
        self.responder = responder
        self.default = default or Reply()
        self._lock = threading.Lock()
        handler = self._handler_class()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    @property
    def root_url(self) -> str:
        return self.base_url.removesuffix("/v1")

    def start(self) -> _FakeServer:
        self._thread.start()
        return self

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def next_reply(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            if self.replies:
                return self.replies.popleft()
        return self.responder(body) if self.responder else self.default

    # --- per API -------------------------------------------------------------------
    path = ""

    def error_body(self, reply: Reply) -> dict[str, Any]:
        raise NotImplementedError

    def refuse(self, body: dict[str, Any]) -> dict[str, Any] | None:
        """The 400 body the real API sends for a request it refuses (None: accepted)."""
        return None

    def write_json(self, reply: Reply, body: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def write_stream(self, reply: Reply, body: dict[str, Any]) -> list[tuple[str | None, Any]]:
        raise NotImplementedError

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def handle(self) -> None:
                # A client that gave up (timeout) closes the socket mid-reply.
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    super().handle()

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b"{}"
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = {}
                with server._lock:
                    server.requests.append(Received(self.path, dict(self.headers), body))
                if not self.path.endswith(server.path):
                    return self._send(404, {"error": {"message": f"no route {self.path}"}})
                refused = server.refuse(body)
                if refused is not None:
                    return self._send(400, refused)
                reply = server.next_reply(body)
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                if reply.status >= 400:
                    return self._send(reply.status, server.error_body(reply))
                if body.get("stream"):
                    return self._stream(server.write_stream(reply, body))
                return self._send(200, server.write_json(reply, body))

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, events: list[tuple[str | None, Any]]) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.send_header("connection", "close")
                self.end_headers()
                for name, data in events:
                    text = data if isinstance(data, str) else json.dumps(data)
                    prefix = f"event: {name}\n" if name else ""
                    self.wfile.write(f"{prefix}data: {text}\n\n".encode())
                    self.wfile.flush()
                self.close_connection = True

        return Handler


def _chunks(text: str, size: int = 7) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


class FakeOpenAIServer(_FakeServer):
    """``POST /v1/chat/completions``, JSON or SSE chunks ending in ``[DONE]``."""

    path = "/chat/completions"

    def error_body(self, reply: Reply) -> dict[str, Any]:
        return {"error": {"message": reply.text, "type": "server_error", "code": None}}

    def _finish(self, reply: Reply) -> str:
        return {"end_turn": "stop", "max_tokens": "length"}.get(reply.finish, reply.finish)

    def _calls(self, reply: Reply) -> list[dict[str, Any]]:
        return [
            {"id": c["id"], "type": "function",
             "function": {"name": c["name"], "arguments": c["arguments"]}}
            for c in reply.tool_calls
        ]  # fmt: skip

    def _usage(self, reply: Reply) -> dict[str, Any]:
        prompt = reply.input_tokens + reply.cache_read_tokens + reply.cache_write_tokens
        usage: dict[str, Any] = {
            "prompt_tokens": prompt,
            "completion_tokens": reply.output_tokens,
            "total_tokens": prompt + reply.output_tokens,
        }
        if reply.cache_read_tokens or reply.cache_write_tokens:
            usage["prompt_tokens_details"] = {
                "cached_tokens": reply.cache_read_tokens,
                "cache_write_tokens": reply.cache_write_tokens,
            }
        if reply.reasoning_tokens:
            usage["completion_tokens_details"] = {"reasoning_tokens": reply.reasoning_tokens}
        return usage

    def write_json(self, reply: Reply, body: dict[str, Any]) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.text}
        if reply.tool_calls:
            message["tool_calls"] = self._calls(reply)
        return {
            "id": "chatcmpl-local",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "local"),
            "choices": [{"index": 0, "message": message, "finish_reason": self._finish(reply)}],
            "usage": self._usage(reply),
        }

    def write_stream(self, reply: Reply, body: dict[str, Any]) -> list[tuple[str | None, Any]]:
        base = {
            "id": "chatcmpl-local",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": body.get("model", "local"),
        }

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

        events: list[tuple[str | None, Any]] = [(None, chunk({"role": "assistant", "content": ""}))]
        events += [(None, chunk({"content": piece})) for piece in _chunks(reply.text)]
        for i, call in enumerate(self._calls(reply)):
            events.append((None, chunk({"tool_calls": [{"index": i, **call}]})))
        events.append((None, chunk({}, self._finish(reply))))
        if (body.get("stream_options") or {}).get("include_usage"):
            events.append((None, {**base, "choices": [], "usage": self._usage(reply)}))
        events.append((None, "[DONE]"))
        return events


class FakeAnthropicServer(_FakeServer):
    """``POST /v1/messages``, JSON or the Messages API's named SSE events."""

    path = "/messages"

    @property
    def base_url(self) -> str:  # the anthropic SDK appends /v1 itself
        return super().base_url.removesuffix("/v1")

    def error_body(self, reply: Reply) -> dict[str, Any]:
        return {"type": "error", "error": {"type": "api_error", "message": reply.text}}

    def refuse(self, body: dict[str, Any]) -> dict[str, Any] | None:
        # As the Messages API: tool blocks need tool definitions in the request.
        blocks = [b for m in body.get("messages") or [] if isinstance(m.get("content"), list)
                  for b in m["content"] if isinstance(b, dict)]  # fmt: skip
        if not body.get("tools") and any(b.get("type") in ("tool_use", "tool_result")
                                         for b in blocks):  # fmt: skip
            return {"type": "error", "error": {"type": "invalid_request_error", "message":
                    "Requests which include `tool_use` or `tool_result` blocks must define "
                    "tools."}}  # fmt: skip
        return None

    def _message(self, reply: Reply, body: dict[str, Any], content: list[Any]) -> dict[str, Any]:
        return {
            "id": "msg_local",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "local"),
            "content": content,
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {
                "input_tokens": reply.input_tokens,
                "output_tokens": 0,
                "cache_read_input_tokens": reply.cache_read_tokens,
                "cache_creation_input_tokens": reply.cache_write_tokens,
            },
        }

    def _stop(self, reply: Reply) -> str:
        stop = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}
        return stop.get(reply.finish, reply.finish)

    def _tool_uses(self, reply: Reply) -> list[dict[str, Any]]:
        return [
            {"type": "tool_use", "id": c["id"], "name": c["name"],
             "input": json.loads(c["arguments"] or "{}")}
            for c in reply.tool_calls
        ]  # fmt: skip

    def write_json(self, reply: Reply, body: dict[str, Any]) -> dict[str, Any]:
        text = [{"type": "text", "text": reply.text}] if reply.text or not reply.tool_calls else []
        message = self._message(reply, body, [*text, *self._tool_uses(reply)])
        message["stop_reason"] = self._stop(reply)
        message["usage"]["output_tokens"] = reply.output_tokens
        return message

    def write_stream(self, reply: Reply, body: dict[str, Any]) -> list[tuple[str | None, Any]]:
        events: list[tuple[str | None, Any]] = [
            ("message_start", {"type": "message_start", "message": self._message(reply, body, [])}),
            ("content_block_start", {"type": "content_block_start", "index": 0,
                                     "content_block": {"type": "text", "text": ""}}),
        ]  # fmt: skip
        for piece in _chunks(reply.text):
            events.append(
                ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                         "delta": {"type": "text_delta", "text": piece}})
            )  # fmt: skip
        events.append(("content_block_stop", {"type": "content_block_stop", "index": 0}))
        for i, use in enumerate(self._tool_uses(reply), start=1):
            raw = json.dumps(use["input"])
            events += [
                ("content_block_start", {"type": "content_block_start", "index": i,
                                         "content_block": {**use, "input": {}}}),
                *[("content_block_delta", {"type": "content_block_delta", "index": i,
                                           "delta": {"type": "input_json_delta",
                                                     "partial_json": piece}})
                  for piece in _chunks(raw)],
                ("content_block_stop", {"type": "content_block_stop", "index": i}),
            ]  # fmt: skip
        events += [
            ("message_delta", {"type": "message_delta",
                               "delta": {"stop_reason": self._stop(reply), "stop_sequence": None},
                               "usage": {"output_tokens": reply.output_tokens}}),
            ("message_stop", {"type": "message_stop"}),
        ]  # fmt: skip
        return events


__all__ = ["FakeAnthropicServer", "FakeOpenAIServer", "Received", "Reply"]
