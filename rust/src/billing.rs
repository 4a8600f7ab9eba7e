//! What a replay's calls cost under a provider's prompt cache, call by call.
//!
//! The rule `ctxcompact.tuning.cache` documents (which tokens of a prompt a
//! provider bills as cache reads, cache writes or fresh input), applied to a
//! per-call table's token columns. `tuning/reference_billing.py` is the
//! readable Python reference it is tested against.
//!
//! A **recorded cache break** (`cache_breaks`): a call whose recorded cache
//! read is under `BREAK_SHARE` of the prefix it shares with the previous call,
//! within the run's cache lifetime, is the runtime invalidating its cache
//! (`tuning.cache.CACHE_BREAK` says it in full).

use std::collections::{HashMap, HashSet};

use crate::error::CoreError;

/// How a provider bills a prompt's cache reads and writes (the parts of
/// `tuning.cache.CacheRule` the bill depends on, the cache mode applied).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CacheRule {
    /// `false`: every prompt token at the input price (`cache="off"`, a `none` rule).
    pub enabled: bool,
    /// A prompt, and a cached prefix, shorter than this is neither read nor written.
    pub min_tokens: i64,
    /// Tokens read are counted in steps of this many (rounded down).
    pub step: i64,
    /// The tokens not read are written to the cache (Anthropic); else sent at the input price.
    pub writes: bool,
}

/// USD per million tokens; `write` is the price of a token written to the cache.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Prices {
    pub input: f64,
    pub cached_input: f64,
    pub write: f64,
    pub output: f64,
}

/// A prompt's tokens as billed: read from the cache, written to it, sent at the input price.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Bill {
    pub read: i64,
    pub written: i64,
    pub fresh: i64,
}

impl CacheRule {
    /// A rule whose `step` is at least 1 and `min_tokens` not negative.
    pub fn new(enabled: bool, min_tokens: i64, step: i64, writes: bool) -> crate::Result<Self> {
        if step < 1 || min_tokens < 0 {
            return Err(CoreError::Config(format!(
                "a cache rule needs step >= 1 and min_tokens >= 0, got step {step}, \
                 min_tokens {min_tokens}"
            )));
        }
        Ok(Self {
            enabled,
            min_tokens,
            step,
            writes,
        })
    }

    /// A prompt of `prompt` tokens whose first `cached` equal the previous
    /// call's prompt prefix, sent `since_s` seconds after it (`None`: taken
    /// as within the cache's lifetime `ttl_s`).
    pub fn bill(&self, prompt: i64, cached: i64, since_s: Option<f64>, ttl_s: f64) -> Bill {
        if !self.enabled || prompt < self.min_tokens {
            return Bill {
                fresh: prompt,
                ..Bill::default()
            };
        }
        let alive = since_s.is_none_or(|s| s <= ttl_s);
        let mut read = if alive && cached >= self.min_tokens {
            cached
        } else {
            0
        };
        read -= read % self.step;
        let rest = prompt - read;
        if self.writes {
            Bill {
                read,
                written: rest,
                fresh: 0,
            }
        } else {
            Bill {
                read,
                written: 0,
                fresh: rest,
            }
        }
    }
}

/// The token columns of a per-call table, one entry per call.
pub struct Calls<'a> {
    pub prompt: &'a [i64],
    pub cached: &'a [i64],
    pub baseline_prompt: &'a [i64],
    pub baseline_cached: &'a [i64],
    pub output: &'a [i64],
    pub summary_input: &'a [i64],
    pub summary_output: &'a [i64],
    /// Seconds since the previous call (`None`: unknown, taken as within the lifetime).
    pub since_s: &'a [Option<f64>],
    /// Each call's cache lifetime in seconds.
    pub ttl_s: &'a [f64],
}

/// What the calls cost (USD) and the tokens billed each way, for the
/// policy's calls and for the baseline (the run without compaction).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Priced {
    pub cost: f64,
    pub baseline_cost: f64,
    pub cached: i64,
    pub written: i64,
    pub input: i64,
    pub baseline_cached: i64,
    pub baseline_written: i64,
    pub baseline_input: i64,
}

