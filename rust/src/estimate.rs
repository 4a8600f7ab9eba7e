//! Byte-level token estimates.
//!
//! `Opencode` reproduces OpenCode's `Math.round(text.length / 4)`: JavaScript's
//! `length` counts UTF-16 code units, which we derive from UTF-8 bytes in one
//! pass (every byte that is not a continuation byte starts a code point, and
//! 4-byte sequences become surrogate pairs). `Math.round` rounds half up, so
//! the result is `(n + 2) / 4` in integer arithmetic, not Rust's or Python's
//! half-to-even rounding.

//!
//! `Bigram` is a fitted estimate of one tokenizer family (`bigram.rs`); its
//! length units are 1/65536 of a token, and `conservative` scales the sum by
//! the family's factor before rounding.

use std::str::FromStr;

use crate::bigram::{Family, Tail, SCALE};
use crate::error::CoreError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Method {
    /// `floor(utf16_len / 4 + 0.5)`: OpenCode's estimate.
    #[default]
    Opencode,
    /// `ceil(utf8_len / 4)`: the Go and TypeScript designs.
    CeilBytes,
    /// The family's fitted byte-bigram table; `conservative` rarely under-counts.
    Bigram { family: Family, conservative: bool },
    /// The family's exact tokens (`tokens.rs`), each text counted on its own
    /// (a message is the sum of its parts' counts): its units are tokens.
    /// Parsed as `<family>-exact`; a family outside the core needs its
    /// vocabulary loaded first.
    Exact { family: Family },
}

impl Method {
    /// Lengths add up over concatenation (no byte's weight depends on its
    /// neighbours), so a length counted once stands for its text anywhere.
    pub fn additive(self) -> bool {
        !matches!(self, Method::Bigram { .. })
    }
}

/// The field metadata key naming what a counted column was counted with.
pub const UNITS_KEY: &str = "ctxcompact.units";

impl Method {
    /// The column that holds each output's length units under this method,
    /// counted once, and the `UNITS_KEY` metadata it must carry (`None`:
    /// none needed, UTF-16 lengths do not change). `ceil-bytes` has none:
    /// its units are the text's bytes, which Arrow's offsets already give.
    pub fn counted_column(self) -> Option<(&'static str, Option<&'static str>)> {
        match self {
            Method::Opencode => Some(("output_utf16", None)),
            Method::CeilBytes => None,
            Method::Bigram { family, .. } => {
                Some((family.counted_column(), Some(family.fingerprint())))
            }
            Method::Exact { family } => Some((
                crate::tokens::exact_column(family),
                Some(crate::tokens::exact_stamp(family)),
            )),
        }
    }

    /// What a report says it counted with: `opencode`, `ceil-bytes`,
    /// `<family>` / `<family>-conservative` (estimates), `<family>-exact`.
    pub fn name(self) -> String {
        match self {
            Method::Opencode => "opencode".into(),
            Method::CeilBytes => "ceil-bytes".into(),
            Method::Bigram {
                family,
                conservative: false,
            } => family.name().into(),
            Method::Bigram {
                family,
                conservative: true,
            } => format!("{}-conservative", family.name()),
            Method::Exact { family } => format!("{}-exact", family.name()),
        }
    }
}

impl FromStr for Method {
    type Err = CoreError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "opencode" => return Ok(Method::Opencode),
            "ceil-bytes" => return Ok(Method::CeilBytes),
            _ => {}
        }
        if let Some(name) = s.strip_suffix("-exact") {
            if let Ok(family) = name.parse::<Family>() {
                // counted with its vocabulary: built in, or loaded before
                crate::tokens::exact_tokenizer(family)?;
                return Ok(Method::Exact { family });
            }
        }
        let (name, conservative) = match s.strip_suffix("-conservative") {
            Some(name) => (name, true),
            None => (s, false),
        };
        match name.parse::<Family>() {
            Ok(family) => Ok(Method::Bigram {
                family,
                conservative,
            }),
            Err(_) => {
                let families: Vec<&str> = Family::ALL.iter().map(|f| f.name()).collect();
                Err(CoreError::Config(format!(
                    "unknown estimate method {s:?}; expected \"opencode\", \"ceil-bytes\", \
                     or a tokenizer family ({}), optionally with \"-conservative\" \
                     (an estimate) or \"-exact\" (exact counts)",
                    families.join(", ")
                )))
            }
        }
    }
}

