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
//! An ASCII letter after ASCII punctuation that itself follows a space or
//! punctuation (`"/name`, `://name`, ` /name`, `().name`) adds the
//! punctuation weight of the header: the tokenizers' pre-split joins that
//! punctuation to the one before it and starts a token at the letter, while
//! after a letter or digit (`java/lang`, `a.name`) the punctuation and the
//! name are one piece; the pair `/`-letter alone, which cannot tell them
//! apart, over-counted stack traces' paths by 5%.
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
/// Tables with the punctuation weight: a 24-byte header.
const MAGIC: &[u8; 8] = b"ctxbgr2\0";
/// Tables written before it (16-byte header): read with a punctuation
/// weight of 0, so their estimates do not change.
const MAGIC_V1: &[u8; 8] = b"ctxbgr1\0";

/// Whether `b` is an ASCII letter.
#[inline(always)]
fn is_letter(b: u8) -> bool {
    b.is_ascii_alphabetic()
}

/// Whether `b` is ASCII punctuation (0x21-0x7E, not a letter or digit).
#[inline(always)]
fn is_punct(b: u8) -> bool {
    (0x21..=0x7E).contains(&b) && !b.is_ascii_alphanumeric()
}

/// Whether `b` is a space or ASCII punctuation: punctuation after it joins
/// it, not the name after it.
#[inline(always)]
fn is_nonword(b: u8) -> bool {
    b == b' ' || is_punct(b)
}

/// Whether a byte `b` read after `one_back` and `two_back` (the byte before
/// it, and the one before that) takes the punctuation weight: a letter after
/// punctuation after a space or punctuation.
#[inline(always)]
fn punct_context(two_back: Option<u8>, one_back: Option<u8>, b: u8) -> bool {
    is_letter(b) && one_back.is_some_and(is_punct) && two_back.is_some_and(is_nonword)
}

/// The bytes of `bytes` that take the punctuation weight, read after `two_back`
/// and `one_back` (`None`: nothing; the text starts there).
fn punct_contexts(mut two_back: Option<u8>, mut one_back: Option<u8>, bytes: &[u8]) -> u64 {
    let mut count = 0;
    for &b in bytes {
        count += u64::from(punct_context(two_back, one_back, b));
        (two_back, one_back) = (one_back, Some(b));
    }
    count
}

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

/// A 64-byte block's bytes by class, bit j for byte j.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Masks {
    /// ASCII digits.
    digit: u64,
    /// ASCII letters.
    letter: u64,
    /// ASCII punctuation (`is_punct`).
    punct: u64,
    /// Spaces and ASCII punctuation (`is_nonword`).
    nonword: u64,
    /// Spaces and tabs: the run bytes (`RUNS`).
    space: u64,
    tab: u64,
}

impl Masks {
    /// Every mask shifted down by `k` bits (below 64): bit j becomes the bit
    /// of byte j + k, zeros above.
    #[inline(always)]
    fn shifted_down(self, k: usize) -> Masks {
        Masks {
            digit: self.digit >> k,
            letter: self.letter >> k,
            punct: self.punct >> k,
            nonword: self.nonword >> k,
            space: self.space >> k,
            tab: self.tab >> k,
        }
    }

    /// The byte tests, one byte at a time (the tests' reference).
    #[cfg(test)]
    fn of_bytes(block: &[u8; BLOCK]) -> Masks {
        let bits = |test: fn(u8) -> bool| {
            block
                .iter()
                .enumerate()
                .fold(0u64, |m, (j, &b)| m | u64::from(test(b)) << j)
        };
        Masks {
            digit: bits(|b| b.is_ascii_digit()),
            letter: bits(is_letter),
            punct: bits(is_punct),
            nonword: bits(is_nonword),
            space: bits(|b| b == b' '),
            tab: bits(|b| b == b'\t'),
        }
    }
}

