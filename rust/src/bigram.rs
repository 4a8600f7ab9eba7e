//! Fitted byte-bigram token estimates, one table per tokenizer family.
//!
//! A weight `W[previous byte][byte]` is the chance that the family's
//! tokenizer starts a token at that byte; a text's estimate is the sum of its
//! bytes' weights. The first byte of a text reads the start row (it always
//! starts a token). A space or tab inside a run of them (the same byte before
//! and after) reads a row of its own: tokenizers take a run as one token up
//! to its last byte, which no byte pair can tell apart from a lone pair.
//!
//! Weights are u16 in 1/65536 of a token and summed exactly in u64 (f32 sums
//! drift on long texts). The tables are fitted by `tools/estimators/fit.py`
//! from exact counts (rust/assets/estimators/README.md) and built in.

use std::str::FromStr;
use std::sync::OnceLock;

use crate::error::CoreError;

/// Tokenizer families with a fitted table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Family {
    O200k,
    Cl100k,
    Llama3,
    Qwen,
    Tekken,
    Deepseek,
}

impl Family {
    pub const ALL: [Family; 6] = [
        Family::O200k,
        Family::Cl100k,
        Family::Llama3,
        Family::Qwen,
        Family::Tekken,
        Family::Deepseek,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Family::O200k => "o200k",
            Family::Cl100k => "cl100k",
            Family::Llama3 => "llama3",
            Family::Qwen => "qwen",
            Family::Tekken => "tekken",
            Family::Deepseek => "deepseek",
        }
    }

    /// The table as built in: header and weights (`Table::decode`).
    pub fn raw(self) -> &'static [u8] {
        match self {
            Family::O200k => include_bytes!("../assets/estimators/o200k.bin"),
            Family::Cl100k => include_bytes!("../assets/estimators/cl100k.bin"),
            Family::Llama3 => include_bytes!("../assets/estimators/llama3.bin"),
            Family::Qwen => include_bytes!("../assets/estimators/qwen.bin"),
            Family::Tekken => include_bytes!("../assets/estimators/tekken.bin"),
            Family::Deepseek => include_bytes!("../assets/estimators/deepseek.bin"),
        }
    }

    /// The column that holds each output's estimate units under this family,
    /// counted once (docs/schema.md).
    pub fn counted_column(self) -> &'static str {
        match self {
            Family::O200k => "output_units_o200k",
            Family::Cl100k => "output_units_cl100k",
            Family::Llama3 => "output_units_llama3",
            Family::Qwen => "output_units_qwen",
            Family::Tekken => "output_units_tekken",
            Family::Deepseek => "output_units_deepseek",
        }
    }

    /// The family and a hash of its built-in table (FNV-1a over the bytes):
    /// what a counted column's `ctxcompact.units` metadata says. A refitted
    /// table changes it, so counts made with an older table are not read.
    pub fn fingerprint(self) -> &'static str {
        static PRINTS: [OnceLock<String>; 6] = [const { OnceLock::new() }; 6];
        PRINTS[self as usize].get_or_init(|| {
            let hash = self.raw().iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
                (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
            });
            format!("{}:{hash:016x}", self.name())
        })
    }

    /// The family's table, decoded on first use.
    pub fn table(self) -> &'static Table {
        static TABLES: [OnceLock<Table>; 6] = [const { OnceLock::new() }; 6];
        TABLES[self as usize].get_or_init(|| Table::decode(self.raw()).expect("built-in table"))
    }
}

impl FromStr for Family {
    type Err = CoreError;

    fn from_str(s: &str) -> Result<Self, CoreError> {
        Family::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| CoreError::Config(format!("unknown tokenizer family {s:?}")))
    }
}

/// One token in weight units.
pub const SCALE: u64 = 1 << 16;
const START: usize = 256;
/// Bytes whose runs have their own row (START + 1 + index).
const RUNS: [u8; 2] = [b' ', b'\t'];
const ROWS: usize = 257 + RUNS.len();
// `inside_runs` counts these two bytes.
const _: () = assert!(RUNS[0] == b' ' && RUNS[1] == b'\t');
const MAGIC: &[u8; 8] = b"ctxbgr1\0";

