"""Run the ctxcompact command in-process, as the console script does."""

from __future__ import annotations

import sys

import pytest
from ctxcompact.cli import main


def invoke(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, str, str]:
    """The exit code, stdout and stderr of ``ctxcompact *args``."""
    monkeypatch.setattr(sys, "argv", ["ctxcompact", *args])
    code = 0
    try:
        main()
    except SystemExit as e:
        code = int(e.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err