/// Top bit of each byte of `x` set where the byte is in `lo..=hi` (`hi` below
/// 0x80): each byte's test in its own lane, no carry crosses a byte.
#[inline(always)]
fn between_swar(x: u64, lo: u8, hi: u8) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    let low7 = x & (0x7F * ONES);
    let at_least = low7 + u64::from(0x80 - lo) * ONES; // top bit: low7 >= lo
    let above = low7 + u64::from(0x7F - hi) * ONES; // top bit: low7 > hi
    at_least & !above & !x & (0x80 * ONES)
}

/// `Masks` eight bytes at a time, the eight top bits of each test gathered
/// by one multiply (the loop without AVX2).
#[inline(always)]
fn masks_swar(block: &[u8; BLOCK]) -> Masks {
    let gather = |top: u64| (top >> 7).wrapping_mul(0x0102_0408_1020_4080) >> 56;
    let mut m = Masks {
        digit: 0,
        letter: 0,
        punct: 0,
        nonword: 0,
        space: 0,
        tab: 0,
    };
    for (k, word) in block.chunks_exact(8).enumerate() {
        let x = u64::from_le_bytes(word.try_into().expect("8 bytes"));
        let digit = between_swar(x, b'0', b'9');
        let letter = between_swar(x | 0x2020_2020_2020_2020, b'a', b'z');
        let space = between_swar(x, b' ', b' ');
        // Space and punctuation: 0x20-0x7E, not a letter or digit.
        let nonword = between_swar(x, b' ', 0x7E) & !digit & !letter;
        m.digit |= gather(digit) << (8 * k);
        m.letter |= gather(letter) << (8 * k);
        m.punct |= gather(nonword & !space) << (8 * k);
        m.nonword |= gather(nonword) << (8 * k);
        m.space |= gather(space) << (8 * k);
        m.tab |= gather(between_swar(x, b'\t', b'\t')) << (8 * k);
    }
    m
}

/// `masks_swar` with 32-byte compares and move masks.
///
/// SAFETY (callers): the CPU supports AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn masks_avx2(block: &[u8; BLOCK]) -> Masks {
    use std::arch::x86_64::{
        __m256i, _mm256_andnot_si256, _mm256_cmpeq_epi8, _mm256_loadu_si256, _mm256_min_epu8,
        _mm256_movemask_epi8, _mm256_or_si256, _mm256_set1_epi8, _mm256_sub_epi8,
    };
    let half = |at: usize| {
        // SAFETY: `at` is 0 or 32, so the 32 bytes read are inside `block`.
        let v = unsafe { _mm256_loadu_si256(block.as_ptr().add(at).cast::<__m256i>()) };
        // `v - lo <= hi - lo` unsigned: min(d, hi - lo) == d.
        let within = |v: __m256i, lo: u8, hi: u8| {
            let d = _mm256_sub_epi8(v, _mm256_set1_epi8(lo as i8));
            _mm256_cmpeq_epi8(_mm256_min_epu8(d, _mm256_set1_epi8((hi - lo) as i8)), d)
        };
        let bits = |m: __m256i| u64::from(_mm256_movemask_epi8(m) as u32);
        let lower = _mm256_or_si256(v, _mm256_set1_epi8(0x20));
        let digit = within(v, b'0', b'9');
        let letter = within(lower, b'a', b'z');
        // Space and punctuation: one range, 0x20-0x7E, less the letters and
        // digits.
        let nonword = _mm256_andnot_si256(_mm256_or_si256(digit, letter), within(v, b' ', 0x7E));
        let space = bits(_mm256_cmpeq_epi8(v, _mm256_set1_epi8(b' ' as i8)));
        let nonword = bits(nonword);
        Masks {
            digit: bits(digit),
            letter: bits(letter),
            punct: nonword & !space,
            nonword,
            space,
            tab: bits(_mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'\t' as i8))),
        }
    };
    let (a, b) = (half(0), half(32));
    Masks {
        digit: a.digit | b.digit << 32,
        letter: a.letter | b.letter << 32,
        punct: a.punct | b.punct << 32,
        nonword: a.nonword | b.nonword << 32,
        space: a.space | b.space << 32,
        tab: a.tab | b.tab << 32,
    }
}