/// A family's weights and its conservative factor (in 1/65536).
pub struct Table {
    weights: Box<[u16]>,
    /// The pair rows again, indexed by the two bytes read as one
    /// little-endian u16 (`prev | byte << 8`): one load makes the index.
    by_pair: Box<[u16; 65536]>,
    /// `W[b][b] - W[run row][b]` for each run byte: what a byte inside a run
    /// takes off the pair sum.
    run_delta: [u64; RUNS.len()],
    pub conservative: u64,
}

impl Table {
    /// Header: magic, conservative factor (u32, 1/65536), reserved u32; then
    /// `ROWS x 256` little-endian u16 weights.
    pub fn decode(raw: &[u8]) -> Result<Table, CoreError> {
        let bad = |why: &str| CoreError::Config(format!("not an estimator table: {why}"));
        if raw.len() != 16 + ROWS * 256 * 2 {
            return Err(bad("wrong size"));
        }
        if &raw[..8] != MAGIC {
            return Err(bad("wrong magic"));
        }
        let conservative = u64::from(u32::from_le_bytes(raw[8..12].try_into().expect("4")));
        let weights: Box<[u16]> = raw[16..]
            .chunks_exact(2)
            .map(|w| u16::from_le_bytes([w[0], w[1]]))
            .collect();
        let mut run_delta = [0u64; RUNS.len()];
        for (k, &b) in RUNS.iter().enumerate() {
            let pair = weights[(b as usize) << 8 | b as usize];
            let run = weights[(START + 1 + k) << 8 | b as usize];
            // A run row above its pair weight would make the sum go down by a
            // negative amount; the fit keeps it at or below.
            if run > pair {
                return Err(bad("a run weight above its pair weight"));
            }
            run_delta[k] = u64::from(pair - run);
        }
        let mut by_pair: Box<[u16; 65536]> = vec![0u16; 65536]
            .into_boxed_slice()
            .try_into()
            .expect("65536 weights");
        for (i, &w) in weights[..65536].iter().enumerate() {
            let (prev, byte) = (i >> 8, i & 0xFF);
            by_pair[byte << 8 | prev] = w;
        }
        Ok(Table {
            weights,
            by_pair,
            run_delta,
            conservative,
        })
    }

    /// Weight units of `bytes` read after `tail` (the last two bytes read
    /// before, newest last; `None`: the text starts here). Summing the units
    /// of consecutive pieces this way equals the units of their concatenation.
    pub fn units_after(&self, tail: [Option<u8>; 2], bytes: &[u8]) -> u64 {
        let (pairs, spaces, tabs) = pair_sum_runs(&self.by_pair, bytes);
        self.with_edges(tail, bytes, pairs, [spaces, tabs])
    }

    /// `units_after` as it was before the run count moved into the pair loop:
    /// the pair sum, then a separate pass over the bytes for the runs. Kept as
    /// the reference the tests and `benches/rust/estimator_gate.rs` compare
    /// the fused loop against; not used by the library.
    #[doc(hidden)]
    pub fn units_after_two_pass(&self, tail: [Option<u8>; 2], bytes: &[u8]) -> u64 {
        let pairs = pair_sum(&self.by_pair, bytes);
        let (spaces, tabs) = inside_runs(bytes);
        self.with_edges(tail, bytes, pairs, [spaces, tabs])
    }

    /// The units from the sum of the pairs inside `bytes` and the count of
    /// run bytes inside them: adds the first byte's weight (after `tail`)
    /// and the runs that cross the edge with the previous piece.
    #[inline(always)]
    fn with_edges(
        &self,
        tail: [Option<u8>; 2],
        bytes: &[u8],
        pairs: u64,
        mut inside: [u64; RUNS.len()],
    ) -> u64 {
        let Some(&first) = bytes.first() else {
            return 0;
        };
        let w = &self.weights;
        let mut total = match tail[1] {
            None => u64::from(w[START << 8 | first as usize]),
            Some(prev) => u64::from(w[(prev as usize) << 8 | first as usize]),
        };
        total += pairs;
        for (k, &r) in RUNS.iter().enumerate() {
            // The first byte: its previous byte is the previous piece's last.
            if let (Some(prev), Some(&second)) = (tail[1], bytes.get(1)) {
                inside[k] += u64::from(prev == r && first == r && second == r);
            }
            // The previous piece's last byte, now that its next byte is known.
            if let (Some(before), Some(last)) = (tail[0], tail[1]) {
                inside[k] += u64::from(before == r && last == r && first == r);
            }
            total -= inside[k] * self.run_delta[k];
        }
        total
    }
}

