"""The optional extras (``pip install 'ctxcompact[<extra>]'``): a module one
of them installs, imported when first used, or the typed error saying which
extra to install."""

from __future__ import annotations

import importlib
from typing import Any

from ctxcompact.errors import CompactionError


def from_extra(module: str, extra: str, needs: str, error: type[CompactionError]) -> Any:
    """``module`` (a dotted name: that submodule), imported; without it,
    ``error`` saying ``needs`` and the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError:  # pragma: no cover - exercised only without the extra
        raise error(f"{needs}: pip install 'ctxcompact[{extra}]'") from None
