//! Overflow detection from the last model step's reported usage.
//!
//! Default (OpenCode): `count = input + cache.read + output`,
//! `usable = limit.input || limit.context - min(limit.output || cap, cap)`,
//! overflow when `count > usable`; context 0 means unlimited. The options
//! are the variants later OpenCode releases adopted.

use crate::error::{CoreError, Result};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TokenUsage {
    pub input: i64,
    pub output: i64,
    pub reasoning: i64,
    pub cache_read: i64,
    pub cache_write: i64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ModelLimits {
    /// Context window; 0 = unlimited.
    pub context: i64,
    /// Dedicated input limit; 0 = derive from context.
    pub input: i64,
    /// Max output tokens; 0 = unknown (use the cap).
    pub output: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverflowConfig {
    /// `false` disables overflow detection (OpenCode's `compaction.auto`).
    pub auto: bool,
    /// Cap on the output reserve (OpenCode: 32 000).
    pub output_token_max: i64,
    /// Headroom subtracted from `limit.input` when it is set. `None` = off;
    /// `Some(None)` = the later OpenCode default `min(20 000, output reserve)`.
    pub reserved: Option<Option<i64>>,
    /// `count >= usable` instead of `count > usable`.
    pub inclusive: bool,
    /// Count `cache.write` too.
    pub count_cache_write: bool,
    /// Clamp `usable` at 0.
    pub clamp_usable: bool,
}

impl Default for OverflowConfig {
    fn default() -> Self {
        OverflowConfig {
            auto: true,
            output_token_max: 32_000,
            reserved: None,
            inclusive: false,
            count_cache_write: false,
            clamp_usable: false,
        }
    }
}

fn check_non_negative(what: &str, values: &[(&str, i64)]) -> Result<()> {
    for (name, v) in values {
        if *v < 0 {
            return Err(CoreError::InvalidUsage(format!(
                "{what}.{name} is negative ({v})"
            )));
        }
    }
    Ok(())
}

impl TokenUsage {
    pub fn validate(&self) -> Result<()> {
        check_non_negative(
            "usage",
            &[
                ("input", self.input),
                ("output", self.output),
                ("reasoning", self.reasoning),
                ("cache.read", self.cache_read),
                ("cache.write", self.cache_write),
            ],
        )
    }
}

impl ModelLimits {
    pub fn validate(&self) -> Result<()> {
        check_non_negative(
            "limits",
            &[
                ("context", self.context),
                ("input", self.input),
                ("output", self.output),
            ],
        )
    }

    /// Tokens kept free for the model's answer.
    pub fn output_reserve(&self, cap: i64) -> i64 {
        if self.output == 0 {
            cap
        } else {
            self.output.min(cap)
        }
    }

    /// Input tokens the model can take before the answer no longer fits.
    pub fn usable(&self, config: &OverflowConfig) -> i64 {
        let reserve = self.output_reserve(config.output_token_max);
        let usable = if self.input > 0 {
            let headroom = match config.reserved {
                None => 0,
                Some(None) => reserve.min(20_000),
                Some(Some(r)) => r,
            };
            self.input - headroom
        } else {
            self.context - reserve
        };
        if config.clamp_usable {
            usable.max(0)
        } else {
            usable
        }
    }
}

/// Tokens the last step put into the context.
pub fn context_count(usage: &TokenUsage, config: &OverflowConfig) -> i64 {
    let write = if config.count_cache_write {
        usage.cache_write
    } else {
        0
    };
    // Saturating: absurd counts must still read as overflow, never wrap negative.
    usage
        .input
        .saturating_add(usage.cache_read)
        .saturating_add(usage.output)
        .saturating_add(write)
}

pub fn is_overflow(
    usage: &TokenUsage,
    limits: &ModelLimits,
    config: &OverflowConfig,
) -> Result<bool> {
    usage.validate()?;
    limits.validate()?;
    if !config.auto || limits.context == 0 {
        return Ok(false);
    }
    let count = context_count(usage, config);
    let usable = limits.usable(config);
    Ok(if config.inclusive {
        count >= usable
    } else {
        count > usable
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(input: i64, output: i64) -> TokenUsage {
        TokenUsage {
            input,
            output,
            ..Default::default()
        }
    }

    fn limits(context: i64, input: i64, output: i64) -> ModelLimits {
        ModelLimits {
            context,
            input,
            output,
        }
    }

    #[test]
    fn design_cases() {
        let c = OverflowConfig::default();
        assert!(!is_overflow(&usage(50_000, 5_000), &limits(128_000, 0, 8_000), &c).unwrap());
        assert!(is_overflow(&usage(120_000, 10_000), &limits(128_000, 0, 8_000), &c).unwrap());
        assert!(is_overflow(&usage(75_000, 5_000), &limits(100_000, 0, 32_000), &c).unwrap());
        assert!(!is_overflow(&usage(110_000, 0), &limits(200_000, 0, 32_000), &c).unwrap());
        assert!(!is_overflow(&usage(10_000_000, 0), &limits(0, 0, 0), &c).unwrap());
    }

    #[test]
    fn boundary_is_strict_by_default() {
        let l = limits(100_000, 0, 20_000); // usable 80_000
        let c = OverflowConfig::default();
        assert!(!is_overflow(&usage(80_000, 0), &l, &c).unwrap());
        let inclusive = OverflowConfig {
            inclusive: true,
            ..c
        };
        assert!(is_overflow(&usage(80_000, 0), &l, &inclusive).unwrap());
    }

    #[test]
    fn output_zero_uses_cap_and_auto_off_disables() {
        let l = limits(100_000, 0, 0); // reserve 32_000 -> usable 68_000
        let c = OverflowConfig::default();
        assert!(is_overflow(&usage(68_001, 0), &l, &c).unwrap());
        let off = OverflowConfig { auto: false, ..c };
        assert!(!is_overflow(&usage(1_000_000, 0), &l, &off).unwrap());
    }

    #[test]
    fn reserved_headroom_applies_to_input_limit() {
        let l = limits(400_000, 272_000, 128_000);
        let c = OverflowConfig {
            reserved: Some(None),
            ..Default::default()
        };
        assert_eq!(l.usable(&c), 252_000);
        assert_eq!(l.usable(&OverflowConfig::default()), 272_000);
    }

    #[test]
    fn negative_counts_are_rejected() {
        let err = is_overflow(&usage(-1, 0), &limits(1, 0, 0), &OverflowConfig::default());
        assert!(matches!(err, Err(CoreError::InvalidUsage(m)) if m.contains("usage.input")));
    }
}
