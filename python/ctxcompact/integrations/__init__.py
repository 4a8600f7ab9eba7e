"""Plug-ins for the agent frameworks people run: LangChain (``CompactionMiddleware``),
pydantic-ai (``history_processor``), the OpenAI Agents SDK (``CompactingSession``).

Each module imports its framework, so import the one you use
(``from ctxcompact.integrations.langchain import CompactionMiddleware``); the
extras ``langchain``, ``pydantic-ai`` and ``openai-agents`` install them.
"""