/// The spaces and the tabs of a block inside a run of their own byte (the
/// same byte before and after): `masks` of the block's bytes, `carry` the
/// masks of the block before (bit 63: the byte before the block's first),
/// `next` the byte after the block's last.
#[inline(always)]
fn block_runs(masks: &Masks, carry: &Masks, next: u8) -> (u64, u64) {
    let inside = |m: u64, before: u64, after: bool| {
        (m & (m << 1 | before >> 63) & (m >> 1 | u64::from(after) << 63)).count_ones()
    };
    (
        u64::from(inside(masks.space, carry.space, next == b' ')),
        u64::from(inside(masks.tab, carry.tab, next == b'\t')),
    )
}

/// The letters of a block that take the punctuation weight (`punct_context`):
/// `masks` of the block's bytes, `carry` the masks of the block before (only
/// its last two bytes' bits are read: bit 63, and bit 62 for `nonword`),
/// which becomes this block's.
#[inline(always)]
fn block_puncts(masks: Masks, carry: &mut Masks) -> u64 {
    let punct_before = masks.punct << 1 | carry.punct >> 63;
    let nonword_two_before = masks.nonword << 2 | carry.nonword >> 62;
    *carry = masks;
    u64::from((masks.letter & punct_before & nonword_two_before).count_ones())
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
    /// What a letter after a `/` after a space or punctuation adds
    /// (`punct_context`; 0 in tables fitted before it).
    punct: u64,
}

