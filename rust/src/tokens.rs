//! Exact token counts of OpenAI's BPE vocabularies (`o200k`, `cl100k`).
//!
//! Counts are tiktoken's `encode_ordinary` lengths: a special token's
//! spelling in the text (`<|endoftext|>`) is ordinary text, and nothing is
//! added. The vocabularies are tiktoken's files (`rust/assets`, gzipped,
//! their SHA-256 the ones tiktoken pins), built into the binary. The `bpe`
//! crate's encoder (its counts were 1.7-5x the speed of `tiktoken-rs`, with
//! the same results) is built from them on first use, 1.6 s for o200k and
//! 0.6 s for cl100k: prebuilt tables would add 47 MB to every wheel.

use std::io::Read;
use std::str::FromStr;
use std::sync::LazyLock;

use arrow_array::{ArrayRef, Int64Array};
use bpe::byte_pair_encoding::{read_tiktoken, BytePairEncoding};
use regex_automata::meta::Regex;
use regex_automata::{Anchored, Input};

use crate::error::{CoreError, Result};

/// A tokenizer family whose exact counts the core computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// `o200k_base`: GPT-4o, GPT-4.1, o-series, GPT-5.
    O200k,
    /// `cl100k_base`: GPT-4, GPT-3.5-turbo, text-embedding-3.
    Cl100k,
}

impl FromStr for Family {
    type Err = CoreError;

    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        match s {
            "o200k" | "o200k_base" => Ok(Family::O200k),
            "cl100k" | "cl100k_base" => Ok(Family::Cl100k),
            other => Err(CoreError::Config(format!(
                "unknown tokenizer {other:?}; expected \"o200k\" or \"cl100k\""
            ))),
        }
    }
}

/// The seed `bpe` uses to hash token pairs without collisions in these two
/// vocabularies (the one its OpenAI tables are built with).
const HASH_FACTOR: u64 = 17_846_336_922_010_275_747;

// tiktoken's split patterns. The regex engine has no look-ahead, so
// tiktoken's `\s+(?!\S)` becomes `\s+$` (at the end of the text) or the
// pattern `\s+\s` whose last character is given back: the same pieces.
const CL100K_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+$";
const O200K_SPLIT: &str = concat!(
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+$"
);
/// Pattern 1 (`\s+\s`) gives its last character back.
const GIVE_BACK: usize = 1;

/// A vocabulary and the split into pieces it is applied to.
struct Encoder {
    bpe: BytePairEncoding,
    /// The split pattern, then `\s+\s` (look-ahead), then `\s+`; leftmost-first,
    /// so the earlier pattern wins as tiktoken's alternation does.
    split: Regex,
}

impl Encoder {
    fn build(vocabulary_gz: &[u8], split: &str) -> Self {
        let mut text = String::new();
        flate2::read::GzDecoder::new(vocabulary_gz)
            .read_to_string(&mut text)
            .expect("the built-in vocabulary is valid gzip");
        let tokens = read_tiktoken(&text).expect("the built-in vocabulary is valid tiktoken");
        Encoder {
            bpe: BytePairEncoding::from_dictionary(tokens, Some(HASH_FACTOR)),
            split: Regex::new_many(&[split, r"\s+\s", r"\s+"]).expect("the patterns compile"),
        }
    }

    /// The tokens of `text`: each piece of the split encoded on its own.
    fn count(&self, text: &str) -> usize {
        let (mut at, mut total) = (0, 0);
        while at < text.len() {
            let input = Input::new(&text[at..]).anchored(Anchored::Yes);
            let Some(m) = self.split.find(input) else {
                // Every character matches one of the patterns; this is only a guard.
                return total + self.bpe.count(&text.as_bytes()[at..]);
            };
            let mut end = at + m.end();
            if m.pattern().as_usize() == GIVE_BACK {
                let last = text[at..end].chars().next_back().map_or(0, char::len_utf8);
                end -= last;
            }
            if end == at {
                return total + self.bpe.count(&text.as_bytes()[at..]);
            }
            total += self.bpe.count(&text.as_bytes()[at..end]);
            at = end;
        }
        total
    }
}

static O200K: LazyLock<Encoder> = LazyLock::new(|| {
    Encoder::build(
        include_bytes!("../assets/o200k_base.tiktoken.gz"),
        O200K_SPLIT,
    )
});
static CL100K: LazyLock<Encoder> = LazyLock::new(|| {
    Encoder::build(
        include_bytes!("../assets/cl100k_base.tiktoken.gz"),
        CL100K_SPLIT,
    )
});

/// Tokens of `text` under `family` (tiktoken's `encode_ordinary` length).
pub fn count(text: &str, family: Family) -> u64 {
    let encoder: &Encoder = match family {
        Family::O200k => &O200K,
        Family::Cl100k => &CL100K,
    };
    encoder.count(text) as u64
}

/// Counts of every string of an Arrow string array (any string type or a
/// dictionary of one); nulls stay null. Rows are counted in parallel blocks
/// (a dictionary's distinct values once each).
pub fn count_array(array: &ArrayRef, family: Family) -> Result<Int64Array> {
    crate::columns::map_strings(array, 1024, |s| count(s, family) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::Array;
    use std::sync::Arc;

    #[test]
    fn known_counts_and_special_spellings_are_text() {
        // "hello world" is two tokens in both vocabularies.
        assert_eq!(count("hello world", Family::O200k), 2);
        assert_eq!(count("hello world", Family::Cl100k), 2);
        // The spelling of a special token is ordinary text: several tokens, never an error.
        assert!(count("<|endoftext|>", Family::O200k) > 1);
        assert_eq!(count("", Family::O200k), 0);
    }

    #[test]
    fn arrays_keep_nulls_and_match_single_counts() {
        let texts = [Some("fn main() {}"), None, Some("héllo wörld"), Some("")];
        let array: ArrayRef = Arc::new(arrow_array::StringArray::from(texts.to_vec()));
        let counted = count_array(&array, Family::Cl100k).unwrap();
        for (i, t) in texts.iter().enumerate() {
            match t {
                Some(t) => assert_eq!(counted.value(i) as u64, count(t, Family::Cl100k)),
                None => assert!(counted.is_null(i)),
            }
        }
    }

    #[test]
    fn unknown_family_is_a_config_error() {
        assert!(matches!(
            "llama".parse::<Family>(),
            Err(CoreError::Config(_))
        ));
    }
}
