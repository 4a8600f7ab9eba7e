"""What an adapter kept of the record a model was read from.

Adapters store the parts of a foreign record that OpenCode's export has no
field for under a model's ``source`` extra (``result_source`` for a tool
result's own record), and the writers put them back: that is what makes every
round trip lossless. These two accessors are the only readers of it.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


def source_of(model: BaseModel, key: str = "source") -> Any:
    """The kept record as stored (``None`` when there is none)."""
    return (model.model_extra or {}).get(key)


def source_dict(model: BaseModel, key: str = "source") -> dict[str, Any]:
    """A fresh copy of the kept record (``{}`` when there is none), safe to edit."""
    return dict(source_of(model, key) or {})
