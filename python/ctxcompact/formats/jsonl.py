"""One line of a JSONL file, parsed, or a ``FormatError`` saying why not.

The callers add the file and line number; every JSONL reader in ctxcompact
(``formats.read``, Claude Code files, the Python side of ``read_jsonl``)
reports bad lines with the same words.
"""

from __future__ import annotations

import json
from typing import Any

from ctxcompact.errors import FormatError


def parse_line(raw: bytes) -> Any:
    """``json.loads`` of UTF-8 bytes; ``FormatError`` for bad UTF-8 or bad JSON."""
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise FormatError(f"not valid UTF-8 ({e.reason} at byte {e.start})") from None
    except ValueError as e:
        raise FormatError(f"not valid JSON ({e})") from None
