//! Fitted byte-bigram token estimates, one table per tokenizer family.
//!
//! A weight `W[previous byte][byte]` is the chance that the family's
//! tokenizer starts a token at that byte; a text's estimate is the sum of its
//! bytes' weights. The first byte of a text reads the start row (it always
//! starts a token). A space or tab inside a run of them (the same byte before
//! and after) reads a row of its own: tokenizers take a run as one token up
//! to its last byte, which no byte pair can tell apart from a lone pair.
//! An ASCII digit that starts a new group of three inside a run of digits
//! (the 4th, 7th, ... digit of the run) adds the digit weight of the header:
//! most tokenizers cut digits into groups of up to three, so a digit pair's
//! weight alone, an average over short and long numbers, over-counts the short
//! ones (timestamps, line numbers: logs were 3.5% over, docs/estimators.md).
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

/// What a piece is read after: the last two bytes read before it (newest
/// last; `None`: the text starts there) and the length of the run of ASCII
/// digits they end (0 when the last byte is not a digit).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tail {
    pub last: [Option<u8>; 2],
    pub digits: u64,
}

impl Tail {
    /// Nothing read yet.
    pub const NONE: Tail = Tail {
        last: [None, None],
        digits: 0,
    };

    /// The tail once `bytes` are read after this one.
    pub fn after(self, bytes: &[u8]) -> Tail {
        let trailing = bytes
            .iter()
            .rev()
            .take_while(|b| b.is_ascii_digit())
            .count() as u64;
        let digits = if trailing == bytes.len() as u64 {
            self.digits + trailing
        } else {
            trailing
        };
        let last = match bytes {
            [] => self.last,
            [only] => [self.last[1], Some(*only)],
            [.., a, b] => [Some(*a), Some(*b)],
        };
        Tail { last, digits }
    }
}

/// Digits at positions `from..to` of a run of digits (0 its first) that start
/// a group of three: positions 3, 6, 9, ...
#[inline(always)]
fn groups_between(from: u64, to: u64) -> u64 {
    to.saturating_sub(1) / 3 - from.saturating_sub(1) / 3
}

/// The group starts among the digits of a 64-byte block (`mask`, bit j the
/// j-th byte), after a run of `run` digits; `run` becomes the run the block
/// ends with. Bit-parallel: the runs' first digits (a digit after a
/// non-digit), then each group start is the one three bits before it shifted
/// on, while the three bits it crosses are digits; as many rounds as the
/// block's longest run has groups (none in a block without a run of four).
#[inline(always)]
fn block_groups(mask: u64, run: &mut u64) -> u64 {
    let m = mask;
    // Bit j: bytes j - 2, j - 1 and j are digits (bits 0 and 1 are never
    // read: a group start found below is at bit 3 or later).
    let three = m & (m << 1) & (m << 2);
    let mut starts = m & !(m << 1);
    let mut groups = 0u64;
    if *run > 0 {
        // The run carried in goes on at bit 0: not a run start; its next
        // group start is at bit k when bits 0..=k are digits.
        starts &= !1;
        let k = (3 - *run % 3) % 3;
        let need = (2u64 << k) - 1;
        groups = u64::from(m & need == need) << k;
    }
    groups |= (starts << 3) & three;
    let mut count = 0u64;
    while groups != 0 {
        count += u64::from(groups.count_ones());
        groups = (groups << 3) & three;
    }
    *run = if m == u64::MAX {
        *run + 64
    } else {
        u64::from((!m).leading_zeros())
    };
    count
}

/// Bit j set where byte j of `block` is an ASCII digit: eight bytes at a
/// time, each byte's test in its own lane (no carry crosses a byte), the
/// eight top bits gathered by one multiply.
#[inline(always)]
fn digit_mask_swar(block: &[u8; BLOCK]) -> u64 {
    let mut mask = 0u64;
    for (k, word) in block.chunks_exact(8).enumerate() {
        let y = u64::from_le_bytes(word.try_into().expect("8 bytes")) ^ 0x3030_3030_3030_3030;
        // Top bit of each byte of `t`: its low seven bits of `y` are 10 or more.
        let t = (y & 0x7F7F_7F7F_7F7F_7F7F) + 0x7676_7676_7676_7676;
        let digit = !(t | y) & 0x8080_8080_8080_8080;
        mask |= ((digit >> 7).wrapping_mul(0x0102_0408_1020_4080) >> 56) << (8 * k);
    }
    mask
}

