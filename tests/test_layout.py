"""The package's face: a curated top level, one public path per name (the
unreleased 0.1 layout's import paths are gone, not aliased)."""

from __future__ import annotations

import importlib
import subprocess
import sys
import warnings

import ctxcompact as cc
import pytest


def test_the_top_level_is_curated_and_imports_without_warnings() -> None:
    assert 20 <= len(cc.__all__) <= 30
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in cc.__all__:
            getattr(cc, name)


#: Import paths of the unreleased 0.1 layout, served by a shim until it was
#: removed: none of them may come back.
OLD_MODULES = [
    "ctxcompact.atomic", "ctxcompact.chat", "ctxcompact.columnar", "ctxcompact.estimate",
    "ctxcompact.events", "ctxcompact.history", "ctxcompact.ingest", "ctxcompact.lifecycle",
    "ctxcompact.loop", "ctxcompact.overflow", "ctxcompact.parquet", "ctxcompact.prompts",
    "ctxcompact.ray_data", "ctxcompact.reference", "ctxcompact.repair", "ctxcompact.replies",
    "ctxcompact.split", "ctxcompact.store", "ctxcompact.summary", "ctxcompact.synthetic",
    # test fixtures (wire servers, PostgreSQL launcher) moved to tests/support; the
    # generator and the reference to ctxcompact.batch.synthetic and .scans.reference
    "ctxcompact.testing",
]  # fmt: skip
OLD_NAMES = ["SummaryError", "TokenBudget", "EventBus", "SessionInfo", "SummaryRequest",
             "read_jsonl", "BatchReport"]  # fmt: skip


@pytest.mark.parametrize("old", OLD_MODULES)
def test_an_old_module_path_does_not_import(old: str) -> None:
    # A fresh interpreter: nothing imported earlier in this process can mask it.
    code = (
        "import importlib\n"
        "try:\n"
        f"    importlib.import_module({old!r})\n"
        "except ModuleNotFoundError as e:\n"
        "    print('gone', e.name)\n"
        "else:\n"
        "    print('IMPORTED')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["gone", old]


@pytest.mark.parametrize("name", OLD_NAMES)
def test_an_old_top_level_name_is_a_plain_attribute_error(name: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(AttributeError, match=rf"has no attribute '{name}'"):
            getattr(cc, name)
    assert not hasattr(cc, "__getattr__")


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        cc.not_a_name  # noqa: B018


def test_every_subpackage_face_lists_only_what_it_exports() -> None:
    for pkg in ("scans", "live", "batch", "formats", "clients", "errors"):
        module = importlib.import_module(f"ctxcompact.{pkg}")
        exported = getattr(module, "__all__", None)
        if exported is None:
            continue
        missing = [n for n in exported if not hasattr(module, n)]
        assert not missing, (pkg, missing)
