"""The package's face: a curated top level, and every 0.1 import path still
working for one release with a DeprecationWarning that names the new path."""

from __future__ import annotations

import importlib
import subprocess
import sys
import warnings

import ctxcompact as cc
import pytest
from ctxcompact import _compat


def test_the_top_level_is_curated_and_imports_without_warnings() -> None:
    assert 20 <= len(cc.__all__) <= 30
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in cc.__all__:
            getattr(cc, name)


@pytest.mark.parametrize("name", sorted(_compat.MOVED_NAMES))
def test_a_moved_name_resolves_to_its_new_home_with_a_warning(name: str) -> None:
    home = importlib.import_module(_compat.MOVED_NAMES[name])
    with pytest.warns(DeprecationWarning, match=rf"ctxcompact\.{name} moved to {home.__name__}"):
        old = getattr(cc, name)
    assert old is getattr(home, name)
    assert name in home.__all__


@pytest.mark.parametrize("old", sorted(_compat.MOVED_MODULES))
def test_an_old_module_path_is_the_new_module_with_a_warning(old: str) -> None:
    # A fresh interpreter: the alias is made once per process, on first import.
    code = (
        "import warnings, importlib\n"
        "with warnings.catch_warnings(record=True) as w:\n"
        "    warnings.simplefilter('always')\n"
        f"    old = importlib.import_module({old!r})\n"
        f"new = importlib.import_module({_compat.MOVED_MODULES[old]!r})\n"
        "assert old is new, (old, new)\n"
        "msgs = [str(x.message) for x in w if x.category is DeprecationWarning]\n"
        "print(msgs[0] if msgs else 'NO WARNING')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().startswith(f"{old} moved to {_compat.MOVED_MODULES[old]}")


def test_an_old_from_import_still_works() -> None:
    sys.modules.pop("ctxcompact.lifecycle", None)
    with pytest.warns(DeprecationWarning, match="ctxcompact.lifecycle moved"):
        from ctxcompact.lifecycle import Compactor  # type: ignore[import-not-found]
    assert Compactor is cc.Compactor


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        cc.not_a_name  # noqa: B018


def test_every_subpackage_face_lists_only_what_it_exports() -> None:
    for pkg in ("scans", "live", "batch", "formats", "clients", "testing", "errors"):
        module = importlib.import_module(f"ctxcompact.{pkg}")
        exported = getattr(module, "__all__", None)
        if exported is None:
            continue
        missing = [n for n in exported if not hasattr(module, n)]
        assert not missing, (pkg, missing)
