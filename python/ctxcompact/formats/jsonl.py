"""One line of a JSONL file, parsed, or a ``FormatError`` saying why not.

The callers add the file and line number; every JSONL reader in ctxcompact
(``formats.read``, Claude Code files, the Python side of ``read_jsonl``)
reports bad lines with the same words.
"""

from __future__ import annotations

from typing import Any

from ctxcompact._json import loads
from ctxcompact.errors import FormatError

#: Byte order marks of UTF-16 text (little and big endian).
UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
#: What a UTF-16 file is told, where it would be "not valid UTF-8 at byte 0".
UTF16 = "UTF-16 text (convert to UTF-8): it starts with a UTF-16 byte order mark"


def parse_line(raw: bytes) -> Any:
    """``json.loads`` of UTF-8 bytes; ``FormatError`` for bad UTF-8 (UTF-16 text
    named as such) or bad JSON."""
    if raw.startswith(UTF16_BOMS):
        raise FormatError(UTF16)
    try:
        return loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise FormatError(f"not valid UTF-8 ({e.reason} at byte {e.start})") from None
    except ValueError as e:
        raise FormatError(f"not valid JSON ({e})") from None


def iterable(value: Any) -> bool:
    """Whether the adapters can iterate ``value`` as Python does (an array, an object's
    keys, a string's characters); the native reader follows the same rule, so only
    numbers, booleans and null are refused for their type alone."""
    return isinstance(value, list | dict | str)


def json_kind(value: Any) -> str:
    """What a parsed JSON value is, in JSON's words, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object" if isinstance(value, dict) else type(value).__name__
