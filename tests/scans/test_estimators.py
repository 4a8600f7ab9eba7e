"""The fitted byte-bigram estimators (issue 16): names, errors, arrays, and
how close they stay to exact counts on real runs the fit held out."""

from __future__ import annotations

import statistics
from pathlib import Path
from types import SimpleNamespace

import ctxcompact as cc
import pyarrow as pa
import pytest
from ctxcompact import formats
from ctxcompact.errors import ConfigError
from ctxcompact.estimators import FAMILIES, METHODS
from ctxcompact.scans import count_tokens, estimate_tokens, estimate_tokens_array
from ctxcompact.scans import reference as ref
from hypothesis import given, settings
from hypothesis import strategies as st
from support.sweeps import sweep

DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "transcripts"


def test_every_family_has_a_plain_and_a_conservative_method() -> None:
    assert set(METHODS) == {"opencode", "ceil-bytes", *FAMILIES,
                            *(f"{f}-conservative" for f in FAMILIES)}  # fmt: skip
    for method in METHODS:
        assert estimate_tokens("def f(x):\n    return x + 1\n", method) > 0  # type: ignore[arg-type]
        assert estimate_tokens("", method) == 0  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["gpt2", "o200k-liberal", "O200K", ""])
def test_an_unknown_method_is_a_config_error_naming_it(bad: str) -> None:
    with pytest.raises(ConfigError, match="unknown estimate method") as err:
        estimate_tokens("x", bad)  # type: ignore[arg-type]
    assert repr(bad) in str(err.value) or f'"{bad}"' in str(err.value)
    with pytest.raises(ConfigError, match="estimate_method"):
        cc.CompactionConfig(estimate_method=bad)  # type: ignore[arg-type]
    session = cc.Session.model_validate({"info": {"id": "s"}, "messages": [
        {"info": {"id": "u", "role": "user"}, "parts": [{"id": "p", "type": "text", "text": "hi"}]},
    ]})  # fmt: skip
    with pytest.raises(ConfigError, match="unknown estimate method"):
        cc.estimate_messages(cc.Transcript.from_sessions([session]),
                             SimpleNamespace(estimate_method=bad, message_overhead=4))  # fmt: skip


@settings(max_examples=sweep(200), deadline=None)
@given(st.text(alphabet=st.sampled_from(list(" \t\na1Zé中-{}\"")), max_size=60),
       st.sampled_from(FAMILIES))  # fmt: skip
def test_conservative_never_counts_less(text: str, family: str) -> None:
    plain = estimate_tokens(text, family)  # type: ignore[arg-type]
    assert estimate_tokens(text, f"{family}-conservative") >= plain  # type: ignore[arg-type]


@settings(max_examples=sweep(50), deadline=None)
@given(st.lists(st.one_of(st.none(), st.text(max_size=200)), max_size=30),
       st.sampled_from(METHODS))  # fmt: skip
def test_the_array_scan_is_the_per_text_estimate(texts: list[str | None], method: str) -> None:
    got = estimate_tokens_array(pa.array(texts, pa.large_string()), method).to_pylist()  # type: ignore[arg-type]
    assert got == [None if t is None else estimate_tokens(t, method) for t in texts]  # type: ignore[arg-type]


def test_a_run_of_spaces_is_about_one_token() -> None:
    indented = "x" + " " * 400 + "y"
    assert estimate_tokens(indented, "o200k") <= 6 < estimate_tokens(indented, "opencode")
    assert count_tokens(indented, "o200k") <= 6


#: Texts across the fused loop's 64-byte blocks: long runs of spaces, tabs
#: and digits (alone and mixed), CRLF, non-ASCII, code, timestamps, paths,
#: any character.
_RUNNY = st.lists(
    st.one_of(
        st.integers(0, 150).map(lambda n: " " * n),
        st.integers(0, 150).map(lambda n: "\t" * n),
        st.integers(0, 150).map(lambda n: "7" * n),
        st.sampled_from(["\r\n", "\r\n    \t\t  ", " \t", "é", "中", "😀", "def f(x):", "aa"]),
        st.sampled_from(["0", "12", "345", "2024-11-29 19:08:37.123456", "١٢٣"]),
        # paths: a letter after a slash after punctuation or a space, or not
        st.sampled_from(["/", '"/usr', "://a", " /x/y", "z/w", "-/Q", "/7", "//"]),
        st.text(max_size=8),
    ),
    max_size=30,
).map("".join)


