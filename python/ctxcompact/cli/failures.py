"""The command's exit codes, and the two failures that are no data error: an
input that is missing or unreadable (exit 3), an output that cannot be
written (exit 5)."""

from __future__ import annotations

#: Exit status of every failure class (documented in --help and docs/config.md).
EXIT_OK, EXIT_DATA, EXIT_USAGE, EXIT_INPUT, EXIT_CONFIG, EXIT_OUTPUT = 0, 1, 2, 3, 4, 5


EXIT_CODES = (
    "Exit codes: 0 ok; 1 bad data (names the file, session, row or column); "
    "2 usage error (unknown option or value); 3 input missing or unreadable "
    "(also a --config file); 4 invalid configuration (a bad value, or a "
    "--context with no usable window); 5 output not writable (missing folder, "
    "a directory, no permission; nothing is left half-written)."
)


class InputNotFound(Exception):
    """Exit code 3."""


class OutputNotWritable(Exception):
    """Exit code 5."""