/// The calls priced one by one under `rule` and `prices`. A model summary is a
/// call of its own, on the history it replaces (nothing of it cached). Sums run
/// in call order, each call's terms in the reference's order, so the figures
/// equal the reference's to the last bit.
pub fn price_calls(calls: &Calls<'_>, rule: &CacheRule, prices: &Prices) -> crate::Result<Priced> {
    let n = calls.prompt.len();
    let lengths = [
        calls.cached.len(),
        calls.baseline_prompt.len(),
        calls.baseline_cached.len(),
        calls.output.len(),
        calls.summary_input.len(),
        calls.summary_output.len(),
        calls.since_s.len(),
        calls.ttl_s.len(),
    ];
    if lengths.iter().any(|&l| l != n) {
        return Err(CoreError::InvalidUsage(format!(
            "the per-call columns differ in length: {n} prompts against {lengths:?}"
        )));
    }
    let usd = |b: Bill| {
        b.read as f64 * prices.cached_input
            + b.written as f64 * prices.write
            + b.fresh as f64 * prices.input
    };
    let mut out = Priced::default();
    for i in 0..n {
        let (since, ttl) = (calls.since_s[i], calls.ttl_s[i]);
        let mine = rule.bill(calls.prompt[i], calls.cached[i], since, ttl);
        let summary = rule.bill(calls.summary_input[i], 0, None, ttl);
        let base = rule.bill(
            calls.baseline_prompt[i],
            calls.baseline_cached[i],
            since,
            ttl,
        );
        for b in [mine, summary] {
            out.cached += b.read;
            out.written += b.written;
            out.input += b.fresh;
            out.cost += usd(b);
        }
        out.cost += (calls.output[i] + calls.summary_output[i]) as f64 * prices.output;
        out.baseline_cached += base.read;
        out.baseline_written += base.written;
        out.baseline_input += base.fresh;
        out.baseline_cost += usd(base);
        out.baseline_cost += calls.output[i] as f64 * prices.output;
    }
    out.cost /= 1e6;
    out.baseline_cost /= 1e6;
    Ok(out)
}

/// A call reads under this share of the prefix it shares with the previous
/// call: a recorded cache break. Measured on the real Claude Code corpus
/// (docs/tuning.md): 861 of 872 calls read 99% or more of it, the partial
/// rewrites 69-95%, the breaks 0-28%.
pub const BREAK_SHARE: f64 = 0.75;

/// A shared prefix shorter than this (recorded tokens) shows no break: no
/// provider reads under 1,024 tokens (OpenAI's minimum, Anthropic's least).
pub const BREAK_MIN_TOKENS: i64 = 1_024;

/// A per-call table's columns `cache_breaks` reads, and the three it caps
/// (`cached`, `baseline_cached`, `written`), one entry per call, each run's
/// calls together and in order.
pub struct BreakCalls<'a> {
    pub session_id: &'a [&'a str],
    pub message_id: &'a [&'a str],
    pub call: &'a [i64],
    pub prompt: &'a [i64],
    pub baseline_prompt: &'a [i64],
    pub since_s: &'a [Option<f64>],
    pub cached: &'a mut [i64],
    pub baseline_cached: &'a mut [i64],
    pub written: &'a mut [i64],
}

/// What each run recorded, and what a break caps to.
pub struct Recorded<'a> {
    /// (session id, message id) -> (recorded prompt, recorded cache read) per call.
    pub calls: &'a HashMap<(String, String), (i64, i64)>,
    /// Per run, its cache entries' lifetime (others: `ttl_s`).
    pub lifetimes: &'a HashMap<String, f64>,
    /// Per run, what a prompt sharing nothing with the previous one reads (else 0).
    pub prefixes: &'a HashMap<String, i64>,
    pub ttl_s: f64,
}

/// The breaks of one run: how many calls, the baseline's tokens read before
/// and written now, and the calls' indices.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunBreaks {
    pub breaks: i64,
    pub tokens: i64,
    pub calls: Vec<i64>,
}

