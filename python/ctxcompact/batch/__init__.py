"""Batch compaction over Arrow: one batch, a Parquet dataset, or Ray Data.

``compact_batch`` is the pure function every engine runs; ``compact_parquet``
streams a dataset through it in bounded memory; ``ctxcompact.batch.ray_data``
(the ``ray`` extra) runs it on a cluster.
"""

from ctxcompact.batch.compact import REPORT_SCHEMA, compact_batch
from ctxcompact.batch.parquet import BatchReport, compact_parquet

__all__ = ["REPORT_SCHEMA", "BatchReport", "compact_batch", "compact_parquet"]