/// `digit_mask_swar` with two 32-byte compares and move masks.
///
/// SAFETY (callers): the CPU supports AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn digit_mask_avx2(block: &[u8; BLOCK]) -> u64 {
    use std::arch::x86_64::{
        __m256i, _mm256_cmpeq_epi8, _mm256_loadu_si256, _mm256_min_epu8, _mm256_movemask_epi8,
        _mm256_set1_epi8, _mm256_sub_epi8,
    };
    let half = |at: usize| {
        // SAFETY: `at` is 0 or 32, so the 32 bytes read are inside `block`.
        let v = unsafe { _mm256_loadu_si256(block.as_ptr().add(at).cast::<__m256i>()) };
        let d = _mm256_sub_epi8(v, _mm256_set1_epi8(b'0' as i8));
        // d <= 9 unsigned: min(d, 9) == d.
        let digit = _mm256_cmpeq_epi8(_mm256_min_epu8(d, _mm256_set1_epi8(9)), d);
        u64::from(_mm256_movemask_epi8(digit) as u32)
    };
    half(0) | half(32) << 32
}

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
    /// What a digit starting a group of three in a run of digits adds.
    digit: u64,
}

impl Table {
    /// Header: magic, conservative factor (u32, 1/65536), the digit group
    /// weight (u32, 1/65536, below one token; 0 in tables fitted before it);
    /// then `ROWS x 256` little-endian u16 weights.
    pub fn decode(raw: &[u8]) -> Result<Table, CoreError> {
        let bad = |why: &str| CoreError::Config(format!("not an estimator table: {why}"));
        if raw.len() != 16 + ROWS * 256 * 2 {
            return Err(bad("wrong size"));
        }
        if &raw[..8] != MAGIC {
            return Err(bad("wrong magic"));
        }
        let conservative = u64::from(u32::from_le_bytes(raw[8..12].try_into().expect("4")));
        let digit = u64::from(u32::from_le_bytes(raw[12..16].try_into().expect("4")));
        if digit >= SCALE {
            return Err(bad("a digit group weight of a token or more"));
        }
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
            digit,
        })
    }

    /// Weight units of `bytes` read after `tail` (`Tail::NONE`: the text
    /// starts here). Summing the units of consecutive pieces this way, each
    /// after the tail the ones before it leave (`Tail::after`), equals the
    /// units of their concatenation.
    pub fn units_after(&self, tail: Tail, bytes: &[u8]) -> u64 {
        let run = first_run(tail, bytes);
        let (pairs, spaces, tabs, groups) = pair_sum_runs(&self.by_pair, bytes, run);
        self.with_edges(tail, bytes, pairs, [spaces, tabs], groups)
    }

    /// `units_after` as it was before the run count moved into the pair loop:
    /// the pair sum, then a separate pass over the bytes for the runs. Kept as
    /// the reference the tests and `benches/rust/estimator_gate.rs` compare
    /// the fused loop against; not used by the library.
    #[doc(hidden)]
    pub fn units_after_two_pass(&self, tail: Tail, bytes: &[u8]) -> u64 {
        let pairs = pair_sum(&self.by_pair, bytes);
        let (spaces, tabs) = inside_runs(bytes);
        let groups = digit_groups(first_run(tail, bytes), bytes.get(1..).unwrap_or(&[]));
        self.with_edges(tail, bytes, pairs, [spaces, tabs], groups)
    }

    /// The units from the sum of the pairs inside `bytes`, the count of run
    /// bytes inside them and of digit groups after their first byte: adds
    /// the first byte's weight (after `tail`), its digit group, and the runs
    /// that cross the edge with the previous piece.
    #[inline(always)]
    fn with_edges(
        &self,
        tail: Tail,
        bytes: &[u8],
        pairs: u64,
        mut inside: [u64; RUNS.len()],
        groups: u64,
    ) -> u64 {
        let Some(&first) = bytes.first() else {
            return 0;
        };
        let w = &self.weights;
        let first_group =
            first.is_ascii_digit() && groups_between(tail.digits, tail.digits + 1) == 1;
        let tail = tail.last;
        let mut total = match tail[1] {
            None => u64::from(w[START << 8 | first as usize]),
            Some(prev) => u64::from(w[(prev as usize) << 8 | first as usize]),
        };
        total += pairs + (groups + u64::from(first_group)) * self.digit;
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
/// `run`: the digits the run of digits that the first byte ends has (0: the
/// first byte is not a digit); the digit groups are counted from the second
/// byte on (`with_edges` weighs the first).
#[inline]
fn pair_sum_runs(by_pair: &[u16; 65536], bytes: &[u8], run: u64) -> (u64, u64, u64, u64) {
    #[cfg(target_arch = "x86_64")]
    {
        if bytes.len() >= BLOCK + 2 && std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2 (checked just above).
            return unsafe { pair_sum_runs_avx2(by_pair, bytes, run) };
        }
    }
    pair_sum_runs_portable(by_pair, bytes, run)
}