/// Number of UTF-16 code units of valid UTF-8 `bytes` (JavaScript's `.length`).
#[inline]
pub fn utf16_len(bytes: &[u8]) -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        // Long texts dominate the scans: use 32-byte vectors where the CPU has them.
        if bytes.len() >= 256 && std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2 (checked just above).
            return unsafe { utf16_len_avx2(bytes) };
        }
    }
    // Short texts (tool names, arguments, ids) are mostly ASCII, where the
    // length is the answer; std's word-at-a-time check beats the block loop.
    if bytes.is_ascii() {
        return bytes.len();
    }
    utf16_len_portable(bytes)
}

/// SAFETY (callers): the CPU supports AVX2 (`is_x86_feature_detected!`);
/// the body is safe code, compiled with AVX2 enabled.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn utf16_len_avx2(bytes: &[u8]) -> usize {
    utf16_len_portable(bytes)
}

/// Each byte adds 1 unless it is a continuation byte (0x80..=0xBF), and a
/// 4-byte lead (0xF0..) adds 1 more for the surrogate pair. Counting into u8
/// lanes over 64-byte blocks (at most 128 per block) lets LLVM vectorise.
#[inline(always)]
fn utf16_len_portable(bytes: &[u8]) -> usize {
    #[inline(always)]
    fn units(b: u8) -> u8 {
        ((b as i8) >= -64) as u8 + (b >= 0xF0) as u8
    }
    let mut blocks = bytes.chunks_exact(64);
    let mut total = 0usize;
    for block in &mut blocks {
        let mut lanes = [0u8; 64];
        for (lane, &b) in lanes.iter_mut().zip(block) {
            *lane = units(b);
        }
        total += lanes.iter().map(|&x| x as u16).sum::<u16>() as usize;
    }
    total
        + blocks
            .remainder()
            .iter()
            .map(|&b| units(b) as usize)
            .sum::<usize>()
}

/// The length `method` rounds over: UTF-16 code units (`Opencode`), UTF-8
/// bytes (`CeilBytes`), or a family's weight units (`Bigram`). Texts joined
/// without building the joined string: `Units`.
#[inline]
pub fn text_units(bytes: &[u8], method: Method) -> u64 {
    match method {
        Method::Opencode => utf16_len(bytes) as u64,
        Method::CeilBytes => bytes.len() as u64,
        Method::Bigram { family, .. } => family.table().units_after(Tail::NONE, bytes),
        Method::Exact { family } => crate::tokens::count_exact(family, bytes),
    }
}

/// Tokens of a text of `units` length units (see `text_units`).
#[inline]
pub fn estimate_units(units: u64, method: Method) -> u64 {
    match method {
        Method::Opencode => (units + 2) / 4,
        Method::CeilBytes => units.div_ceil(4),
        Method::Bigram {
            family,
            conservative,
        } => {
            let units = match conservative {
                // u128: a factor above 1 times a sum of up to 2^16 per byte.
                true => {
                    (u128::from(units) * u128::from(family.table().conservative)
                        / u128::from(SCALE)) as u64
                }
                false => units,
            };
            (units + SCALE / 2) / SCALE
        }
        Method::Exact { .. } => units,
    }
}

/// The length units of texts read one after another, equal to `text_units`
/// of their concatenation (a message's blocks and separators, a cut output's
/// head, marker and tail) without building it.
#[derive(Debug, Clone, Copy)]
pub struct Units {
    method: Method,
    total: u64,
    /// The last two bytes read and the digits they end, which the next
    /// piece's first bytes are weighed against (`Bigram` only).
    tail: Tail,
}

