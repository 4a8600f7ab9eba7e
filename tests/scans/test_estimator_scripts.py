"""Scripts no fit had read (issue 40): corpus.py's ``scripts`` kind (gettext
catalogs' translations in Greek, Hebrew, Arabic, Devanagari, Thai, ...) and
the tables refitted on it (docs/estimators.md, "Scripts no fit had read")."""

from __future__ import annotations

import random
import sys
from collections import defaultdict
from pathlib import Path

import pyarrow as pa
import pytest
from ctxcompact.scans import count_tokens_array, estimate_tokens_array

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "estimators"))
import corpus  # type: ignore[import-not-found]

#: Families whose table was refitted with the scripts kind (stop 52): all six.
REFITTED = ["o200k", "cl100k", "llama3", "qwen", "tekken", "deepseek"]
#: Languages measured per family: the worst of the shipped tables before the
#: refit (Greek +101% bias, Hindi +145%, Thai +131%, Georgian +137%, Hebrew
#: +44%, Ukrainian -14.5% on o200k).
LANGUAGES = ("el", "hi", "th", "ka", "he", "uk")


@pytest.mark.parametrize(
    ("group", "language"),
    [
        ("/usr/share/locale/el/LC_MESSAGES/coreutils.mo", "el"),
        ("/usr/share/locale/sr@latin/LC_MESSAGES/tar.mo", "sr@latin"),
        ("/usr/share/locale/el/coreutils.mo", None),  # no LC_MESSAGES folder
        ("/usr/share/locale/el/LC_MESSAGES/coreutils.po", None),
        ("/usr/share/man/it/man1/ls.1.gz", None),
        ("diff/3", None),
    ],
)
def test_a_catalogs_language_is_its_folder_under_the_locale_root(
    group: str, language: str | None
) -> None:
    assert corpus.script_language(group) == language


def test_a_catalog_gettext_cannot_read_is_skipped(tmp_path: Path) -> None:
    bad = tmp_path / "bad.mo"
    bad.write_bytes(b"\x00" * 64)
    assert corpus._catalog_text(bad) is None
    short = tmp_path / "short.mo"
    short.write_bytes(b"\xde\x12\x04\x95\x00\x00")  # the magic, cut short
    assert corpus._catalog_text(short) is None
    assert corpus._catalog_text(tmp_path / "missing.mo") is None


def _held_out() -> dict[str, list[str]]:
    """The scripts kind's held-out texts (the 25% of catalogs not fitted), per language."""
    out: dict[str, list[str]] = defaultdict(list)
    for u in corpus._scripts(random.Random(0)):
        if u.split == "eval":
            out[corpus.script_language(u.group)].append(u.text)
    return out


@pytest.mark.skipif(not corpus.LOCALE.is_dir(), reason="needs this machine's gettext catalogs")
@pytest.mark.parametrize("family", REFITTED)
def test_scripts_no_fit_had_read_are_no_longer_counted_twice(family: str) -> None:
    """On catalogs the fit did not read, each language's total is within 12%
    of the exact count (the shipped o200k table: Greek 2.0x, Hindi 2.5x)."""
    texts = _held_out()
    present = [lang for lang in LANGUAGES if len(texts.get(lang, [])) >= 3]
    if len(present) < 3:  # a machine with few catalogs (locales stripped): nothing to measure
        pytest.skip(f"held-out catalogs in {len(present)} of {len(LANGUAGES)} languages here")
    measured = 0
    for lang in present:
        arr = pa.array(texts[lang])
        exact = sum(count_tokens_array(arr, family).to_pylist())  # type: ignore[arg-type]
        est = sum(estimate_tokens_array(arr, family).to_pylist())  # type: ignore[arg-type]
        assert abs(est / exact - 1) < 0.12, (lang, est / exact)
        measured += 1
    assert measured >= 3
