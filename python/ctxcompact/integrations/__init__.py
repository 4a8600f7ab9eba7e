"""Plug-ins for the agent frameworks people run: LangChain (``CompactionMiddleware``),
pydantic-ai (``CompactionProcessor``, a history processor), the OpenAI Agents SDK
(``CompactingSession``). ``chatlists`` holds what they share.

Each module imports its framework, so import the one you use
(``from ctxcompact.integrations.langchain import CompactionMiddleware``); the
extras ``langchain``, ``pydantic-ai`` and ``openai-agents`` install them.
"""
