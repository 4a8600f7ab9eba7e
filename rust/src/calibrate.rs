//! Calibration of token estimates from recorded usage: one rule for the live
//! `UsageCalibrator` (`ctxcompact.live.calibration`) and the batch replay
//! (`replay --calibrate`). Given per call the estimate of a prompt and the
//! prompt tokens the provider recorded for it, `fit` gives `reported ~ slope
//! x estimate + intercept`, robustly (Theil-Sen: the median of the pairwise
//! slopes over pairs whose estimates differ by more than `MIN_SPREAD`, kept
//! in `SLOPES`; then the median intercept; without such pairs slope 1 and
//! the median difference), and the residual: the per-call relative error
//! `|calibrated - reported| / reported`, its median and 95th percentile
//! (linear interpolation between ranks), before and after the fit.
//!
//! Why Theil-Sen with an intercept rather than a ratio of sums or a least
//! squares line (docs/estimators.md, "Calibrated from recorded usage"): the
//! provider adds tokens the stored run never holds (a system prompt, tool
//! schemas: OpenHands' runs record 2x to 20x their history's estimate), an
//! amount per call, not a factor; and one odd call (a retry, a cut-off
//! stream) must not move the fit, which it does a least-squares line.

/// The slope is kept in this range (a fit outside it is noise, not a tokenizer).
pub const SLOPES: (f64, f64) = (0.25, 4.0);
/// Pairs whose estimates differ by less than this share say nothing about the slope.
pub const MIN_SPREAD: f64 = 0.02;

/// `reported ~ slope x estimate + intercept` from `calls` calls, and the
/// per-call relative error before (the estimate as it is) and after.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fit {
    pub slope: f64,
    pub intercept: f64,
    pub calls: usize,
    pub before_p50: f64,
    pub before_p95: f64,
    pub after_p50: f64,
    pub after_p95: f64,
}

/// `estimate` calibrated: `slope x estimate + intercept`, rounded up, never
/// below 0.
pub fn apply(slope: f64, intercept: f64, estimate: u64) -> u64 {
    let v = (slope * estimate as f64 + intercept).ceil();
    if v > 0.0 {
        v as u64
    } else {
        0
    }
}

/// The median of `values` (the mean of the middle two of an even count), as
/// Python's `statistics.median`. `values` is sorted in place; not empty.
fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

/// The `q` quantile of sorted `values` by linear interpolation between ranks.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    let at = q * (sorted.len() - 1) as f64;
    let (lo, hi) = (at.floor() as usize, at.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (at - lo as f64)
}

/// The median and 95th percentile of the relative error of the calibrated
/// estimates (`points` not empty, every reported count above 0).
pub fn residual(points: &[(u64, u64)], slope: f64, intercept: f64) -> (f64, f64) {
    let mut errors: Vec<f64> = points
        .iter()
        .map(|&(e, r)| (apply(slope, intercept, e) as f64 - r as f64).abs() / r as f64)
        .collect();
    errors.sort_by(f64::total_cmp);
    (quantile(&errors, 0.5), quantile(&errors, 0.95))
}

/// The fit of `points` (estimate, reported); `None` when there is none.
/// Calls with nothing estimated or reported are no evidence and are left
/// out (the live calibrator never keeps them).
pub fn fit(points: &[(u64, u64)]) -> Option<Fit> {
    let points: Vec<(u64, u64)> = points
        .iter()
        .copied()
        .filter(|&(e, r)| e > 0 && r > 0)
        .collect();
    if points.is_empty() {
        return None;
    }
    let mut slopes = Vec::new();
    for (i, &(e1, r1)) in points.iter().enumerate() {
        for &(e2, r2) in &points[i + 1..] {
            let spread = (e2 as f64 - e1 as f64).abs();
            if spread > MIN_SPREAD * e1.max(e2) as f64 {
                slopes.push((r2 as f64 - r1 as f64) / (e2 as f64 - e1 as f64));
            }
        }
    }
    let slope = if slopes.is_empty() {
        1.0
    } else {
        median(&mut slopes).clamp(SLOPES.0, SLOPES.1)
    };
    let mut offsets: Vec<f64> = points
        .iter()
        .map(|&(e, r)| r as f64 - slope * e as f64)
        .collect();
    let intercept = median(&mut offsets);
    let (before_p50, before_p95) = residual(&points, 1.0, 0.0);
    let (after_p50, after_p95) = residual(&points, slope, intercept);
    Some(Fit {
        slope,
        intercept,
        calls: points.len(),
        before_p50,
        before_p95,
        after_p50,
        after_p95,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_factor_and_an_amount_are_recovered_and_the_residual_drops() {
        let points: Vec<(u64, u64)> = (1..=20).map(|i| (i * 1000, i * 1150 + 3000)).collect();
        let f = fit(&points).unwrap();
        assert!((f.slope - 1.15).abs() < 1e-9 && (f.intercept - 3000.0).abs() < 1e-6);
        assert_eq!(f.calls, 20);
        assert!(f.after_p95 < 1e-3 && f.before_p50 > 0.2, "{f:?}");
    }

    #[test]
    fn one_odd_call_does_not_move_the_fit() {
        let mut points: Vec<(u64, u64)> = (1..=15).map(|i| (i * 1000, i * 2000)).collect();
        points.push((8000, 400_000)); // a retry counted whole, say
        let f = fit(&points).unwrap();
        assert!((f.slope - 2.0).abs() < 0.05, "{f:?}");
    }

    #[test]
    fn without_spread_the_slope_is_one_and_the_amount_the_median_difference() {
        let f = fit(&[(1000, 1500), (1001, 1600), (1000, 1550)]).unwrap();
        assert_eq!((f.slope, f.intercept), (1.0, 550.0));
    }

    #[test]
    fn the_slope_is_kept_in_its_range_and_empty_input_has_no_fit() {
        let f = fit(&[(1000, 100_000), (2000, 900_000)]).unwrap();
        assert_eq!(f.slope, SLOPES.1);
        assert_eq!(fit(&[]), None);
        assert_eq!(fit(&[(0, 5), (5, 0)]), None);
    }

    #[test]
    fn quantiles_interpolate_between_ranks() {
        assert_eq!(quantile(&[0.0, 1.0, 2.0, 3.0, 4.0], 0.95), 3.8);
        assert_eq!(quantile(&[0.5], 0.5), 0.5);
        assert_eq!(apply(0.5, -10.0, 4), 0);
    }
}