def _assert_joined_matches_the_reference(texts: list[str], family: str) -> None:
    """One assistant message of ``texts``: its estimate equals the reference's."""
    session = cc.Session.model_validate({"info": {"id": "s"}, "messages": [
        {"info": {"id": "m", "role": "assistant"},
         "parts": [{"id": f"p{i}", "type": "text", "text": t} for i, t in enumerate(texts)]},
    ]})  # fmt: skip
    transcript = cc.Transcript.from_sessions([session])
    config = SimpleNamespace(estimate_method=family, message_overhead=4)
    got = cc.estimate_messages(transcript, config).messages["tokens"].to_pylist()
    want = ref.estimate_messages(transcript.to_arrow().to_pylist(), method=family, overhead=4)
    assert got == [t for _, t in want]


@settings(max_examples=sweep(300), deadline=None)
@given(_RUNNY, st.sampled_from(METHODS))
def test_long_runs_match_the_reference(text: str, method: str) -> None:
    assert estimate_tokens(text, method) == ref.estimate(text, method)  # type: ignore[arg-type]


@settings(max_examples=sweep(100), deadline=None)
@given(st.lists(_RUNNY, min_size=1, max_size=4), st.sampled_from(FAMILIES))
def test_a_message_of_joined_runny_texts_matches_the_reference(
    texts: list[str], family: str
) -> None:
    # The texts of a message are estimated joined, without building the joined
    # string: the runs crossing from one text into the next count as in one.
    _assert_joined_matches_the_reference(texts, family)


#: Any characters, cut to 0-300 bytes, most of them near the fused loop's
#: 64-byte block edges (the last block's bytes are classed with the same
#: masks as the blocks before it).
_BYTES = st.tuples(
    st.text(
        st.one_of(st.characters(codec="utf-8"), st.sampled_from(list(' \t/":.7aZ'))), max_size=300
    ),
    st.one_of(
        st.integers(0, 300),
        st.sampled_from([64 * k + d for k in (1, 2, 3, 4) for d in range(-3, 4)]),
    ),
).map(lambda t: t[0].encode()[: t[1]].decode(errors="ignore"))


@settings(max_examples=sweep(300), deadline=None)
@given(_BYTES, st.sampled_from(FAMILIES))
def test_any_text_near_the_block_edges_matches_the_reference(text: str, family: str) -> None:
    assert estimate_tokens(text, family) == ref.estimate(text, family)  # type: ignore[arg-type]


@settings(max_examples=sweep(100), deadline=None)
@given(st.lists(_BYTES, min_size=1, max_size=4), st.sampled_from(FAMILIES))
def test_a_message_of_joined_texts_near_the_block_edges_matches_the_reference(
    texts: list[str], family: str
) -> None:
    _assert_joined_matches_the_reference(texts, family)


def _messages() -> list[str]:
    """Every text, output and argument of the shared tau-bench and SWE-agent runs."""
    out: list[str] = []
    for corpus in ("tau-bench", "swe-agent"):
        for path in sorted((DATA / corpus).rglob("*")):
            if path.suffix in (".json", ".traj"):
                table = cc.Transcript.from_sessions(formats.read(path)).to_arrow()
                for column in ("output", "input"):
                    out += [t for t in table.column(column).to_pylist() if t]
    return out


#: Families whose tokenizer cuts a run of digits into groups of three (qwen
#: and tekken cut every digit); their estimate of these log lines is within
#: 2.5% (deepseek's 1.6% under since its refit on every type, 3.1% under with
#: the stop-49 table; docs/estimators.md).
DIGIT_TRIPLES = ["o200k", "cl100k", "llama3", "deepseek"]
#: Families whose pre-split makes `"/usr` and `a/usr` cost the same (not
#: deepseek's: 900 and 1,200 tokens for the texts below).
SAME_PATHS = ["o200k", "cl100k", "llama3", "qwen", "tekken"]


