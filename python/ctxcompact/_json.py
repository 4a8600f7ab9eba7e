"""JSON text as every reader of user data parses it (formats, Parquet ``*_json``
columns): ``json.loads`` with one rule for text nested too deeply."""

from __future__ import annotations

import json
from typing import Any

#: Why a JSON text nested past Python's recursion limit is refused (json.loads
#: raises ``RecursionError``; the native reader refuses past 128 levels).
TOO_DEEP = "nested too deeply: arrays and objects nest past the parser's limit"


class TooDeep(ValueError):
    """A JSON text nested past the parser's limit: a ``ValueError``, as
    ``json.loads``'s own errors are, so every caller that turns bad JSON into
    a typed error (``FormatError``, ``DatasetError``) turns this one too."""


def loads(text: str | bytes) -> Any:
    """``json.loads``; a text nested past the recursion limit is a ``ValueError``
    saying so (``TOO_DEEP``) rather than a ``RecursionError``, so every caller
    that refuses bad JSON refuses it too. A key given twice in an object keeps
    its last value (as serde_json, the native reader's parser, does)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise TooDeep(TOO_DEEP) from None