/// The run of digits the first byte of `bytes` ends, read after `tail`.
#[inline(always)]
fn first_run(tail: Tail, bytes: &[u8]) -> u64 {
    match bytes.first() {
        Some(b) if b.is_ascii_digit() => tail.digits + 1,
        _ => 0,
    }
}

/// The digits of `bytes` that start a group of three in their run of digits,
/// the run before the first byte having `run` digits (`pair_sum_runs` counts
/// the same in its blocks).
fn digit_groups(mut run: u64, bytes: &[u8]) -> u64 {
    let mut count = 0;
    for b in bytes {
        if b.is_ascii_digit() {
            count += groups_between(run, run + 1);
            run += 1;
        } else {
            run = 0;
        }
    }
    count
}

/// Pairs a block of `pair_sum_runs` reads (its run count fits a u8).
const BLOCK: usize = 64;

/// SAFETY (callers): the CPU supports AVX2 (`is_x86_feature_detected!`);
/// the body is safe code, compiled with AVX2 enabled.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn pair_sum_runs_avx2(
    by_pair: &[u16; 65536],
    bytes: &[u8],
    run: u64,
) -> (u64, u64, u64, u64) {
    // SAFETY: this function runs only where the CPU supports AVX2.
    pair_sum_runs_with(by_pair, bytes, run, |block| unsafe {
        digit_mask_avx2(block)
    })
}

#[inline(always)]
fn pair_sum_runs_portable(by_pair: &[u16; 65536], bytes: &[u8], run: u64) -> (u64, u64, u64, u64) {
    pair_sum_runs_with(by_pair, bytes, run, digit_mask_swar)
}

