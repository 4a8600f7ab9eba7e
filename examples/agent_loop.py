"""An agent loop with compaction, end to end, on embedded defaults.

The official ``openai`` SDK calls a pretend model that this script plays
itself, in process (no server, no key, no network; the SDK's HTTP client gets
a mock transport); the session lives in SQLite. The window is tiny (16k
tokens) and the agent reads big files, so the session fills up and compacts
several times. ``--base-url`` sends the same loop to a real OpenAI-compatible
server instead (``OPENAI_API_KEY`` as usual).

    pip install "ctxcompact[openai]"         # the example needs the openai SDK
    python examples/agent_loop.py            # prints the events and a summary
    python examples/agent_loop.py --base-url http://localhost:8000/v1 --model qwen3
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import ctxcompact as cc
from ctxcompact.clients.openai import OpenAIChatClient
from ctxcompact.live import from_openai_chat, prompts, run_tools
from ctxcompact.live.store import new_id
from ctxcompact.scans.chat import estimate_chat_messages

TOOLS = [{"type": "function", "function": {
    "name": "read", "description": "Read a file",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}]  # fmt: skip


def read(path: str) -> str:
    """The agent's one tool: a pretend file of about 2k tokens."""
    return f"# {path}\n" + "x = 1\n" * 1500


def completion(text: str, used: int, output: int, calls: list[dict[str, Any]] | None = None,
               ) -> dict[str, Any]:  # fmt: skip
    """A Chat Completions reply as the API sends it (tool calls finish with "tool_calls")."""
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = [{"id": c["id"], "type": "function", "function": c} for c in calls]
    return {"id": new_id("chatcmpl"), "object": "chat.completion", "created": 0,
            "model": "local-model",
            "choices": [{"index": 0, "message": message,
                         "finish_reason": "tool_calls" if calls else "stop"}],
            "usage": {"prompt_tokens": used, "completion_tokens": output,
                      "total_tokens": used + output}}  # fmt: skip


def respond(body: dict[str, Any]) -> dict[str, Any]:
    """The pretend model: summarize when asked by the compaction agent, else read files."""
    messages = body["messages"]
    used = estimate_chat_messages(messages)
    if messages[0]["content"] == prompts.SYSTEM_PROMPT:
        return completion("## Session Summary\nRead src/ files one by one; next: the rest.",
                          used, 20)  # fmt: skip
    last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
    reads = sum(1 for m in messages[last_user:] if m["role"] == "tool")
    if reads >= 3:
        return completion("Done with this batch.", used, 8)
    path = f"src/module_{len(messages)}.py"
    call = {"id": new_id("call"), "name": "read", "arguments": json.dumps({"path": path})}
    return completion("", used, 12, [call])


def pretend_model_sdk() -> Any:
    """The real ``openai`` SDK whose requests ``respond`` answers, in process."""
    import httpx
    import openai

    transport = httpx.MockTransport(
        lambda r: httpx.Response(200, json=respond(json.loads(r.content)))
    )
    return openai.OpenAI(base_url="http://pretend-model/v1", api_key="local", max_retries=0,
                         http_client=httpx.Client(transport=transport))  # fmt: skip


def run(workdir: Path, turns: int = 4, *, base_url: str | None = None,
        model: str = "local-model", verbose: bool = True) -> dict[str, Any]:  # fmt: skip
    import openai

    events: list[str] = []
    if base_url:
        api_key = os.environ.get("OPENAI_API_KEY", "local")
        sdk = openai.OpenAI(base_url=base_url, api_key=api_key)
    else:
        sdk = pretend_model_sdk()
    with sdk:
        config = cc.CompactionConfig(prune_protect=2_000, prune_minimum=1_000)
        # A real server streams the summary; the pretend model answers in one piece.
        client = OpenAIChatClient(model, client=sdk, stream=base_url is not None)
        summarizer = cc.Summarizer(client, config)
        store = cc.SQLiteStore(workdir / "sessions.db")
        compactor = cc.Compactor(store, summarizer, config=config,
                                 limits={"context": 16_000, "output": 2_000})  # fmt: skip

        def log(name: str, payload: dict[str, Any]) -> None:
            events.append(name)
            if verbose:
                shown = {k: v for k, v in payload.items() if k != "record"}
                print(f"  event {name} {shown}")

        compactor.events.subscribe("*", log)
        loop = cc.CompactionLoop(compactor, system="You are a coding agent.")
        session = store.create_session(title="agent loop example")
        for turn in range(turns):
            loop.add_user(session, f"Read the next files of src/ (batch {turn + 1}).")
            while True:
                messages = loop.before_call(session)
                reply = sdk.chat.completions.create(model=model, messages=messages,
                                                    tools=TOOLS)  # type: ignore[arg-type]  # fmt: skip
                message = from_openai_chat(reply)  # text, tool calls, usage, finish
                run_tools(message, {"read": read})
                decision = loop.after_step(session, message)
                if decision.done:
                    break
        records = store.records(session)
        stored = store.load(session)
        store.close()
    return {
        "compactions": len(records),
        "rounds": [r.round for r in records],
        "reasons": [r.reason for r in records],
        "sources": [r.summary_source for r in records],
        "tokens_before": [r.tokens_before for r in records],
        "tokens_after": [r.tokens_after for r in records],
        "messages_stored": len(stored.messages),
        "events": events,
        "metrics": compactor.metrics.snapshot(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description="An agent loop with compaction, end to end.")
    parser.add_argument("--base-url", help="an OpenAI-compatible server (default: the pretend "
                        "model, in process)")  # fmt: skip
    parser.add_argument("--model", default="local-model", help="the model to ask")
    args = parser.parse_args()
    try:
        import openai  # noqa: F401
    except ImportError:
        sys.exit('this example needs the openai SDK: pip install "ctxcompact[openai]"')
    with tempfile.TemporaryDirectory() as tmp:
        result = run(Path(tmp), base_url=args.base_url, model=args.model)
    print(json.dumps({k: v for k, v in result.items() if k != "events"}, indent=2))
    sys.exit(0 if result["compactions"] else 1)


if __name__ == "__main__":
    main()