impl Units {
    pub fn new(method: Method) -> Self {
        Units {
            method,
            total: 0,
            tail: Tail::NONE,
        }
    }

    pub fn push(&mut self, bytes: &[u8]) {
        match self.method {
            Method::Bigram { family, .. } => {
                self.total += family.table().units_after(self.tail, bytes);
                self.tail = self.tail.after(bytes);
            }
            method => self.total += text_units(bytes, method),
        }
    }

    /// A text known only by its length (counted once): additive methods only.
    pub fn push_counted(&mut self, units: u64) {
        debug_assert!(self.method.additive());
        self.total += units;
    }

    pub fn total(&self) -> u64 {
        self.total
    }

    pub fn tokens(&self) -> u64 {
        estimate_units(self.total, self.method)
    }
}

#[inline]
pub fn estimate_bytes(bytes: &[u8], method: Method) -> u64 {
    estimate_units(text_units(bytes, method), method)
}

#[inline]
pub fn estimate(text: &str, method: Method) -> u64 {
    estimate_bytes(text.as_bytes(), method)
}

/// Estimates of every string of an Arrow string array (any string type or a
/// dictionary of one); nulls stay null. Blocks of rows run in parallel.
pub fn estimate_array(
    array: &arrow_array::ArrayRef,
    method: Method,
) -> crate::error::Result<arrow_array::Int64Array> {
    let block = match method {
        Method::Exact { .. } => 64,
        _ => 16 * 1024,
    };
    crate::columns::map_strings(array, block, |s| estimate(s, method) as i64)
}

/// The length units under `method` (`text_units`) of every string of an Arrow
/// string array; nulls stay null. What a counted column holds (opencode:
/// UTF-16 lengths, `output_utf16`; a family: its weights' sum).
pub fn units_array(
    array: &arrow_array::ArrayRef,
    method: Method,
) -> crate::error::Result<arrow_array::Int64Array> {
    // exact counts are slow per byte: small blocks keep every thread busy
    let block = match method {
        Method::Exact { .. } => 64,
        _ => 16 * 1024,
    };
    crate::columns::map_strings(array, block, |s| text_units(s.as_bytes(), method) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn js_length(s: &str) -> usize {
        s.encode_utf16().count()
    }

    #[test]
    fn ceil_bytes_seed_cases() {
        let cases = [("", 0), ("a", 1), ("abcd", 1), ("abcde", 2)];
        for (text, want) in cases {
            assert_eq!(estimate(text, Method::CeilBytes), want, "{text:?}");
        }
        assert_eq!(estimate(&"x".repeat(100), Method::CeilBytes), 25);
    }

    #[test]
    fn opencode_rounds_half_up() {
        // JS: Math.round(2/4) = 1 where Python's round(0.5) = 0.
        assert_eq!(estimate("ab", Method::Opencode), 1);
        assert_eq!(estimate("a", Method::Opencode), 0);
        assert_eq!(estimate("abcdef", Method::Opencode), 2); // 1.5 -> 2
        assert_eq!(estimate("abcdefghij", Method::Opencode), 3); // 2.5 -> 3
        assert_eq!(estimate("", Method::Opencode), 0);
    }

    #[test]
    fn utf16_length_matches_encode_utf16() {
        let samples = [
            "",
            "ascii",
            "héllo",
            "日本語テキスト",
            "emoji 😀👍🏽",
            "𝔘𝔫𝔦",
            "\u{7f}\u{80}\u{7ff}\u{800}\u{ffff}\u{10000}\u{10ffff}",
        ];
        for s in samples {
            assert_eq!(utf16_len(s.as_bytes()), js_length(s), "{s:?}");
            let long = s.repeat(300); // takes the vectorised path
            assert_eq!(utf16_len(long.as_bytes()), js_length(&long), "{s:?} x 300");
        }
    }

    #[test]
    fn method_parse_rejects_unknown() {
        assert_eq!("opencode".parse::<Method>().unwrap(), Method::Opencode);
        assert!(matches!(
            "tiktoken".parse::<Method>(),
            Err(CoreError::Config(_))
        ));
    }
}
