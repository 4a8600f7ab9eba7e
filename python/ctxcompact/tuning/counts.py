"""Which count a replay gets: the exact counts of the family its model is
counted in (``scans.overflow.method_for``, ``family_for``) where the model is known, the
config's estimate where it is not; an estimate method set explicitly (the
config's ``estimate_method``: ``--method``, a file, the environment) wins.
The parts are counted once: an exact method reads ``Transcript.count``'s
columns (``ingest --count``) where they hold, and counts the rest as it goes."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from ctxcompact.config import CompactionConfig
from ctxcompact.estimators import EXACT_METHODS, count_label
from ctxcompact.scans.overflow import method_for

#: A model as OpenCode records it in a message's JSON.
_MODEL_ID = r'"modelID":"(?P<model>[^"\\]+)"'


def recorded_model(table: pa.Table | None) -> str | None:
    """The model the runs of ``table`` record (an assistant message's
    ``modelID``), when they record one and only one."""
    if table is None or "message_json" not in table.column_names:
        return None
    found = pc.extract_regex(pc.drop_null(table.column("message_json")), _MODEL_ID)
    models = pc.unique(pc.drop_null(pc.struct_field(found, "model"))).to_pylist()
    return models[0] if len(models) == 1 else None


def run_method(config: CompactionConfig, models: Sequence[str], table: pa.Table | None) -> str:
    """The method a replay of ``table`` counts with (see the module doc):
    ``models`` are the models it is priced under (the first decides), else
    the model the runs record."""
    model = models[0] if models else recorded_model(table)
    return str(method_for(config, model))


def with_run_method(config: CompactionConfig, models: Sequence[str],
                    table: pa.Table | None) -> CompactionConfig:  # fmt: skip
    """``config`` counting as ``run_method`` says (the same config when it does already)."""
    method = run_method(config, models, table)
    if method == config.estimate_method:
        return config
    from ctxcompact.scans.vocabularies import core_name

    if method in EXACT_METHODS:
        core_name(method.removesuffix("-exact"))  # a vocabulary not built in: loaded now
    copy = config.model_copy(update={"estimate_method": method})
    return copy


__all__ = ["count_label", "recorded_model", "run_method", "with_run_method"]