/// Apply the recorded cache breaks to `calls` (their `cached`,
/// `baseline_cached` and `written` capped in place): at a break, every
/// policy's cached prefix, the baseline's too, is capped at its prompt of the
/// newest earlier call whose recorded prompt the recorded read reaches (a
/// breakpoint written before), else at the prefix a call sharing nothing
/// reads. Returns, per run that recorded a cache read, its breaks.
pub fn cache_breaks(
    calls: &mut BreakCalls<'_>,
    recorded: &Recorded<'_>,
) -> crate::Result<HashMap<String, RunBreaks>> {
    let n = calls.session_id.len();
    let lengths = [
        calls.message_id.len(),
        calls.call.len(),
        calls.prompt.len(),
        calls.baseline_prompt.len(),
        calls.since_s.len(),
        calls.cached.len(),
        calls.baseline_cached.len(),
        calls.written.len(),
    ];
    if lengths.iter().any(|&l| l != n) {
        return Err(CoreError::InvalidUsage(format!(
            "the per-call columns differ in length: {n} session ids against {lengths:?}"
        )));
    }
    let reading: HashSet<&str> = recorded
        .calls
        .iter()
        .filter(|(_, &(_, read))| read > 0)
        .map(|((sid, _), _)| sid.as_str())
        .collect();
    let mut out: HashMap<String, RunBreaks> = reading
        .iter()
        .map(|sid| ((*sid).to_owned(), RunBreaks::default()))
        .collect();
    if reading.is_empty() {
        return Ok(out);
    }
    // Looked up by the calls' own strings: no key allocated per call.
    let mut by_run: HashMap<&str, HashMap<&str, (i64, i64)>> = HashMap::new();
    for ((sid, mid), &value) in recorded.calls {
        by_run.entry(sid).or_default().insert(mid, value);
    }
    let get = |i: usize| {
        by_run
            .get(calls.session_id[i])
            .and_then(|run| run.get(calls.message_id[i]))
            .copied()
    };
    // (recorded prompt, prompt, baseline prompt) of the run's earlier recorded calls
    let mut earlier: Vec<(i64, i64, i64)> = Vec::new();
    let mut previous: Option<usize> = None;
    for i in 0..n {
        let sid = calls.session_id[i];
        if previous.is_some_and(|p| calls.session_id[p] != sid) {
            earlier.clear();
            previous = None;
        }
        let record = get(i);
        let last = previous.and_then(get);
        let lifetime = recorded
            .lifetimes
            .get(sid)
            .copied()
            .unwrap_or(recorded.ttl_s);
        let alive = calls.since_s[i].is_none_or(|gap| gap <= lifetime);
        if let (Some((_, read)), Some((last_prompt, _)), Some(p)) = (record, last, previous) {
            let base_prompt = calls.baseline_prompt[p];
            if reading.contains(sid) && base_prompt > 0 && alive {
                let share = calls.baseline_cached[i] as f64 / base_prompt as f64;
                let shared = share * last_prompt as f64;
                if shared >= BREAK_MIN_TOKENS as f64 && (read as f64) < BREAK_SHARE * shared {
                    let prefix = recorded.prefixes.get(sid).copied().unwrap_or(0);
                    let (cap, base_cap) = earlier
                        .iter()
                        .rev()
                        .find(|e| e.0 <= read)
                        .map_or((prefix, prefix), |e| (e.1, e.2));
                    let before = calls.baseline_cached[i];
                    calls.cached[i] = calls.cached[i].min(cap);
                    calls.baseline_cached[i] = before.min(base_cap);
                    calls.written[i] = calls.prompt[i] - calls.cached[i];
                    let run = out.entry(sid.to_owned()).or_default();
                    run.breaks += 1;
                    run.tokens += before - calls.baseline_cached[i];
                    run.calls.push(calls.call[i]);
                }
            }
        }
        if let Some((recorded_prompt, _)) = record {
            earlier.push((recorded_prompt, calls.prompt[i], calls.baseline_prompt[i]));
        }
        previous = Some(i);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPENAI: CacheRule = CacheRule {
        enabled: true,
        min_tokens: 1_024,
        step: 128,
        writes: false,
    };

    fn bill(read: i64, written: i64, fresh: i64) -> Bill {
        Bill {
            read,
            written,
            fresh,
        }
    }

    #[test]
    fn openai_reads_in_steps_above_its_minimum() {
        assert_eq!(
            OPENAI.bill(1_023, 1_023, Some(1.0), 300.0),
            bill(0, 0, 1_023)
        );
        assert_eq!(
            OPENAI.bill(1_024, 1_024, Some(1.0), 300.0),
            bill(1_024, 0, 0)
        );
        assert_eq!(
            OPENAI.bill(3_000, 1_151, Some(1.0), 300.0),
            bill(1_024, 0, 1_976)
        );
        assert_eq!(OPENAI.bill(3_000, 2_999, None, 300.0), bill(2_944, 0, 56));
        // expired: nothing read
        assert_eq!(
            OPENAI.bill(3_000, 2_999, Some(301.0), 300.0),
            bill(0, 0, 3_000)
        );
    }

    #[test]
    fn anthropic_writes_what_it_does_not_read() {
        let rule = CacheRule::new(true, 4_096, 1, true).unwrap();
        assert_eq!(rule.bill(4_095, 4_000, Some(1.0), 300.0), bill(0, 0, 4_095));
        assert_eq!(rule.bill(6_000, 4_095, Some(1.0), 300.0), bill(0, 6_000, 0));
        assert_eq!(
            rule.bill(6_000, 4_096, Some(300.0), 300.0),
            bill(4_096, 1_904, 0)
        );
        let off = CacheRule::new(false, 4_096, 1, true).unwrap();
        assert_eq!(off.bill(6_000, 4_096, None, 300.0), bill(0, 0, 6_000));
    }

    #[test]
    fn a_bad_rule_and_uneven_columns_are_refused() {
        assert!(CacheRule::new(true, 0, 0, false).is_err());
        assert!(CacheRule::new(true, -1, 1, false).is_err());
        let one = [5_000_i64];
        let calls = Calls {
            prompt: &one,
            cached: &one,
            baseline_prompt: &one,
            baseline_cached: &one,
            output: &one,
            summary_input: &one,
            summary_output: &[],
            since_s: &[None],
            ttl_s: &[300.0],
        };
        let prices = Prices {
            input: 1.0,
            cached_input: 0.1,
            write: 1.25,
            output: 5.0,
        };
        assert!(price_calls(&calls, &OPENAI, &prices).is_err());
    }

    #[test]
    fn a_call_its_summary_and_the_baseline_are_priced() {
        let prices = Prices {
            input: 2.0,
            cached_input: 0.5,
            write: 2.0,
            output: 8.0,
        };
        let calls = Calls {
            prompt: &[3_000],
            cached: &[2_999],
            baseline_prompt: &[9_000],
            baseline_cached: &[8_000],
            output: &[100],
            summary_input: &[2_000],
            summary_output: &[300],
            since_s: &[Some(10.0)],
            ttl_s: &[300.0],
        };
        let got = price_calls(&calls, &OPENAI, &prices).unwrap();
        // 2,944 read + 56 fresh; the summary's 2,000 fresh; 400 output
        let cost = (2_944.0 * 0.5 + 56.0 * 2.0 + 2_000.0 * 2.0 + 400.0 * 8.0) / 1e6;
        let baseline = (7_936.0 * 0.5 + 1_064.0 * 2.0 + 100.0 * 8.0) / 1e6;
        assert_eq!((got.cached, got.written, got.input), (2_944, 0, 2_056));
        assert_eq!(
            (
                got.baseline_cached,
                got.baseline_written,
                got.baseline_input
            ),
            (7_936, 0, 1_064)
        );
        assert!((got.cost - cost).abs() < 1e-15 && (got.baseline_cost - baseline).abs() < 1e-15);
    }

    #[test]
    fn a_read_far_under_the_shared_prefix_is_a_break_capped_at_a_breakpoint() {
        let sids = ["s", "s", "s"];
        let mids = ["a", "b", "c"];
        let mut cached = [0, 9_000, 19_000];
        let mut base_cached = [0, 9_000, 19_000];
        let mut written = [10_000, 10_500, 1_000];
        let prompts = [10_000, 19_500, 20_000];
        let mut calls = BreakCalls {
            session_id: &sids,
            message_id: &mids,
            call: &[0, 1, 2],
            prompt: &prompts,
            baseline_prompt: &prompts,
            since_s: &[None, Some(5.0), Some(5.0)],
            cached: &mut cached,
            baseline_cached: &mut base_cached,
            written: &mut written,
        };
        let at = |m: &str| ("s".to_owned(), m.to_owned());
        // The third call read only the first call's prompt (a breakpoint
        // written before), far under the 19,000 tokens it shares.
        let record = HashMap::from([
            (at("a"), (10_000, 0)),
            (at("b"), (19_500, 10_000)),
            (at("c"), (20_000, 10_000)),
        ]);
        let none = HashMap::new();
        let recorded = Recorded {
            calls: &record,
            lifetimes: &HashMap::new(),
            prefixes: &none,
            ttl_s: 300.0,
        };
        let got = cache_breaks(&mut calls, &recorded).unwrap();
        let want = RunBreaks {
            breaks: 1,
            tokens: 9_000,
            calls: vec![2],
        };
        assert_eq!(got["s"], want);
        assert_eq!(cached, [0, 9_000, 10_000]);
        assert_eq!(base_cached, [0, 9_000, 10_000]);
        assert_eq!(written, [10_000, 10_500, 10_000]);
    }
}