/// The weights of every byte pair inside `bytes`, and the spaces and tabs
/// inside a run of their own byte (the same byte before and after), in one
/// loop: blocks of 64 pairs, each block's runs counted in u8 lanes (a loop
/// LLVM vectorises, on 32-byte vectors where the CPU has them) beside its
/// pair loads, four sums side by side so the loads do not wait on each other.
/// A second pass for the runs cost 20-25% (docs/estimators.md).
#[inline]
fn pair_sum_runs(by_pair: &[u16; 65536], bytes: &[u8]) -> (u64, u64, u64) {
    #[cfg(target_arch = "x86_64")]
    {
        if bytes.len() >= BLOCK + 2 && std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2 (checked just above).
            return unsafe { pair_sum_runs_avx2(by_pair, bytes) };
        }
    }
    pair_sum_runs_portable(by_pair, bytes)
}

/// Pairs a block of `pair_sum_runs` reads (its run count fits a u8).
const BLOCK: usize = 64;

/// SAFETY (callers): the CPU supports AVX2 (`is_x86_feature_detected!`);
/// the body is safe code, compiled with AVX2 enabled.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn pair_sum_runs_avx2(by_pair: &[u16; 65536], bytes: &[u8]) -> (u64, u64, u64) {
    pair_sum_runs_portable(by_pair, bytes)
}

#[inline(always)]
fn pair_sum_runs_portable(by_pair: &[u16; 65536], bytes: &[u8]) -> (u64, u64, u64) {
    let weight = |a: u8, b: u8| u64::from(by_pair[usize::from(u16::from_le_bytes([a, b]))]);
    let n = bytes.len();
    let mut sums = [0u64; 4];
    let (mut spaces, mut tabs) = (0u64, 0u64);
    // Block at `at`: the pairs starting at at..at + BLOCK and the run bytes
    // at at + 1..at + BLOCK + 1 (each with the byte after it).
    let mut at = 0;
    while at + BLOCK + 2 <= n {
        let w: &[u8; BLOCK + 2] = bytes[at..at + BLOCK + 2].try_into().expect("a block");
        let (mut s, mut t) = (0u8, 0u8);
        for j in 0..BLOCK {
            let (a, b, c) = (w[j], w[j + 1], w[j + 2]);
            let run = (a == b) & (b == c);
            s += u8::from(run & (b == b' '));
            t += u8::from(run & (b == b'\t'));
        }
        spaces += u64::from(s);
        tabs += u64::from(t);
        for j in (0..BLOCK).step_by(4) {
            for (k, sum) in sums.iter_mut().enumerate() {
                *sum += weight(w[j + k], w[j + k + 1]);
            }
        }
        at += BLOCK;
    }
    // The last pairs (fewer than BLOCK + 1), then their run bytes.
    let rest = &bytes[at..];
    let rest_sum: u64 = rest.windows(2).map(|p| weight(p[0], p[1])).sum();
    for p in rest.windows(3) {
        let run = (p[0] == p[1]) & (p[1] == p[2]);
        spaces += u64::from(run & (p[1] == b' '));
        tabs += u64::from(run & (p[1] == b'\t'));
    }
    (sums.iter().sum::<u64>() + rest_sum, spaces, tabs)
}

/// The weights of every byte pair inside `bytes`, four sums side by side so
/// the table loads do not wait on each other (`units_after_two_pass`).
#[inline]
fn pair_sum(by_pair: &[u16; 65536], bytes: &[u8]) -> u64 {
    let pairs = bytes.windows(2);
    let mut sums = [0u64; 4];
    let mut quads = bytes[..bytes.len().saturating_sub(1)].chunks_exact(4);
    let mut at = 0;
    for _ in &mut quads {
        for (j, sum) in sums.iter_mut().enumerate() {
            let i = at + j;
            *sum += u64::from(by_pair[usize::from(u16::from_le_bytes([bytes[i], bytes[i + 1]]))]);
        }
        at += 4;
    }
    let rest: u64 = pairs
        .skip(at)
        .map(|p| u64::from(by_pair[usize::from(u16::from_le_bytes([p[0], p[1]]))]))
        .sum();
    sums.iter().sum::<u64>() + rest
}

