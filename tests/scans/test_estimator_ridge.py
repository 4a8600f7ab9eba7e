"""The refit's ridge shapes (tools/estimators/fit.py ``ridge_prior``), which
the shipped tables' variant is chosen among (docs/estimators.md)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "estimators"))
import fit  # type: ignore[import-not-found]

#: Byte counts of five pairs: two common, two rare, one never seen.
OCC = np.array([9_000.0, 900.0, 90.0, 10.0, 0.0])


def prior(variant: str) -> Any:
    return fit.ridge_prior(OCC, variant)


def test_the_base_ridge_is_the_pair_share_times_the_constant() -> None:
    want = fit.RIDGE * OCC / OCC.sum() * 1e3
    assert np.array_equal(prior(""), want)
    assert np.array_equal(prior("base"), want)
    assert np.allclose(prior("ridge3"), 3 * want)


def test_a_power_below_one_moves_strength_to_rare_pairs_and_keeps_the_total() -> None:
    base, flat = prior("base"), prior("rpow0.5")
    assert flat.sum() == pytest.approx(base.sum())
    assert flat[3] / flat[0] == pytest.approx(np.sqrt(OCC[3] / OCC[0]))
    assert flat[3] > base[3] and flat[0] < base[0]
    assert flat[4] == 0.0  # a pair no text has stays free (nothing moves it)
    assert prior("rpow0.5+ridge10").sum() == pytest.approx(10 * base.sum())


def test_a_floor_lifts_pairs_below_it_to_one_level_and_keeps_the_total() -> None:
    floored = prior("rfloor2")  # median of the seen shares: between 900 and 90 bytes
    median = np.median(OCC[:4])
    assert floored[2] == pytest.approx(floored[3])
    assert floored[3] / floored[0] == pytest.approx(2 * median / OCC[0])
    assert floored.sum() == pytest.approx(prior("base").sum())
    assert floored[4] == 0.0


def test_a_precision_shape_holds_a_rate_near_zero_harder_than_one_near_a_half() -> None:
    w0 = np.array([0.5, 0.02, 0.5, 0.02, 0.3])
    even = np.array([900.0, 900.0, 900.0, 900.0, 0.0])
    shaped = fit.ridge_prior(even, "rinfo0.05", w0)
    assert shaped[1] / shaped[0] == pytest.approx((0.25 + 0.05) / (0.02 * 0.98 + 0.05))
    assert shaped.sum() == pytest.approx(fit.ridge_prior(even, "", w0).sum())
    assert shaped[4] == 0.0


@pytest.mark.parametrize("variant", ["rpow", "ridgeX", "even", "rpow0.5+floor3", "rinfo0"])
def test_an_unknown_or_malformed_part_names_itself(variant: str) -> None:
    with pytest.raises(ValueError, match=f"unknown part '{variant.split('+')[-1]}'"):
        prior(variant)


def test_a_precision_shape_without_start_frequencies_says_so() -> None:
    with pytest.raises(ValueError, match="rinfo needs the start frequencies"):
        prior("rinfo0.05")
