//! The cache-aware gate of a prune (docs/policies.md, "Clearing against the
//! cache"): a selection stands only when what it saves over the calls still
//! to come is worth more than writing again the prompt after the first
//! cleared output, under the price sheet in use.
//!
//! Prices are multiples of the input price: `read` for a prompt token served
//! from the cache, `write` for one sent fresh (and cached). Clearing `S`
//! tokens whose first cleared output is followed by `A` tokens (itself
//! included) costs, at the next call, `A - S` tokens written instead of `A`
//! read, and saves `S` reads at every call from then on. Over `n` calls to
//! come it pays when
//!
//! ```text
//! read x S x n  >  (write - read) x (A - S)
//! ```
//!
//! With no cache (`read == write`) any positive saving pays. The selection
//! grows while it does not pay, so outputs are cleared in batches and the
//! cached prefix moves rarely.

use crate::codes::role;
use crate::error::Result;
use crate::messages::{estimates_of, MessageEstimateConfig};
use crate::pivot::Visible;
use crate::table::{Message, PartTable};

/// The price ratios of the sheet in use and the expected length of a run.
#[derive(Debug, Clone, Copy)]
pub struct CacheAware {
    /// A cache read's price, as a multiple of the input price.
    pub read: f64,
    /// A prompt token not read from the cache (written to it, or sent at the
    /// input price where writes cost nothing extra), as a multiple of the
    /// input price.
    pub write: f64,
    /// The calls of a whole run (a corpus statistic); 0: a run is expected to
    /// make as many more calls as it has made so far.
    pub expected_calls: u64,
}

impl PartialEq for CacheAware {
    fn eq(&self, other: &Self) -> bool {
        self.read.to_bits() == other.read.to_bits()
            && self.write.to_bits() == other.write.to_bits()
            && self.expected_calls == other.expected_calls
    }
}

impl Eq for CacheAware {}

impl Default for CacheAware {
    /// Anthropic's 5-minute cache (reads 0.1x, writes 1.25x), the run's own length.
    fn default() -> Self {
        CacheAware {
            read: 0.1,
            write: 1.25,
            expected_calls: 0,
        }
    }
}

impl CacheAware {
    /// The calls expected still to come (the next one included) after `so_far`.
    pub fn remaining(&self, so_far: u64) -> u64 {
        match self.expected_calls {
            0 => so_far,
            n => n.saturating_sub(so_far),
        }
        .max(1)
    }

    /// Whether clearing `saving` tokens per call, with `after` tokens from the
    /// first cleared output on (the saving among them), pays over `remaining`
    /// calls. Computed in this order in the reference too (equal floats).
    pub fn pays(&self, saving: u64, after: u64, remaining: u64) -> bool {
        let rewrite = after.saturating_sub(saving) as f64;
        self.read * saving as f64 * remaining as f64 > (self.write - self.read).max(0.0) * rewrite
    }
}

/// Whether the selection `rows` (freeing `saving` tokens) of a session whose
/// history is `messages` stands under the policy's `cache_aware` rule
/// (always without one); `estimate`: how the policy estimates a message.
pub fn selection_pays(
    table: &PartTable<'_>,
    messages: &[Message],
    gate: Option<(CacheAware, MessageEstimateConfig)>,
    rows: &[usize],
    saving: u64,
) -> Result<bool> {
    let (Some((rule, estimate)), Some(&first), Some(last)) =
        (gate, rows.iter().min(), messages.last())
    else {
        return Ok(true);
    };
    let at = messages.partition_point(|m| m.rows.end <= first);
    let only = Visible {
        start: messages[at].rows.start,
        end: last.rows.end,
        pinned: Vec::new(),
    };
    let estimates = estimates_of(table, messages, estimate, &[], Some(&only))?;
    let after: u64 = estimates
        .iter()
        .filter(|m| m.row >= only.start)
        .map(|m| m.tokens)
        .sum();
    let calls = messages
        .iter()
        .filter(|m| m.role == role::ASSISTANT)
        .count() as u64;
    Ok(rule.pays(saving, after, rule.remaining(calls)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const ANTHROPIC: CacheAware = CacheAware {
        read: 0.1,
        write: 1.25,
        expected_calls: 0,
    };

    #[test]
    fn pays_exactly_above_the_break_even() {
        // 0.1 x S x n > 1.15 x (A - S): S = 1000, n = 10 gives 1000 on the
        // left, so A - S may be up to 869 (999.35), not 870 (1000.5).
        assert!(ANTHROPIC.pays(1_000, 1_000 + 869, 10));
        assert!(!ANTHROPIC.pays(1_000, 1_000 + 870, 10));
        // The next call more tips it.
        assert!(ANTHROPIC.pays(1_000, 1_000 + 870, 11));
    }

    #[test]
    fn without_a_cache_any_saving_pays() {
        let none = CacheAware {
            read: 1.0,
            write: 1.0,
            expected_calls: 0,
        };
        assert!(none.pays(1, u64::MAX, 1));
        assert!(!none.pays(0, 10, 5));
    }

    #[test]
    fn remaining_calls_from_the_run_or_the_expected_length() {
        assert_eq!(ANTHROPIC.remaining(0), 1);
        assert_eq!(ANTHROPIC.remaining(7), 7);
        let corpus = CacheAware {
            expected_calls: 30,
            ..ANTHROPIC
        };
        assert_eq!(corpus.remaining(10), 20);
        assert_eq!(corpus.remaining(40), 1);
    }
}
