"""JSONL session files straight into the part-row table (docs/schema.md).

``read_jsonl`` parses in Rust, on every core, with the GIL released, every
format ``ctxcompact.formats`` reads from JSONL: a session per line
(``opencode``, ``openai-chat``, ``openai-responses``, ``anthropic``,
``swe-agent``, ``openhands``), several per line (``tau-bench``: a list of
runs), a message per line (``opencode-messages``, a session's messages on
consecutive lines) or an event per line (``claude-code``, grouped into
sessions by ``sessionId`` within each file). The mapping is the Python
adapters' one, checked against them by the differential tests.

A line that cannot be read (not UTF-8, not JSON, not the format, a session
split across lines or read twice) either fails the run (``on_error="raise"``:
``FormatError`` naming the file and line) or is left out and reported
(``on_error="skip"``): in ``IngestResult.rejected`` and, with ``reject_path``,
in a JSONL file holding each line as it was. Nothing is dropped silently.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa

from ctxcompact import _core
from ctxcompact.atomic import replacing
from ctxcompact.columnar import SCHEMA
from ctxcompact.errors import ConfigError, FormatError
from ctxcompact.estimate import check_threads
from ctxcompact.formats import FORMATS, jsonl_format
from ctxcompact.transcript import Transcript

#: Formats parsed natively (in Rust) by ``read_jsonl``: every format ``formats`` reads.
NATIVE_FORMATS = FORMATS
OnError = Literal["raise", "skip"]


@dataclass(frozen=True)
class RejectedLine:
    """A line left out of the table (``on_error="skip"``), as it was in the file."""

    path: str
    line: int
    error: str
    session_id: str | None
    message_id: str | None
    raw: bytes

    def to_json(self) -> dict[str, Any]:
        """The reject-file record: ``raw`` as text when it is UTF-8, else ``raw_base64``."""
        record: dict[str, Any] = {
            "path": self.path,
            "line": self.line,
            "error": self.error,
            "session_id": self.session_id,
            "message_id": self.message_id,
        }
        try:
            record["raw"] = self.raw.decode("utf-8")
        except UnicodeDecodeError:
            record["raw_base64"] = base64.b64encode(self.raw).decode("ascii")
        return record


@dataclass(frozen=True)
class IngestResult:
    """The part rows of every session read, and what was left out."""

    table: pa.Table
    rejected: list[RejectedLine] = field(default_factory=list)
    #: Non-blank lines read (kept or rejected).
    lines: int = 0
    sessions: int = 0
    format: str = ""

    @property
    def transcript(self) -> Transcript:
        return Transcript(self.table)


def jsonl_files(paths: str | Path | Iterable[str | Path]) -> list[Path]:
    """The files to read: each path, with a directory expanded to its ``*.jsonl`` (sorted)."""
    items = [paths] if isinstance(paths, str | Path) else list(paths)
    files: list[Path] = []
    for item in items:
        path = Path(item)
        if path.is_dir():
            files += sorted(p for p in path.rglob("*.jsonl") if p.is_file())
        else:
            files.append(path)
    return files


def detect_jsonl_format(path: str | Path) -> str:
    """The format of a JSONL file, from its first non-blank line."""
    with open(path, "rb") as f:
        for n, raw in enumerate(f, 1):
            if raw.strip():
                try:
                    first = json.loads(raw.decode("utf-8-sig"))
                except (UnicodeDecodeError, ValueError) as e:
                    raise FormatError(f"{path}:{n}: cannot tell the format: {e}", row=n) from None
                return jsonl_format(first)
    raise FormatError(f"{path}: no JSON lines to tell the format from")


def read_jsonl(
    paths: str | Path | Iterable[str | Path],
    format: str | None = None,
    *,
    on_error: OnError = "raise",
    reject_path: str | Path | None = None,
    threads: int | None = None,
    chunk_bytes: int = 1 << 20,
) -> IngestResult:
    """Read JSONL session files into one part-row table (``transcript`` for the scans).

    ``format=None`` detects it from the first file's first line. ``threads``:
    ``None`` = one per core. ``chunk_bytes`` is the unit of parallel work (whole
    lines). With ``reject_path`` the rejected lines are written there (JSONL,
    written atomically, also when empty) so a rerun can pick them up.
    """
    if on_error not in ("raise", "skip"):
        raise ConfigError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
    if not isinstance(chunk_bytes, int) or isinstance(chunk_bytes, bool) or chunk_bytes < 1:
        raise ConfigError(f"chunk_bytes must be a positive integer, got {chunk_bytes!r}")
    threads = check_threads(threads)
    files = jsonl_files(paths)
    for path in files:
        if not path.is_file():
            raise FormatError(f"{path}: no such file")
    if not files:
        return IngestResult(SCHEMA.empty_table(), format=format or "")
    fmt = format or detect_jsonl_format(files[0])
    names = [str(p) for p in files]
    table, raw_rejects, lines, sessions = _core.ingest_jsonl(
        names, fmt, on_error, threads=threads, chunk_bytes=chunk_bytes
    )
    rejected = [RejectedLine(names[i], line, error, sid, mid, raw)
                for i, line, error, sid, mid, raw in raw_rejects]  # fmt: skip
    result = IngestResult(pa.table(table), rejected, lines, sessions, fmt)
    if reject_path is not None:
        write_rejects(result.rejected, reject_path)
    return result


def write_rejects(rejected: Sequence[RejectedLine], path: str | Path) -> None:
    """Write rejected lines as JSONL, atomically (a temporary file renamed into place)."""
    with replacing(path) as tmp, tmp.open("w", encoding="utf-8") as f:
        for r in rejected:
            f.write(json.dumps(r.to_json(), ensure_ascii=False) + "\n")


__all__ = [
    "NATIVE_FORMATS",
    "IngestResult",
    "RejectedLine",
    "detect_jsonl_format",
    "jsonl_files",
    "read_jsonl",
    "write_rejects",
]