/// The fused loop, `digit_mask` giving a block's digits as bits.
#[inline(always)]
fn pair_sum_runs_with(
    by_pair: &[u16; 65536],
    bytes: &[u8],
    mut run: u64,
    digit_mask: impl Fn(&[u8; BLOCK]) -> u64,
) -> (u64, u64, u64, u64) {
    let weight = |a: u8, b: u8| u64::from(by_pair[usize::from(u16::from_le_bytes([a, b]))]);
    let n = bytes.len();
    let mut sums = [0u64; 4];
    let (mut spaces, mut tabs, mut groups) = (0u64, 0u64, 0u64);
    // Block at `at`: the pairs starting at at..at + BLOCK and the run bytes
    // and digits at at + 1..at + BLOCK + 1 (each with the byte after it).
    let mut at = 0;
    while at + BLOCK + 2 <= n {
        let w: &[u8; BLOCK + 2] = bytes[at..at + BLOCK + 2].try_into().expect("a block");
        let (mut s, mut t) = (0u8, 0u8);
        for j in 0..BLOCK {
            let (a, b, c) = (w[j], w[j + 1], w[j + 2]);
            let same = (a == b) & (b == c);
            s += u8::from(same & (b == b' '));
            t += u8::from(same & (b == b'\t'));
        }
        spaces += u64::from(s);
        tabs += u64::from(t);
        let digits = digit_mask(w[1..=BLOCK].try_into().expect("a block"));
        groups += block_groups(digits, &mut run);
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
        let same = (p[0] == p[1]) & (p[1] == p[2]);
        spaces += u64::from(same & (p[1] == b' '));
        tabs += u64::from(same & (p[1] == b'\t'));
    }
    groups += digit_groups(run, rest.get(1..).unwrap_or(&[]));
    (sums.iter().sum::<u64>() + rest_sum, spaces, tabs, groups)
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
    /// row first), or the run row inside a run of spaces or tabs; plus the
    /// digit weight for the 4th, 7th, ... digit of a run of digits.
    fn by_definition(table: &Table, bytes: &[u8]) -> u64 {
        let mut total = 0;
        let mut digits = 0u64;
        for (i, &b) in bytes.iter().enumerate() {
            if b.is_ascii_digit() {
                if digits > 0 && digits % 3 == 0 {
                    total += table.digit;
                }
                digits += 1;
            } else {
                digits = 0;
            }
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
        let alphabet: &[&[u8]] = &[
            b" ",
            b"\t",
            b"a",
            b"Z",
            b"\n",
            "é".as_bytes(),
            b"7",
            b"  ",
            b"0",
            b"123",
        ];
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
            out.push(vec![b'9'; n]);
            out.push(b"12345678x".repeat(n / 9 + 1)[..n].to_vec());
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
                    6 => text.extend(std::iter::repeat_n(b'7', (next() % 140) as usize)),
                    7 => text.extend_from_slice(b"2024-11-29 19:08:37.123456 "),
                    5 => text.extend_from_slice(b"\r\n    \t\t  "),
                    _ => text.extend_from_slice(b"fn x() {"),
                }
            }
            out.push(text);
        }
        out
    }

    /// The o200k table with another digit group weight.
    fn with_digit_weight(digit: u32) -> Table {
        let mut raw = Family::O200k.raw().to_vec();
        raw[12..16].copy_from_slice(&digit.to_le_bytes());
        Table::decode(&raw).unwrap()
    }

    #[test]
    fn the_fused_loop_equals_the_two_passes() {
        let odd = with_digit_weight(40_001);
        let tables = Family::ALL.map(|f| f.table());
        for (name, table) in tables
            .iter()
            .map(|t| ("built in", *t))
            .chain([("odd", &odd)])
        {
            for text in long_texts() {
                let fused = table.units_after(Tail::NONE, &text);
                assert_eq!(fused, table.units_after_two_pass(Tail::NONE, &text));
                assert_eq!(fused, by_definition(table, &text), "{name} {text:?}");
                // The portable loop (no AVX2) too.
                let run = first_run(Tail::NONE, &text);
                let rest = text.get(1..).unwrap_or(&[]);
                assert_eq!(
                    pair_sum_runs_portable(&table.by_pair, &text, run),
                    (
                        pair_sum(&table.by_pair, &text),
                        inside_runs(&text).0,
                        inside_runs(&text).1,
                        digit_groups(run, rest)
                    )
                );
            }
        }
    }

    #[test]
    fn long_pieces_read_one_after_another_sum_to_the_whole() {
        let table = &with_digit_weight(50_003);
        for (i, text) in long_texts().into_iter().enumerate() {
            let whole = by_definition(table, &text);
            // Cuts at block edges, at the ends, and two random ones.
            let mut cuts = vec![0, 1, BLOCK, BLOCK + 1, BLOCK + 2, 2 * BLOCK + 1];
            cuts.extend([i * 7 % (text.len() + 1), i * 13 % (text.len() + 1)]);
            for cut in cuts.into_iter().filter(|&c| c <= text.len()) {
                let (a, b) = text.split_at(cut);
                for (one, two) in [(a, b), (b, a)] {
                    let joined = [one, two].concat();
                    let tail = Tail::NONE.after(one);
                    let split = table.units_after(Tail::NONE, one) + table.units_after(tail, two);
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
                table.units_after(Tail::NONE, &text),
                by_definition(table, &text),
                "{text:?}"
            );
        }
    }

    #[test]
    fn pieces_read_one_after_another_sum_to_the_whole() {
        let odd = with_digit_weight(30_007);
        for (table, text) in [Family::Qwen.table(), &odd]
            .into_iter()
            .flat_map(|t| texts().into_iter().map(move |x| (t, x)))
        {
            for cut in 0..=text.len() {
                let (a, b) = text.split_at(cut);
                let split =
                    table.units_after(Tail::NONE, a) + table.units_after(Tail::NONE.after(a), b);
                assert_eq!(split, by_definition(table, &text), "{a:?} | {b:?}");
                // In three pieces, the middle one all digits or empty.
                for mid in [&b""[..], b"5", b"12", b"123", b"1234"] {
                    let whole = [a, mid, b].concat();
                    let t1 = Tail::NONE.after(a);
                    let t2 = t1.after(mid);
                    let three = table.units_after(Tail::NONE, a)
                        + table.units_after(t1, mid)
                        + table.units_after(t2, b);
                    assert_eq!(
                        three,
                        by_definition(table, &whole),
                        "{a:?} | {mid:?} | {b:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_run_of_spaces_costs_about_one_token() {
        let table = Family::O200k.table();
        let text = format!("x{}y", " ".repeat(1000));
        let tokens = (table.units_after(Tail::NONE, text.as_bytes()) + SCALE / 2) / SCALE;
        // 7 with the o200k table refitted with the digit weight, 6 before.
        assert!(tokens <= 8, "{tokens} tokens for a run of 1000 spaces");
    }

    #[test]
    fn digit_groups_start_at_every_third_digit_of_a_run() {
        assert_eq!(digit_groups(0, b"1"), 0);
        assert_eq!(digit_groups(0, b"123"), 0);
        assert_eq!(digit_groups(0, b"1234"), 1);
        assert_eq!(digit_groups(0, b"1234567"), 2);
        assert_eq!(digit_groups(0, b"12:34:56.789 2024"), 1);
        assert_eq!(digit_groups(3, b"1"), 1);
        for run in 0..70u64 {
            for len in 0..200usize {
                let text = vec![b'8'; len];
                let mut mask_run = run;
                let blocks: u64 = text
                    .chunks(64)
                    .map(|c| {
                        let mask = c.iter().enumerate().fold(0u64, |m, (j, _)| m | 1 << j);
                        let g = block_groups(mask, &mut mask_run);
                        if c.len() < 64 {
                            mask_run = run + len as u64; // a short chunk is not a block
                        }
                        g
                    })
                    .sum();
                assert_eq!(blocks, digit_groups(run, &text), "run {run} len {len}");
            }
        }
        assert_eq!(block_groups(0b1111_0000_1111, &mut 2), 2);
    }

    #[test]
    fn the_bit_parallel_group_count_is_the_walk() {
        // Random blocks of digits and other bytes (runs of every length,
        // across block edges), any run carried in: the group starts counted
        // with masks equal the byte-by-byte walk, and both digit masks equal
        // the byte test.
        let mut seed = 5u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let pieces: &[&[u8]] = &[b"7", b"12", b"345", b"9999999", b"x", b"/", b":", b"\xff"];
        for _ in 0..20_000 {
            let mut block = Vec::with_capacity(BLOCK + 8);
            while block.len() < BLOCK {
                let piece = pieces[(next() % pieces.len() as u64) as usize];
                block.extend_from_slice(piece);
            }
            if next() % 5 == 0 {
                block = (0..BLOCK).map(|_| next() as u8).collect();
            }
            let block: [u8; BLOCK] = block[..BLOCK].try_into().unwrap();
            let want = block
                .iter()
                .enumerate()
                .fold(0u64, |m, (j, b)| m | u64::from(b.is_ascii_digit()) << j);
            assert_eq!(digit_mask_swar(&block), want, "{block:?}");
            #[cfg(target_arch = "x86_64")]
            if std::is_x86_feature_detected!("avx2") {
                // SAFETY: the CPU supports AVX2 (checked just above).
                assert_eq!(unsafe { digit_mask_avx2(&block) }, want, "{block:?}");
            }
            let run = match next() % 3 {
                0 => 0,
                1 => next() % 7,
                _ => next() % 200,
            };
            let mut after = run;
            let groups = block_groups(want, &mut after);
            assert_eq!(groups, digit_groups(run, &block), "run {run} {block:?}");
            let trailing = block
                .iter()
                .rev()
                .take_while(|b| b.is_ascii_digit())
                .count() as u64;
            let expect = if trailing == BLOCK as u64 {
                run + trailing
            } else {
                trailing
            };
            assert_eq!(after, expect, "run {run} {block:?}");
        }
    }

    #[test]
    fn the_digit_weight_is_in_the_o200k_and_cl100k_tables() {
        // The fit puts about a token on the 4th, 7th, ... digit (both cut
        // digits into threes) and little on the pairs inside a group.
        for family in [Family::O200k, Family::Cl100k] {
            let table = family.table();
            assert!(
                table.digit > SCALE / 2,
                "{family:?} digit weight {}",
                table.digit
            );
            let units = |s: &str| table.units_after(Tail::NONE, s.as_bytes());
            let (short, long) = (units("x 12 y"), units("x 123456789012 y"));
            let tokens = (long - short + SCALE / 2) / SCALE;
            assert!(
                (2..=5).contains(&tokens),
                "{family:?}: {tokens} more tokens for 10 more digits"
            );
        }
    }

    #[test]
    fn a_damaged_table_is_refused() {
        let mut heavy_digit = Family::O200k.raw().to_vec();
        heavy_digit[12..16].copy_from_slice(&(SCALE as u32).to_le_bytes());
        assert!(Table::decode(&heavy_digit).is_err());
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
