"""loto.py's folds by language (tools/estimators/loto.py ``--hold
other-lang:it``) and the designs measured on them (docs/estimators.md, "A
language no fit has read")."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "estimators"))
import corpus  # type: ignore[import-not-found]
import fit  # type: ignore[import-not-found]
import heldout  # type: ignore[import-not-found]
import loto  # type: ignore[import-not-found]


@pytest.mark.parametrize(
    ("group", "language"),
    [
        ("/usr/share/man/it/man1/ls.1.gz", "it"),
        ("/usr/share/man/pt_BR/man8/apt.8.gz", "pt_BR"),
        ("/usr/share/man/zh_CN/man5/passwd.5.gz", "zh_CN"),
        ("/usr/share/man/man1/ls.1.gz", None),  # English: no language folder
        ("/usr/share/doc/it/README", None),
        ("diff/3", None),
    ],
)
def test_a_man_pages_language_is_its_folder_under_the_man_root(
    group: str, language: str | None
) -> None:
    assert corpus.man_language(group) == language


def test_a_man_page_message_is_typed_by_its_language_and_others_by_their_kind() -> None:
    page = heldout.Message("testo", "other-lang", "/usr/share/man/it/man1/ls.1.gz")
    fitted = heldout.Message("Text", "non-english", "/usr/share/man/de/man1/ls.1.gz")
    log = heldout.Message("line", "log", "/usr/share/man/it/whatever")
    assert loto.fine_type(page) == "other-lang:it"
    assert loto.fine_type(fitted) == "non-english:de"
    assert loto.fine_type(log) == "log"


KEYS = [
    "log",
    "code-c",
    "None",
    "other-lang:it",
    "other-lang:tr",
    "other-lang:it#eval",
    "non-english:de",
    "log#eval",
]


def test_one_language_held_out_keeps_the_others_and_every_other_type() -> None:
    assert loto.kept(KEYS, ["other-lang:it"]) == [
        "log",
        "code-c",
        "None",
        "other-lang:tr",
        "non-english:de",
    ]


def test_the_type_held_out_whole_drops_each_of_its_languages() -> None:
    assert loto.kept(KEYS, ["other-lang"]) == ["log", "code-c", "None", "non-english:de"]
    assert loto.kept(KEYS, ["non-english+log"]) == [
        "log",
        "code-c",
        "None",
        "other-lang:it",
        "other-lang:tr",
        "non-english:de",
    ]
    assert loto.kept(KEYS, ["non-english", "log"]) == [
        "code-c",
        "None",
        "other-lang:it",
        "other-lang:tr",
    ]


def test_a_name_holds_its_languages_not_a_type_it_prefixes() -> None:
    assert loto.held_by("code-csharp", ["code-c"]) is None
    assert loto.held_by("other-lang:pt_BR", ["log", "other-lang"]) == "other-lang"
    assert loto.held_by("other-lang:pt_BR", ["other-lang:pt"]) is None


def test_a_held_name_no_type_answers_to_is_refused_before_any_encoding() -> None:
    known = ["log", "other-lang:it", "other-lang:tr"]
    assert loto.unknown_names(["other-lang:xx", "log", "other-lang"], known) == ["other-lang:xx"]
    with pytest.raises(SystemExit):
        loto.main(["--hold", "other-lang:xx"])  # refused before heldout.py reads anything


def test_the_fitted_languages_are_held_only_with_corpus_py(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        loto.main(["--hold", "non-english:de"])
    assert "no type 'non-english:de'" in capsys.readouterr().err


def test_a_variant_splits_into_the_ridge_and_loto_pys_designs() -> None:
    assert loto.design("base") == ("base", 0.0, 1.0)
    assert loto.design("rpow0.5+backoff+manw3") == ("rpow0.5", fit.SMOOTHING, 3.0)
    assert loto.design("backoff50") == ("base", 50.0, 1.0)
    assert loto.design("manw0.5") == ("base", 0.0, 0.5)
    for bad in ("manw", "manwx", "manw0", "backoff0", "backoffx"):
        with pytest.raises(ValueError, match=f"malformed part '{bad}'"):
            loto.design(bad)


def test_a_malformed_variant_is_refused_before_any_encoding(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        loto.main(["--variant", "backoff+rpowx", "--hold", "log"])
    assert "unknown part 'rpowx'" in capsys.readouterr().err


def _pair(prev: int, byte: int) -> int:
    return prev * fit.COLS + byte


def test_the_backoff_starts_an_unseen_non_ascii_pair_from_its_class_context() -> None:
    """A Latin Extended-A lead (0xC5) seen only after spaces (a token starts
    there) and a Cyrillic lead (0xD0) inside words (none starts): the pair
    letter-0xC5, never seen, takes 0xC5's rate without the backoff and the
    rate of a two-byte lead after a letter with it."""
    occ = np.zeros(fit.FEATURES)
    hits = np.zeros(fit.FEATURES)
    occ[_pair(0x20, 0xC5)], hits[_pair(0x20, 0xC5)] = 1000, 1000
    occ[_pair(ord("a"), 0xD0)], hits[_pair(ord("a"), 0xD0)] = 1000, 0
    occ[_pair(ord("a"), ord("b"))], hits[_pair(ord("a"), ord("b"))] = 1000, 100
    plain = fit.frequencies(occ, hits)
    backed = fit.frequencies(occ, hits, backoff=fit.SMOOTHING)
    unseen = _pair(ord("z"), 0xC5)
    assert plain[unseen] == pytest.approx(1.0)
    assert backed[unseen] == pytest.approx(0.0)
    # a pair of ASCII bytes is smoothed as before; a well-seen pair keeps its rate
    assert backed[_pair(ord("a"), ord("b"))] == plain[_pair(ord("a"), ord("b"))]
    assert backed[_pair(ord("q"), ord("b"))] == plain[_pair(ord("q"), ord("b"))]
    assert backed[_pair(0x20, 0xC5)] == pytest.approx(plain[_pair(0x20, 0xC5)], abs=0.01)


def test_more_pseudo_observations_lean_a_seen_pair_further_towards_its_class() -> None:
    occ = np.zeros(fit.FEATURES)
    hits = np.zeros(fit.FEATURES)
    occ[_pair(0xBE, 0xD0)], hits[_pair(0xBE, 0xD0)] = 10, 10  # seen 10 times, always a start
    occ[_pair(0xB0, 0xD0)], hits[_pair(0xB0, 0xD0)] = 1000, 0  # its class context: never
    pair = _pair(0xBE, 0xD0)
    assert fit.frequencies(occ, hits, backoff=4)[pair] == pytest.approx(10 / 14, abs=0.01)
    assert fit.frequencies(occ, hits, backoff=40)[pair] == pytest.approx(10 / 50, abs=0.01)