impl Table {
    /// Header: magic (`ctxbgr2`), conservative factor (u32, 1/65536), the
    /// digit group weight and the punctuation weight (u32 each, 1/65536,
    /// below one token), a reserved u32 (0); then `ROWS x 256` little-endian
    /// u16 weights. A `ctxbgr1` table has a 16-byte header, without the
    /// punctuation weight and the reserved u32: read with it 0.
    pub fn decode(raw: &[u8]) -> Result<Table, CoreError> {
        let bad = |why: &str| CoreError::Config(format!("not an estimator table: {why}"));
        let header = match raw.get(..8) {
            Some(m) if m == MAGIC => 24,
            Some(m) if m == MAGIC_V1 => 16,
            _ => return Err(bad("wrong magic")),
        };
        if raw.len() != header + ROWS * 256 * 2 {
            return Err(bad("wrong size"));
        }
        let u32_at =
            |at: usize| u64::from(u32::from_le_bytes(raw[at..at + 4].try_into().expect("4")));
        let conservative = u32_at(8);
        let digit = u32_at(12);
        if digit >= SCALE {
            return Err(bad("a digit group weight of a token or more"));
        }
        let punct = if header == 24 { u32_at(16) } else { 0 };
        if punct >= SCALE {
            return Err(bad("a punctuation weight of a token or more"));
        }
        if header == 24 && u32_at(20) != 0 {
            return Err(bad("a reserved header field not 0"));
        }
        let weights: Box<[u16]> = raw[header..]
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
            punct,
        })
    }

    /// Weight units of `bytes` read after `tail` (`Tail::NONE`: the text
    /// starts here). Summing the units of consecutive pieces this way, each
    /// after the tail the ones before it leave (`Tail::after`), equals the
    /// units of their concatenation.
    pub fn units_after(&self, tail: Tail, bytes: &[u8]) -> u64 {
        let run = first_run(tail, bytes);
        let (pairs, spaces, tabs, groups, puncts) =
            pair_sum_runs(&self.by_pair, bytes, run, tail.last[1]);
        self.with_edges(tail, bytes, pairs, [spaces, tabs], groups, puncts)
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
        let puncts = match bytes {
            [first, rest @ ..] => punct_contexts(tail.last[1], Some(*first), rest),
            [] => 0,
        };
        self.with_edges(tail, bytes, pairs, [spaces, tabs], groups, puncts)
    }

    /// The units from the sum of the pairs inside `bytes`, the count of run
    /// bytes inside them and of digit groups and punctuation contexts after their
    /// first byte: adds the first byte's weight (after `tail`), its digit
    /// group and punctuation context, and the runs that cross the edge with the
    /// previous piece.
    #[inline(always)]
    fn with_edges(
        &self,
        tail: Tail,
        bytes: &[u8],
        pairs: u64,
        mut inside: [u64; RUNS.len()],
        groups: u64,
        puncts: u64,
    ) -> u64 {
        let Some(&first) = bytes.first() else {
            return 0;
        };
        let w = &self.weights;
        let first_group =
            first.is_ascii_digit() && groups_between(tail.digits, tail.digits + 1) == 1;
        let tail = tail.last;
        let first_punct = punct_context(tail[0], tail[1], first);
        let mut total = match tail[1] {
            None => u64::from(w[START << 8 | first as usize]),
            Some(prev) => u64::from(w[(prev as usize) << 8 | first as usize]),
        };
        total += pairs + (groups + u64::from(first_group)) * self.digit;
        total += (puncts + u64::from(first_punct)) * self.punct;
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
/// loop: blocks of 64 pairs, each block's bytes classed by compares into
/// bit masks (digits, letters, punctuation, spaces, tabs; 32 bytes a compare
/// where the CPU has AVX2), the runs, digit groups and punctuation contexts
/// counted on the masks, beside the block's pair loads (each pair's index one
/// u16 load), four sums side by side so the loads do not wait on each other.
/// A second pass for the runs cost 20-25% (docs/estimators.md).
/// `run`: the digits the run of digits that the first byte ends has (0: the
/// first byte is not a digit); `before`: the byte before the first (`None`:
/// the text starts there); the digit groups and punctuation contexts are counted
/// from the second byte on (`with_edges` weighs the first).
#[inline]
fn pair_sum_runs(by_pair: &[u16; 65536], bytes: &[u8], run: u64, before: Option<u8>) -> Sums {
    #[cfg(target_arch = "x86_64")]
    {
        if bytes.len() >= BLOCK + 2 && has_avx2() {
            // SAFETY: the CPU supports AVX2, BMI1, BMI2, LZCNT and POPCNT
            // (checked just above).
            return unsafe { pair_sum_runs_avx2(by_pair, bytes, run, before) };
        }
    }
    pair_sum_runs_portable(by_pair, bytes, run, before)
}

/// Whether the CPU has what `pair_sum_runs_avx2` is compiled for (every CPU
/// with AVX2 has the other four; each is checked all the same).
#[cfg(target_arch = "x86_64")]
#[inline]
fn has_avx2() -> bool {
    std::is_x86_feature_detected!("avx2")
        && std::is_x86_feature_detected!("popcnt")
        && std::is_x86_feature_detected!("lzcnt")
        && std::is_x86_feature_detected!("bmi1")
        && std::is_x86_feature_detected!("bmi2")
}

/// What `pair_sum_runs` counts: the pair sum, the spaces and the tabs inside
/// runs, the digit group starts and the punctuation contexts.
type Sums = (u64, u64, u64, u64, u64);

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

/// Pairs a block of `pair_sum_runs` reads (its masks are u64).
const BLOCK: usize = 64;

/// SAFETY (callers): the CPU supports AVX2, BMI1, BMI2, LZCNT and POPCNT
/// (`has_avx2`); the body is safe code, compiled with them enabled (one
/// instruction for each block's bit counts and leading zeros).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,bmi1,bmi2,lzcnt,popcnt")]
unsafe fn pair_sum_runs_avx2(
    by_pair: &[u16; 65536],
    bytes: &[u8],
    run: u64,
    before: Option<u8>,
) -> Sums {
    // SAFETY: this function runs only where the CPU supports AVX2.
    pair_sum_runs_with(by_pair, bytes, run, before, |block| unsafe {
        masks_avx2(block)
    })
}

#[inline(always)]
fn pair_sum_runs_portable(
    by_pair: &[u16; 65536],
    bytes: &[u8],
    run: u64,
    before: Option<u8>,
) -> Sums {
    pair_sum_runs_with(by_pair, bytes, run, before, masks_swar)
}

/// The weight of the pair of bytes at `i` and `i + 1`: the two bytes read as
/// one little-endian u16 make the index (one load).
#[inline(always)]
fn pair_weight(by_pair: &[u16; 65536], bytes: &[u8], i: usize) -> u64 {
    let pair: [u8; 2] = bytes[i..i + 2].try_into().expect("2 bytes");
    u64::from(by_pair[usize::from(u16::from_le_bytes(pair))])
}

/// The fused loop, `masks` giving a block's byte classes as bits.
#[inline(always)]
fn pair_sum_runs_with(
    by_pair: &[u16; 65536],
    bytes: &[u8],
    mut run: u64,
    before: Option<u8>,
    masks: impl Fn(&[u8; BLOCK]) -> Masks,
) -> Sums {
    let n = bytes.len();
    let mut sums = [0u64; 4];
    let (mut spaces, mut tabs, mut groups, mut puncts) = (0u64, 0u64, 0u64, 0u64);
    // The classes of the two bytes before the first block's (the first byte
    // and `before`), as the bits 63 and 62 of a block before it.
    let first = bytes.first().copied();
    let mut carry = Masks {
        digit: 0,
        letter: 0,
        punct: u64::from(first.is_some_and(is_punct)) << 63,
        nonword: u64::from(first.is_some_and(is_nonword)) << 63
            | u64::from(before.is_some_and(is_nonword)) << 62,
        space: u64::from(first == Some(b' ')) << 63,
        tab: u64::from(first == Some(b'\t')) << 63,
    };
    // Block at `at`: the pairs starting at at..at + BLOCK and the run bytes,
    // digits and letters at at + 1..at + BLOCK + 1 (a run byte with the byte
    // after it).
    let mut at = 0;
    while at + BLOCK + 2 <= n {
        let w: &[u8; BLOCK + 2] = bytes[at..at + BLOCK + 2].try_into().expect("a block");
        let classes = masks(w[1..=BLOCK].try_into().expect("a block"));
        let (s, t) = block_runs(&classes, &carry, w[BLOCK + 1]);
        spaces += s;
        tabs += t;
        groups += block_groups(classes.digit, &mut run);
        puncts += block_puncts(classes, &mut carry);
        for j in (0..BLOCK).step_by(4) {
            for (k, sum) in sums.iter_mut().enumerate() {
                *sum += pair_weight(by_pair, w, j + k);
            }
        }
        at += BLOCK;
    }
    // The last pairs (fewer than BLOCK + 1); the last bytes' classes (at
    // most a block) with the same masks, as if padded with zeros (no digit,
    // letter, punctuation, space or tab: nothing counted there, and the last
    // byte has no byte after it); `carry` holds the two bytes before them. A
    // walk here cost the gate's ~700-byte texts half their speed.
    let rest = &bytes[at..];
    let rest_sum: u64 = (0..rest.len().saturating_sub(1))
        .map(|i| pair_weight(by_pair, rest, i))
        .sum();
    if let [_, after @ ..] = rest {
        let classes = match n.checked_sub(BLOCK) {
            // The text's last block, its bits shifted down to the bytes not
            // yet read (zeros shifted in above them): no copy.
            Some(from) if !after.is_empty() => {
                masks(bytes[from..].try_into().expect("a block")).shifted_down(BLOCK - after.len())
            }
            _ => {
                let mut pad = [0u8; BLOCK];
                pad[..after.len()].copy_from_slice(after);
                masks(&pad)
            }
        };
        let (s, t) = block_runs(&classes, &carry, 0);
        spaces += s;
        tabs += t;
        groups += block_groups(classes.digit, &mut run);
        puncts += block_puncts(classes, &mut carry);
    }
    (
        sums.iter().sum::<u64>() + rest_sum,
        spaces,
        tabs,
        groups,
        puncts,
    )
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
    /// digit weight for the 4th, 7th, ... digit of a run of digits, and the
    /// punctuation weight for a letter after punctuation after a space or
    /// punctuation.
    fn by_definition(table: &Table, bytes: &[u8]) -> u64 {
        let mut total = 0;
        let mut digits = 0u64;
        let punct = |b: u8| b.is_ascii_punctuation();
        for (i, &b) in bytes.iter().enumerate() {
            if i >= 2
                && b.is_ascii_alphabetic()
                && punct(bytes[i - 1])
                && (bytes[i - 2] == b' ' || punct(bytes[i - 2]))
            {
                total += table.punct;
            }
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
            b"/",
            b"\"",
            b":",
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
                    8 if next() % 2 == 0 => {
                        let paths: [&[u8]; 6] =
                            [b"/", b"\"/usr", b"://a", b" /x/y", b"z/w", b"-/Q"];
                        text.extend_from_slice(paths[(next() % 6) as usize]);
                    }
                    _ => text.extend_from_slice(b"fn x() {"),
                }
            }
            out.push(text);
        }
        out
    }

    /// A family's table in the current format, its weights as built in,
    /// with another digit group and punctuation weight.
    fn with_weights(family: Family, digit: u32, punct: u32) -> Vec<u8> {
        let raw = family.raw();
        let header = if &raw[..8] == MAGIC { 24 } else { 16 };
        let mut out = MAGIC.to_vec();
        out.extend_from_slice(&raw[8..12]);
        out.extend_from_slice(&digit.to_le_bytes());
        out.extend_from_slice(&punct.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&raw[header..]);
        out
    }

    /// The o200k table with another digit group weight and punctuation
    /// weight.
    fn with_digit_weight(digit: u32) -> Table {
        Table::decode(&with_weights(Family::O200k, digit, 20_011)).unwrap()
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
                // The portable loop (no AVX2) too, after any byte.
                let run = first_run(Tail::NONE, &text);
                let rest = text.get(1..).unwrap_or(&[]);
                for before in [None, Some(b' '), Some(b'"'), Some(b'a'), Some(b'/')] {
                    let puncts = match text.first() {
                        Some(&f) => punct_contexts(before, Some(f), rest),
                        None => 0,
                    };
                    assert_eq!(
                        pair_sum_runs_portable(&table.by_pair, &text, run, before),
                        (
                            pair_sum(&table.by_pair, &text),
                            inside_runs(&text).0,
                            inside_runs(&text).1,
                            digit_groups(run, rest),
                            puncts,
                        )
                    );
                    assert_eq!(
                        pair_sum_runs(&table.by_pair, &text, run, before),
                        pair_sum_runs_portable(&table.by_pair, &text, run, before)
                    );
                }
            }
        }
    }

    #[test]
    fn random_bytes_in_random_pieces_are_the_definition() {
        // Random bytes (any byte, and runs of spaces, tabs, digits and
        // punctuation), 0-300 long, most near the 64-byte block edges; the
        // loop with masks by AVX2 where the CPU has it and by SWAR (the loop
        // without AVX2) against the per-byte counts, after any run of digits
        // and byte before; and the text cut into up to four pieces read one
        // after another against the definition of the whole.
        let mut seed = 0x5EED_u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let table = with_digit_weight(45_007);
        let pieces: &[&[u8]] = &[
            b" ",
            b"\t",
            b"/",
            b"\"",
            b":",
            b".",
            b"a",
            b"Q",
            b"7",
            b"\n",
            b"\xc3\xa9",
            b"\xff",
        ];
        for _ in 0..6_000 {
            let len = match next() % 4 {
                0 => (next() % 301) as usize,
                k => (64 * k as usize + (next() % 9) as usize).saturating_sub(4),
            };
            let mut text = Vec::with_capacity(len + 80);
            while text.len() < len {
                let piece = pieces[(next() % pieces.len() as u64) as usize];
                match next() % 4 {
                    0 => text.push(next() as u8),
                    1 => text.extend_from_slice(piece),
                    _ => text.extend(std::iter::repeat_n(piece[0], (next() % 70) as usize)),
                }
            }
            text.truncate(len);
            let rest = text.get(1..).unwrap_or(&[]);
            let run = match text.first() {
                Some(b) if b.is_ascii_digit() => 1 + next() % 8,
                _ => 0,
            };
            let before =
                [None, Some(b' '), Some(b'/'), Some(b'x'), Some(0xE9)][(next() % 5) as usize];
            let want = (
                pair_sum(&table.by_pair, &text),
                inside_runs(&text).0,
                inside_runs(&text).1,
                digit_groups(run, rest),
                match text.first() {
                    Some(&f) => punct_contexts(before, Some(f), rest),
                    None => 0,
                },
            );
            let portable = pair_sum_runs_portable(&table.by_pair, &text, run, before);
            assert_eq!(portable, want, "portable {run} {before:?} {text:?}");
            #[cfg(target_arch = "x86_64")]
            if text.len() >= BLOCK + 2 && has_avx2() {
                // SAFETY: the CPU has what the loop is compiled for (checked
                // just above).
                let avx2 = unsafe { pair_sum_runs_avx2(&table.by_pair, &text, run, before) };
                assert_eq!(avx2, want, "avx2 {run} {before:?} {text:?}");
            }
            assert_eq!(pair_sum_runs(&table.by_pair, &text, run, before), want);
            // Cut into up to four pieces.
            let mut cuts: Vec<usize> = (0..next() % 4)
                .map(|_| (next() % (text.len() as u64 + 1)) as usize)
                .collect();
            cuts.extend([0, text.len()]);
            cuts.sort_unstable();
            let (mut tail, mut units) = (Tail::NONE, 0);
            for w in cuts.windows(2) {
                let piece = &text[w[0]..w[1]];
                units += table.units_after(tail, piece);
                tail = tail.after(piece);
            }
            assert_eq!(units, by_definition(&table, &text), "{cuts:?} {text:?}");
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
            let masks = Masks::of_bytes(&block);
            let want = masks.digit;
            assert_eq!(masks_swar(&block), masks, "{block:?}");
            #[cfg(target_arch = "x86_64")]
            if std::is_x86_feature_detected!("avx2") {
                // SAFETY: the CPU supports AVX2 (checked just above).
                assert_eq!(unsafe { masks_avx2(&block) }, masks, "{block:?}");
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
    fn the_punctuation_count_with_masks_is_the_walk() {
        // Random blocks of letters, slashes, punctuation, spaces, digits and
        // other bytes, after any two bytes: the letters counted with masks
        // (carried from the block before) equal the byte-by-byte walk, in
        // one block and in two consecutive ones.
        let mut seed = 9u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let pieces: &[&[u8]] = &[
            b"/",
            b"a",
            b"Zq",
            b"\"",
            b":",
            b"//",
            b" ",
            b"7",
            b"\n",
            b"\t",
            b"\xc3\xa9",
            b"~",
            b"\x7f",
            b"@",
            b"[",
            b"`",
            b"{",
        ];
        let byte = |n: u64| {
            [
                None,
                Some(b'/'),
                Some(b' '),
                Some(b'x'),
                Some(b'"'),
                Some(0x80),
            ][n as usize % 6]
        };
        for _ in 0..20_000 {
            let mut text = Vec::with_capacity(2 * BLOCK + 8);
            while text.len() < 2 * BLOCK {
                let piece = pieces[(next() % pieces.len() as u64) as usize];
                text.extend_from_slice(piece);
            }
            if next() % 5 == 0 {
                text = (0..2 * BLOCK).map(|_| next() as u8).collect();
            }
            let (two_back, one_back) = (byte(next()), byte(next()));
            let mut carry = Masks::of_bytes(&[0; BLOCK]);
            carry.punct = u64::from(one_back.is_some_and(is_punct)) << 63;
            carry.nonword = u64::from(one_back.is_some_and(is_nonword)) << 63
                | u64::from(two_back.is_some_and(is_nonword)) << 62;
            let mut counted = 0;
            for block in text[..2 * BLOCK].chunks_exact(BLOCK) {
                let block: &[u8; BLOCK] = block.try_into().unwrap();
                let masks = Masks::of_bytes(block);
                assert_eq!(masks_swar(block), masks, "{block:?}");
                counted += block_puncts(masks, &mut carry);
            }
            let want = punct_contexts(two_back, one_back, &text[..2 * BLOCK]);
            assert_eq!(counted, want, "{two_back:?} {one_back:?} {text:?}");
        }
    }

    #[test]
    fn a_letter_after_punctuation_after_punctuation_takes_the_punctuation_weight() {
        let table = with_digit_weight(0);
        let punct = |s: &str| punct_contexts(None, None, s.as_bytes());
        // After a space, a quote, `://`, `//`, `()`: the name starts a token.
        assert_eq!(punct("\"/usr/lib"), 1);
        assert_eq!(punct("see /usr/lib"), 1);
        assert_eq!(punct("https://example.com/a/b"), 1);
        assert_eq!(punct("// comment //x"), 1);
        assert_eq!(punct("f().name __init__ ${HOME}"), 3);
        // After a letter or digit, a line end, a tab or the start: none.
        assert_eq!(punct("java/lang/String.valueOf"), 0);
        assert_eq!(punct("v1/api"), 0);
        assert_eq!(punct("/usr\n/lib\t/x"), 0);
        // Not before a digit, a space, punctuation or a non-ASCII letter.
        assert_eq!(punct(" /1 / x /_ /. // (\u{e9}"), 0);
        let units = |s: &str| table.units_after(Tail::NONE, s.as_bytes());
        let (with, without) = (units(" \"/usr"), units(" a/usr"));
        let pair = |a: u8, b: u8| u64::from(table.weights[usize::from(a) << 8 | usize::from(b)]);
        assert_eq!(
            with + pair(b' ', b'a') + pair(b'a', b'/'),
            without + pair(b' ', b'"') + pair(b'"', b'/') + table.punct
        );
    }

    #[test]
    fn a_first_version_table_reads_with_a_punctuation_weight_of_0() {
        // A `ctxbgr1` table (16-byte header): the same estimates as the same
        // weights in the current format with a punctuation weight of 0.
        let current = with_weights(Family::Qwen, 1234, 0);
        let mut v1 = MAGIC_V1.to_vec();
        v1.extend_from_slice(&current[8..16]);
        v1.extend_from_slice(&current[24..]);
        let (old, new) = (
            Table::decode(&v1).unwrap(),
            Table::decode(&current).unwrap(),
        );
        assert_eq!(old.punct, 0);
        for text in long_texts() {
            assert_eq!(
                old.units_after(Tail::NONE, &text),
                new.units_after(Tail::NONE, &text)
            );
        }
        // Its size is the 16-byte header's: 8 more bytes are refused.
        v1.extend_from_slice(&[0; 8]);
        assert!(Table::decode(&v1).is_err());
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
    fn the_punctuation_weight_is_in_every_table() {
        // The pre-split makes the letter start a token: the fit puts most of
        // a token on it (every family's table is fitted with it).
        for family in Family::ALL {
            let punct = family.table().punct;
            assert!(punct > SCALE / 2, "{family:?} {punct}");
        }
    }

    #[test]
    fn a_damaged_table_is_refused() {
        let raw = &with_weights(Family::O200k, 100, 200)[..];
        assert!(Table::decode(raw).is_ok());
        let mut heavy_digit = raw.to_vec();
        heavy_digit[12..16].copy_from_slice(&(SCALE as u32).to_le_bytes());
        assert!(Table::decode(&heavy_digit).is_err());
        let mut heavy_punct = raw.to_vec();
        heavy_punct[16..20].copy_from_slice(&(SCALE as u32).to_le_bytes());
        assert!(Table::decode(&heavy_punct).is_err());
        let mut reserved = raw.to_vec();
        reserved[20] = 1;
        assert!(Table::decode(&reserved).is_err());
        assert!(Table::decode(&raw[..raw.len() - 2]).is_err());
        assert!(Table::decode(&raw[..5]).is_err());
        let mut wrong = raw.to_vec();
        wrong[0] = b'X';
        assert!(Table::decode(&wrong).is_err());
        let mut run_above_pair = raw.to_vec();
        let at = 24 + 2 * ((START + 1) << 8 | b' ' as usize);
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