/// Spaces and tabs inside a run of their own byte within `bytes` (the same
/// byte before and after), the separate pass of `units_after_two_pass`.
/// Branch-free so it vectorises, on 32-byte vectors where the CPU has them.
#[inline]
fn inside_runs(bytes: &[u8]) -> (u64, u64) {
    #[cfg(target_arch = "x86_64")]
    {
        if bytes.len() >= 64 && std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2 (checked just above).
            return unsafe { inside_runs_avx2(bytes) };
        }
    }
    inside_runs_portable(bytes)
}

/// SAFETY (callers): the CPU supports AVX2 (`is_x86_feature_detected!`);
/// the body is safe code, compiled with AVX2 enabled.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn inside_runs_avx2(bytes: &[u8]) -> (u64, u64) {
    inside_runs_portable(bytes)
}

#[inline(always)]
fn inside_runs_portable(bytes: &[u8]) -> (u64, u64) {
    if bytes.len() < 3 {
        return (0, 0);
    }
    let (a, b, c) = (
        &bytes[..bytes.len() - 2],
        &bytes[1..bytes.len() - 1],
        &bytes[2..],
    );
    let (mut spaces, mut tabs) = (0u64, 0u64);
    for ((a, b), c) in a.chunks(4096).zip(b.chunks(4096)).zip(c.chunks(4096)) {
        let (mut s, mut t) = (0u32, 0u32);
        for ((&x, &y), &z) in a.iter().zip(b).zip(c) {
            let run = (x == y) & (y == z);
            s += u32::from(run & (y == b' '));
            t += u32::from(run & (y == b'\t'));
        }
        spaces += u64::from(s);
        tabs += u64::from(t);
    }
    (spaces, tabs)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The definition, byte by byte: the row of the previous byte (the start
    /// row first), or the run row inside a run of spaces or tabs.
    fn by_definition(table: &Table, bytes: &[u8]) -> u64 {
        let mut total = 0;
        for (i, &b) in bytes.iter().enumerate() {
            let row = if i == 0 {
                START
            } else if let Some(k) = RUNS
                .iter()
                .position(|&r| r == b && bytes[i - 1] == b && bytes.get(i + 1) == Some(&b))
            {
                START + 1 + k
            } else {
                bytes[i - 1] as usize
            };
            total += u64::from(table.weights[row << 8 | b as usize]);
        }
        total
    }

    fn texts() -> Vec<Vec<u8>> {
        let mut seed = 7u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let alphabet: &[&[u8]] = &[b" ", b"\t", b"a", b"Z", b"\n", "é".as_bytes(), b"7", b"  "];
        (0..400)
            .map(|_| {
                let n = (next() % 40) as usize;
                (0..n)
                    .flat_map(|_| alphabet[(next() % alphabet.len() as u64) as usize].to_vec())
                    .collect()
            })
            .collect()
    }

    /// Longer texts than `texts()`, across the fused loop's 64-pair blocks:
    /// long runs of spaces and tabs (alone and mixed), CRLF, non-ASCII,
    /// random bytes.
    fn long_texts() -> Vec<Vec<u8>> {
        let mut seed = 11u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut out: Vec<Vec<u8>> = Vec::new();
        for n in 0..=3 * BLOCK + 5 {
            out.push(vec![b' '; n]);
            out.push(vec![b'\t'; n]);
            out.push(b" \t".repeat(n / 2 + 1)[..n].to_vec());
        }
        for _ in 0..1500 {
            let len = (next() % 400) as usize;
            let mut text = Vec::with_capacity(len + 64);
            while text.len() < len {
                match next() % 9 {
                    0 => text.extend(std::iter::repeat_n(b' ', (next() % 70) as usize)),
                    1 => text.extend(std::iter::repeat_n(b'\t', (next() % 70) as usize)),
                    2 => text.extend_from_slice(b"\r\n"),
                    3 => text.extend_from_slice("é€😀 ".as_bytes()),
                    4 => text.push(next() as u8),
                    5 => text.extend_from_slice(b"\r\n    \t\t  "),
                    _ => text.extend_from_slice(b"fn x() {"),
                }
            }
            out.push(text);
        }
        out
    }

    #[test]
    fn the_fused_loop_equals_the_two_passes() {
        for family in Family::ALL {
            let table = family.table();
            for text in long_texts() {
                let fused = table.units_after([None, None], &text);
                assert_eq!(fused, table.units_after_two_pass([None, None], &text));
                assert_eq!(fused, by_definition(table, &text), "{family:?} {text:?}");
                // The portable loop (no AVX2) too.
                let (pairs, spaces, tabs) = pair_sum_runs_portable(&table.by_pair, &text);
                assert_eq!(
                    (pairs, spaces, tabs),
                    (
                        pair_sum(&table.by_pair, &text),
                        inside_runs(&text).0,
                        inside_runs(&text).1
                    )
                );
            }
        }
    }

    #[test]
    fn long_pieces_read_one_after_another_sum_to_the_whole() {
        let table = Family::O200k.table();
        for (i, text) in long_texts().into_iter().enumerate() {
            let whole = by_definition(table, &text);
            // Cuts at block edges, at the ends, and two random ones.
            let mut cuts = vec![0, 1, BLOCK, BLOCK + 1, BLOCK + 2, 2 * BLOCK + 1];
            cuts.extend([i * 7 % (text.len() + 1), i * 13 % (text.len() + 1)]);
            for cut in cuts.into_iter().filter(|&c| c <= text.len()) {
                let (a, b) = text.split_at(cut);
                for (one, two) in [(a, b), (b, a)] {
                    let joined = [one, two].concat();
                    let tail = match one {
                        [] => [None, None],
                        [x] => [None, Some(*x)],
                        [.., x, y] => [Some(*x), Some(*y)],
                    };
                    let split = table.units_after([None, None], one) + table.units_after(tail, two);
                    let want = if joined == text {
                        whole
                    } else {
                        by_definition(table, &joined)
                    };
                    assert_eq!(split, want, "{one:?} | {two:?}");
                }
            }
        }
    }

    #[test]
    fn every_built_in_table_decodes() {
        for family in Family::ALL {
            let table = family.table();
            assert!(table.conservative >= SCALE, "{family:?} scales down");
            assert_eq!(family.name().parse::<Family>().unwrap(), family);
        }
    }

    #[test]
    fn the_fast_sum_is_the_definition() {
        let table = Family::O200k.table();
        for text in texts() {
            assert_eq!(
                table.units_after([None, None], &text),
                by_definition(table, &text),
                "{text:?}"
            );
        }
    }

    #[test]
    fn pieces_read_one_after_another_sum_to_the_whole() {
        let table = Family::Qwen.table();
        for text in texts() {
            for cut in 0..=text.len() {
                let (a, b) = text.split_at(cut);
                let tail = match a {
                    [] => [None, None],
                    [x] => [None, Some(*x)],
                    [.., x, y] => [Some(*x), Some(*y)],
                };
                let split = table.units_after([None, None], a) + table.units_after(tail, b);
                assert_eq!(split, by_definition(table, &text), "{a:?} | {b:?}");
            }
        }
    }

    #[test]
    fn a_run_of_spaces_costs_about_one_token() {
        let table = Family::O200k.table();
        let text = format!("x{}y", " ".repeat(1000));
        let tokens = (table.units_after([None, None], text.as_bytes()) + SCALE / 2) / SCALE;
        assert!(tokens <= 6, "{tokens} tokens for a run of 1000 spaces");
    }

    #[test]
    fn a_damaged_table_is_refused() {
        let raw = Family::O200k.raw();
        assert!(Table::decode(&raw[..raw.len() - 2]).is_err());
        let mut wrong = raw.to_vec();
        wrong[0] = b'X';
        assert!(Table::decode(&wrong).is_err());
        let mut run_above_pair = raw.to_vec();
        let at = 16 + 2 * ((START + 1) << 8 | b' ' as usize);
        run_above_pair[at..at + 2].copy_from_slice(&u16::MAX.to_le_bytes());
        assert!(Table::decode(&run_above_pair).is_err());
    }

    #[test]
    fn unknown_names_are_config_errors() {
        assert!("o300k".parse::<Family>().is_err());
        let err = "gpt2".parse::<crate::Method>().unwrap_err().to_string();
        assert!(err.contains("gpt2") && err.contains("o200k"), "{err}");
        assert!("o200k-conservative".parse::<crate::Method>().is_ok());
    }
}
