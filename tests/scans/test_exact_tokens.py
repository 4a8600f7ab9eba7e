"""Exact o200k / cl100k counts from the core, checked against tiktoken itself.

tiktoken's vocabularies are downloads; here tiktoken is built from the files the
core has built in (rust/assets), checked against the hashes tiktoken pins, so the
reference is tiktoken's own encoder on tiktoken's own vocabulary, with no network.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
from functools import cache
from pathlib import Path
from typing import Any
from unittest import mock

import pyarrow as pa
import pytest
from ctxcompact.errors import ConfigError
from ctxcompact.scans import count_chat_tokens, count_tokens, count_tokens_array
from hypothesis import given, settings
from hypothesis import strategies as st

tiktoken = pytest.importorskip("tiktoken")
ASSETS = Path(__file__).resolve().parents[2] / "rust" / "assets"
TAU = Path(__file__).resolve().parents[3] / "shared" / "data" / "transcripts" / "tau-bench"
#: tiktoken_ext.openai_public's pinned hashes of the vocabulary files.
HASHES = {
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
}


@cache
def reference(name: str) -> Any:
    """tiktoken's own Encoding for ``name``, its ranks read from the built-in file."""
    raw = gzip.decompress((ASSETS / f"{name}.tiktoken.gz").read_bytes())
    assert hashlib.sha256(raw).hexdigest() == HASHES[name]  # the file tiktoken downloads
    lines = [line.split() for line in raw.decode().splitlines() if line]
    ranks = {base64.b64decode(tok): int(rank) for tok, rank in lines}
    import tiktoken_ext.openai_public as public

    with mock.patch.object(public, "load_tiktoken_bpe", lambda *a, **k: ranks):
        return tiktoken.Encoding(**getattr(public, name)())


FAMILIES = {"o200k": "o200k_base", "cl100k": "cl100k_base"}


def transcript_texts() -> list[str]:
    """Every message text of the shared tau-bench runs (prose, JSON, tool output)."""
    texts: list[str] = []
    for path in sorted(TAU.glob("*.json")):
        for run in json.loads(path.read_text(encoding="utf-8")):
            for m in run.get("traj") or []:
                if isinstance(m.get("content"), str) and m["content"]:
                    texts.append(m["content"])
                for call in m.get("tool_calls") or []:
                    texts.append(call["function"]["arguments"])
    return texts


@pytest.mark.skipif(not TAU.is_dir(), reason="needs ../shared/data")
@pytest.mark.parametrize("family", FAMILIES)
def test_every_shared_message_counts_as_tiktoken_counts_it(family: str) -> None:
    enc = reference(FAMILIES[family])
    texts = transcript_texts()
    assert len(texts) > 5_000
    counted = count_tokens_array(pa.array(texts), family).to_pylist()
    expected = [len(t) for t in enc.encode_ordinary_batch(texts)]
    assert counted == expected


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=300))
def test_random_text_counts_as_tiktoken_counts_it(text: str) -> None:
    for family, name in FAMILIES.items():
        assert count_tokens(text, family) == len(reference(name).encode_ordinary(text))  # type: ignore[arg-type]


#: Whitespace runs, contractions, digits, case changes: where the split rules differ.
TRICKY = st.lists(
    st.sampled_from([" ", "  ", "\n", "\t", "\r\n", "a", "B", "1", "'", "s", "'S", "é", "/",
                     "中", "!", "\u00a0", "x\u0301"]),
    max_size=40,
).map("".join)  # fmt: skip


@settings(max_examples=500, deadline=None)
@given(TRICKY)
def test_the_split_rules_match_tiktokens(text: str) -> None:
    for family, name in FAMILIES.items():
        assert count_tokens(text, family) == len(reference(name).encode_ordinary(text))  # type: ignore[arg-type]


def test_special_spellings_nulls_dictionaries_and_chunks() -> None:
    enc = reference("o200k_base")
    text = "the run printed <|endoftext|> then stopped"
    assert count_tokens(text) == len(enc.encode_ordinary(text))  # never raises
    values = pa.chunked_array([pa.array(["a b", None]), pa.array(["x"])])
    counted = count_tokens_array(values, "o200k")
    assert isinstance(counted, pa.ChunkedArray) and counted.to_pylist() == [2, None, 1]
    repeated = pa.array(["a b", "x", "a b", None]).dictionary_encode()  # each value counted once
    assert count_tokens_array(repeated, "cl100k").to_pylist() == [2, 1, 2, None]
    with pytest.raises(ConfigError, match="unknown tokenizer"):
        count_tokens_array(pa.array(["a"]), "llama3")  # type: ignore[arg-type]


def test_chat_counts_follow_openais_accounting() -> None:
    enc = reference("o200k_base")
    messages = [
        {"role": "system", "content": "You fix tests."},
        {"role": "user", "content": "run the suite", "name": "dev"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "bash", "arguments": '{"cmd": "pytest -q"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "3 passed"},
    ]  # fmt: skip

    def n(text: str) -> int:
        return len(enc.encode_ordinary(text))

    expected = 3 + sum(3 + n(m["role"]) + n(m["content"]) for m in messages)
    expected += n("bash") + n('{"cmd": "pytest -q"}') + 1 + n("dev")
    assert count_chat_tokens(messages) == expected  # type: ignore[arg-type]