@pytest.mark.skipif(not DATA.is_dir(), reason="needs ../shared/data")
@pytest.mark.parametrize("family", FAMILIES)
def test_close_to_exact_counts_on_real_runs(family: str) -> None:
    """Against the exact tokenizer (built into the core) on every message of
    20+ tokens: far closer than chars / 4, and rarely under with -conservative."""
    texts = _messages()
    exact = cc.scans.count_tokens_array(pa.array(texts), family).to_pylist()  # type: ignore[arg-type]
    keep = [i for i, n in enumerate(exact) if n >= 20]
    assert len(keep) > 3000

    def errors(method: str) -> list[float]:
        est = estimate_tokens_array(pa.array(texts), method).to_pylist()  # type: ignore[arg-type]
        return [(est[i] - exact[i]) / exact[i] for i in keep]

    fitted, opencode = errors(family), errors("opencode")
    p95 = statistics.quantiles([abs(e) for e in fitted], n=20)[-1]
    assert statistics.median(abs(e) for e in fitted) < 0.03
    assert p95 < 0.10 < statistics.quantiles([abs(e) for e in opencode], n=20)[-1]
    total_est = sum(estimate_tokens(texts[i], family) for i in keep)  # type: ignore[arg-type]
    assert abs(total_est / sum(exact[i] for i in keep) - 1) < 0.03
    under = [e for e in errors(f"{family}-conservative") if e < 0]
    assert len(under) / len(keep) < 0.06


def _log_lines(seed: int, n: int) -> str:
    """Log lines full of short numbers: timestamps, pids, counts, percentages."""
    import random

    r = random.Random(seed)
    return "\n".join(
        f"2024-{r.randint(1, 12):02d}-{r.randint(1, 28):02d} {r.randint(0, 23):02d}:"
        f"{r.randint(0, 59):02d}:{r.randint(0, 59):02d}.{r.randint(0, 999):03d} "
        f"worker[{r.randint(100, 99999)}]: request {r.randint(0, 10**6)} took "
        f"{r.randint(1, 999)} ms, {r.randint(0, 99)}% cache hits"
        for _ in range(n)
    )


@pytest.mark.parametrize("family", DIGIT_TRIPLES)
def test_short_numbers_are_not_over_counted(family: str) -> None:
    """Digit pairs once read one weight for short and long numbers alike, and
    log lines (timestamps, ids) came out 4.5% over; the digit group weight
    (the 4th, 7th, ... digit of a run) tells them apart."""
    text = _log_lines(3, 300)
    ratio = estimate_tokens(text, family) / count_tokens(text, family)  # type: ignore[arg-type]
    assert abs(ratio - 1) < 0.025, ratio
    # A run of digits costs a token per three digits, as the tokenizer cuts it.
    digits = "7" * 3000
    assert abs(estimate_tokens(f"x {digits} y", family) - 1000) < 60  # type: ignore[arg-type]


@pytest.mark.parametrize("family", SAME_PATHS)
def test_a_path_after_a_quote_costs_what_it_costs_after_a_letter(family: str) -> None:
    """`"/usr` is `"/` and `usr`, `a/usr` is `a` and `/usr`: the same count,
    but the pair `/`-letter read one weight for both, and the quoted paths of
    stack traces came out over (0.9 token a path off, relative to the other);
    the punctuation weight puts the token start on the name after `"/` only."""
    quoted, bare = ' "/usr/lib' * 300, " a/usr/lib" * 300
    assert count_tokens(quoted, family) == count_tokens(bare, family)  # type: ignore[arg-type]
    gap = estimate_tokens(quoted, family) - estimate_tokens(bare, family)  # type: ignore[arg-type]
    assert abs(gap) < 0.25 * 300, gap
