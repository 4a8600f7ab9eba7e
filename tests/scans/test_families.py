"""Which tokenizer family a model counts in (``family_for``), and the exact
per-part count columns (``count_parts``)."""

from __future__ import annotations

import pytest
from ctxcompact.errors import InputTypeError
from ctxcompact.scans import family_for
from ctxcompact.scans.overflow import BUILTIN_LIMITS, TOKENIZER_FAMILIES


@pytest.mark.parametrize(
    ("model", "family"),
    [
        ("gpt-4o-2024-08-06", "o200k"),
        ("gpt-4o-mini", "o200k"),
        ("openai/gpt-4.1-mini", "o200k"),
        ("azure/GPT-4o", "o200k"),
        ("gpt-5-2025-08-07", "o200k"),
        ("o1-mini", "o200k"),
        ("o3", "o200k"),
        ("o4-mini-2025-04-16", "o200k"),
        ("gpt-4", "cl100k"),
        ("gpt-4-turbo-2024-04-09", "cl100k"),
        ("gpt-3.5-turbo", "cl100k"),
        ("llama-3.1-70b-instruct", "llama3"),
        ("meta-llama/Llama-3.3-70B-Instruct", "llama3"),
        ("qwen2.5-coder-32b", "qwen"),
        ("mistral-large-latest", "tekken"),
        ("codestral-2501", "tekken"),
        ("deepseek-chat", "deepseek"),
        ("claude-sonnet-4-5-20250929", None),
        ("gemini-2.5-pro", None),
        ("o100-unknown", None),
        ("my-own-model", None),
        (None, None),
    ],
)
def test_family_follows_the_model(model: str | None, family: str | None) -> None:
    assert family_for(model) == family


def test_every_builtin_model_has_its_family_or_an_estimate() -> None:
    for model in BUILTIN_LIMITS:
        expected = None if model.startswith("claude") else "o200k"
        if model.startswith(("gpt-4-", "gpt-3.5")) or model == "gpt-4":
            expected = "cl100k"
        assert family_for(model) == expected, model
    # a longer prefix is listed before any shorter prefix of it
    prefixes = [p for p, _ in TOKENIZER_FAMILIES]
    for i, p in enumerate(prefixes):
        assert not any(p.startswith(q) and q != p for q in prefixes[:i]), p


def test_a_model_that_is_not_a_name_is_an_input_type_error() -> None:
    with pytest.raises(InputTypeError):
        family_for(4)  # type: ignore[arg-type]
