//! Exact token counts of OpenAI's BPE vocabularies (`o200k`, `cl100k`).
//!
//! Counts are tiktoken's `encode_ordinary` lengths: a special token's
//! spelling in the text (`<|endoftext|>`) is ordinary text, and nothing is
//! added. The `bpe-openai` crate (vocabularies built into the binary, nothing
//! downloaded) counted 1.7-5x faster than `tiktoken-rs` on transcripts with
//! the same results (README, Benchmarks: exact token counts).

use std::str::FromStr;

use arrow_array::{Array, ArrayRef, Int64Array};
use rayon::prelude::*;

use crate::columns::StrChunk;
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

/// Tokens of `text` under `family` (tiktoken's `encode_ordinary` length).
pub fn count(text: &str, family: Family) -> u64 {
    let tokenizer = match family {
        Family::O200k => bpe_openai::o200k_base(),
        Family::Cl100k => bpe_openai::cl100k_base(),
    };
    tokenizer.count(text) as u64
}

/// Counts of every string of an Arrow string array (any string type or a
/// dictionary of one); nulls stay null. Rows are counted in parallel blocks
/// (a dictionary's distinct values once each).
pub fn count_array(array: &ArrayRef, family: Family) -> Result<Int64Array> {
    const BLOCK: usize = 1024;
    let chunk = StrChunk::new("values", array)?;
    let one = |v: Option<&str>| v.map_or(0, |s| count(s, family) as i64);
    let values: Vec<i64> = match &chunk {
        StrChunk::Dict { keys, values } => {
            let per_key: Vec<i64> = (0..values.len())
                .into_par_iter()
                .map(|k| one(values.value(k)))
                .collect();
            keys.iter()
                .map(|&k| if k == usize::MAX { 0 } else { per_key[k] })
                .collect()
        }
        _ => {
            let mut out = vec![0i64; chunk.len()];
            out.par_chunks_mut(BLOCK).enumerate().for_each(|(b, dst)| {
                for (j, slot) in dst.iter_mut().enumerate() {
                    *slot = one(chunk.value(b * BLOCK + j));
                }
            });
            out
        }
    };
    Ok(Int64Array::new(values.into(), array.logical_nulls()))
}

#[cfg(test)]
mod tests {
    use super::*;
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
