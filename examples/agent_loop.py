"""An agent loop with compaction, end to end, on embedded defaults.

A local server speaking the OpenAI Chat Completions wire format plays the
model (no key, no network); the official ``openai`` SDK talks to it; the
session lives in SQLite. The window is tiny (16k tokens) and the agent reads
big files, so the session fills up and compacts several times.

    pip install "ctxcompact[openai]"         # the example needs the openai SDK
    python examples/agent_loop.py            # prints the events and a summary
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import ctxcompact as cc
from ctxcompact.clients.openai import OpenAIChatClient
from ctxcompact.live import from_openai_chat, prompts, run_tools
from ctxcompact.live.store import new_id
from ctxcompact.scans.chat import estimate_chat_messages
from ctxcompact.testing.servers import FakeOpenAIServer, Reply

TOOLS = [{"type": "function", "function": {
    "name": "read", "description": "Read a file",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}]  # fmt: skip


def read(path: str) -> str:
    """The agent's one tool: a pretend file of about 2k tokens."""
    return f"# {path}\n" + "x = 1\n" * 1500


def respond(body: dict[str, Any]) -> Reply:
    """The pretend model: summarize when asked by the compaction agent, else read files."""
    messages = body["messages"]
    used = estimate_chat_messages(messages)
    if messages[0]["content"] == prompts.SYSTEM_PROMPT:
        return Reply("## Session Summary\nRead src/ files one by one; next: the rest.",
                     input_tokens=used, output_tokens=20)  # fmt: skip
    last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
    reads = sum(1 for m in messages[last_user:] if m["role"] == "tool")
    if reads >= 3:
        return Reply("Done with this batch.", input_tokens=used, output_tokens=8)
    path = f"src/module_{len(messages)}.py"
    call = {"id": new_id("call"), "name": "read", "arguments": json.dumps({"path": path})}
    return Reply("", finish="tool_calls", tool_calls=[call], input_tokens=used, output_tokens=12)


def run(workdir: Path, turns: int = 4, *, verbose: bool = True) -> dict[str, Any]:
    import openai

    events: list[str] = []
    with FakeOpenAIServer(responder=respond) as server:
        sdk = openai.OpenAI(base_url=server.base_url, api_key="local", max_retries=0)
        config = cc.CompactionConfig(prune_protect=2_000, prune_minimum=1_000)
        summarizer = cc.Summarizer(OpenAIChatClient("local-model", client=sdk), config)
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
                reply = sdk.chat.completions.create(model="local-model", messages=messages,
                                                    tools=TOOLS)  # type: ignore[arg-type]  # fmt: skip
                message = from_openai_chat(reply)  # text, tool calls, usage, finish
                run_tools(message, {"read": read})
                decision = loop.after_step(session, message)
                if decision.done:
                    break
        records = store.records(session)
        stored = store.load(session)
        store.close()
        sdk.close()
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
    try:
        import openai  # noqa: F401
    except ImportError:
        sys.exit('this example needs the openai SDK: pip install "ctxcompact[openai]"')
    with tempfile.TemporaryDirectory() as tmp:
        result = run(Path(tmp))
    print(json.dumps({k: v for k, v in result.items() if k != "events"}, indent=2))
    sys.exit(0 if result["compactions"] else 1)


if __name__ == "__main__":
    main()
