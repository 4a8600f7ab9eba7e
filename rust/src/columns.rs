//! Typed, chunk-aware read access to the Arrow columns of a transcript.
//!
//! A column may arrive in several chunks (record batches) and, for strings,
//! as utf8, large_utf8, utf8_view or a dictionary of those. These wrappers
//! hide that behind `get(row)` with global row numbers, without copying the
//! string data.

use std::ops::Range;

use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, Int64Type, Int8Type};
use arrow_array::{
    Array, ArrayRef, BooleanArray, GenericStringArray, Int32Array, Int64Array, Int8Array,
    LargeStringArray, OffsetSizeTrait, StringArray, StringViewArray,
};
use arrow_buffer::NullBuffer;
use arrow_schema::DataType;
use memchr::memmem::Finder;

use crate::error::{CoreError, Result};

/// Row offsets of the chunks: chunk `i` holds rows `starts[i]..starts[i + 1]`.
#[derive(Debug, Clone)]
pub struct Chunking {
    starts: Vec<usize>,
}

impl Chunking {
    pub fn new(lengths: impl IntoIterator<Item = usize>) -> Self {
        let mut starts = vec![0];
        for len in lengths {
            starts.push(starts.last().unwrap() + len);
        }
        Chunking { starts }
    }

    pub fn rows(&self) -> usize {
        *self.starts.last().unwrap()
    }

    /// (chunk index, row within the chunk) of a global row.
    #[inline]
    pub fn locate(&self, row: usize) -> (usize, usize) {
        // One chunk is the common case (a table read whole, a Parquet batch).
        if self.starts.len() == 2 {
            return (0, row);
        }
        // Few chunks and sequential access dominate, so a binary search is cheap.
        let chunk = self.starts.partition_point(|&s| s <= row) - 1;
        (chunk, row - self.starts[chunk])
    }

    pub fn chunk_start(&self, chunk: usize) -> usize {
        self.starts[chunk]
    }
}

/// A plain string array (what a dictionary's values are too).
#[derive(Debug, Clone, Copy)]
pub enum Plain<'a> {
    Utf8(&'a StringArray),
    Large(&'a LargeStringArray),
    View(&'a StringViewArray),
}

impl<'a> Plain<'a> {
    fn new(array: &'a dyn Array) -> Option<Self> {
        Some(match array.data_type() {
            DataType::Utf8 => Plain::Utf8(array.as_string::<i32>()),
            DataType::LargeUtf8 => Plain::Large(array.as_string::<i64>()),
            DataType::Utf8View => Plain::View(array.as_string_view()),
            _ => return None,
        })
    }

    #[inline]
    pub fn value(self, i: usize) -> Option<&'a str> {
        match self {
            Plain::Utf8(a) => (!a.is_null(i)).then(|| a.value(i)),
            Plain::Large(a) => (!a.is_null(i)).then(|| a.value(i)),
            Plain::View(a) => (!a.is_null(i)).then(|| a.value(i)),
        }
    }

    /// The byte length of value `i` (`None` when null), read from the
    /// offsets: no string is made.
    #[inline]
    pub fn byte_len(self, i: usize) -> Option<usize> {
        fn of<O: OffsetSizeTrait>(a: &GenericStringArray<O>, i: usize) -> Option<usize> {
            let offsets = a.value_offsets();
            (!a.is_null(i)).then(|| (offsets[i + 1] - offsets[i]).as_usize())
        }
        match self {
            Plain::Utf8(a) => of(a, i),
            Plain::Large(a) => of(a, i),
            Plain::View(a) => (!a.is_null(i)).then(|| a.views()[i] as u32 as usize),
        }
    }

    pub fn len(self) -> usize {
        match self {
            Plain::Utf8(a) => a.len(),
            Plain::Large(a) => a.len(),
            Plain::View(a) => a.len(),
        }
    }

    pub fn is_empty(self) -> bool {
        self.len() == 0
    }

    /// The bytes of values `rows` laid end to end (null slots' bytes too),
    /// or `None` for a view array, which has no single values buffer.
    fn bytes_of(self, rows: Range<usize>) -> Option<&'a [u8]> {
        fn span<O: OffsetSizeTrait>(a: &GenericStringArray<O>, rows: Range<usize>) -> &[u8] {
            let offsets = a.value_offsets();
            let (start, end) = (offsets[rows.start].as_usize(), offsets[rows.end].as_usize());
            &a.values()[start..end]
        }
        match self {
            Plain::Utf8(a) => Some(span(a, rows)),
            Plain::Large(a) => Some(span(a, rows)),
            Plain::View(_) => None,
        }
    }

    /// Whether `self` and `other` are the very same array: the same buffers
    /// at the same offsets, compared by address (never the values), as the
    /// chunks of one pyarrow `dictionary_encode` share their dictionary.
    pub fn is_same(self, other: Plain<'_>) -> bool {
        fn nulls(n: Option<&NullBuffer>) -> Option<(*const u8, usize, usize)> {
            n.map(|n| (n.validity().as_ptr(), n.offset(), n.len()))
        }
        match (self, other) {
            (Plain::Utf8(a), Plain::Utf8(b)) => {
                a.len() == b.len()
                    && std::ptr::eq(a.value_offsets().as_ptr(), b.value_offsets().as_ptr())
                    && a.values().as_ptr() == b.values().as_ptr()
                    && nulls(a.nulls()) == nulls(b.nulls())
            }
            (Plain::Large(a), Plain::Large(b)) => {
                a.len() == b.len()
                    && std::ptr::eq(a.value_offsets().as_ptr(), b.value_offsets().as_ptr())
                    && a.values().as_ptr() == b.values().as_ptr()
                    && nulls(a.nulls()) == nulls(b.nulls())
            }
            (Plain::View(a), Plain::View(b)) => {
                a.len() == b.len()
                    && std::ptr::eq(a.views().as_ptr(), b.views().as_ptr())
                    && a.data_buffers().len() == b.data_buffers().len()
                    && a.data_buffers()
                        .iter()
                        .zip(b.data_buffers())
                        .all(|(x, y)| x.as_ptr() == y.as_ptr())
                    && nulls(a.nulls()) == nulls(b.nulls())
            }
            _ => false,
        }
    }
}

/// The keys of a dictionary chunk.
#[derive(Debug, Clone)]
pub enum Keys<'a> {
    /// int32 keys (what pyarrow's `dictionary_encode` makes), read in place.
    I32(&'a Int32Array),
    /// Any other key type, normalised once (null keys are `usize::MAX`).
    Owned(Vec<usize>),
}

impl Keys<'_> {
    /// The key of row `i`; `usize::MAX` when null.
    #[inline]
    pub fn get(&self, i: usize) -> usize {
        match self {
            Keys::I32(a) if a.is_null(i) => usize::MAX,
            Keys::I32(a) => a.value(i) as usize,
            Keys::Owned(keys) => keys[i],
        }
    }

    /// The end of the run of rows from `i` that share `i`'s key (not null).
    pub fn run_end(&self, i: usize) -> usize {
        let k = self.get(i);
        if k == usize::MAX {
            return i + 1;
        }
        match self {
            Keys::I32(a) if a.null_count() == 0 => {
                let rest = &a.values()[i + 1..];
                i + 1
                    + rest
                        .iter()
                        .position(|&x| x as usize != k)
                        .unwrap_or(rest.len())
            }
            _ => (i + 1..self.len())
                .find(|&j| self.get(j) != k)
                .unwrap_or(self.len()),
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Keys::I32(a) => a.len(),
            Keys::Owned(keys) => keys.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One chunk of a string column. Not recursive (a dictionary's values are
/// plain), so a lookup inlines into the scans.
#[derive(Debug, Clone)]
pub enum StrChunk<'a> {
    Plain(Plain<'a>),
    Dict { keys: Keys<'a>, values: Plain<'a> },
}

impl<'a> StrChunk<'a> {
    pub fn new(column: &'static str, array: &'a ArrayRef) -> Result<Self> {
        if let Some(plain) = Plain::new(array.as_ref()) {
            return Ok(StrChunk::Plain(plain));
        }
        let DataType::Dictionary(key_type, _) = array.data_type() else {
            return Err(type_error(column, array.data_type(), STRING_TYPES));
        };
        let dict = array.as_any_dictionary();
        let Some(values) = Plain::new(dict.values().as_ref()) else {
            return Err(type_error(column, array.data_type(), STRING_TYPES));
        };
        if **key_type == DataType::Int32 && !dict.values().is_empty() {
            let keys = array.as_dictionary::<Int32Type>().keys();
            return Ok(StrChunk::Dict {
                keys: Keys::I32(keys),
                values,
            });
        }
        // `normalized_keys` asserts a non-empty dictionary; an empty one
        // means every key is null.
        let keys = if dict.values().is_empty() {
            vec![usize::MAX; dict.keys().len()]
        } else {
            let mut keys = dict.normalized_keys();
            if let Some(nulls) = dict.keys().logical_nulls() {
                for i in nulls
                    .iter()
                    .enumerate()
                    .filter_map(|(i, v)| (!v).then_some(i))
                {
                    keys[i] = usize::MAX;
                }
            }
            keys
        };
        Ok(StrChunk::Dict {
            keys: Keys::Owned(keys),
            values,
        })
    }

    #[inline]
    pub fn value(&self, i: usize) -> Option<&'a str> {
        match self {
            StrChunk::Plain(a) => a.value(i),
            StrChunk::Dict { keys, values } => match keys.get(i) {
                usize::MAX => None,
                k => values.value(k),
            },
        }
    }

    #[inline]
    pub fn byte_len(&self, i: usize) -> Option<usize> {
        match self {
            StrChunk::Plain(a) => a.byte_len(i),
            StrChunk::Dict { keys, values } => match keys.get(i) {
                usize::MAX => None,
                k => values.byte_len(k),
            },
        }
    }

    pub fn len(&self) -> usize {
        match self {
            StrChunk::Plain(a) => a.len(),
            StrChunk::Dict { keys, .. } => keys.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The end of the run of rows from `i` that hold `i`'s value by the same
    /// dictionary key; `i + 1` when not dictionary encoded.
    pub fn key_run_end(&self, i: usize) -> usize {
        match self {
            StrChunk::Dict { keys, .. } => keys.run_end(i),
            StrChunk::Plain(_) => i + 1,
        }
    }

    /// Dictionary key of row `i`, when this chunk is dictionary encoded.
    #[inline]
    pub fn key(&self, i: usize) -> Option<usize> {
        match self {
            StrChunk::Dict { keys, .. } => Some(keys.get(i)),
            _ => None,
        }
    }
}

pub const STRING_TYPES: &str = "utf8, large_utf8, utf8_view or a dictionary of them";

fn type_error(column: &'static str, found: &DataType, expected: &'static str) -> CoreError {
    CoreError::ColumnType {
        column,
        found: found.to_string(),
        expected,
    }
}

/// `a == b` for the short strings compared on every row (ids, tool names):
/// the lengths, then eight bytes at a time inline, where the call to
/// `memcmp` cost more than the compare itself.
#[inline]
pub fn same_str(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let n = a.len();
    if n != b.len() {
        return false;
    }
    if n < 8 {
        return a.iter().zip(b).all(|(x, y)| x == y);
    }
    let word = |s: &[u8], i: usize| u64::from_le_bytes(s[i..i + 8].try_into().expect("8 bytes"));
    // Whole words, then the last eight bytes (overlapping the words when n % 8 != 0).
    (0..n / 8).all(|k| word(a, 8 * k) == word(b, 8 * k)) && word(a, n - 8) == word(b, n - 8)
}

/// `a <= b` in byte order, eight bytes at a time inline (asked once per
/// message of every session, where the call to `memcmp` dominated).
#[inline]
pub fn str_le(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let n = a.len().min(b.len());
    let word = |s: &[u8], i: usize| u64::from_be_bytes(s[i..i + 8].try_into().expect("8 bytes"));
    let mut i = 0;
    while i + 8 <= n {
        let (x, y) = (word(a, i), word(b, i));
        if x != y {
            return x < y;
        }
        i += 8;
    }
    match a[i..n].iter().zip(&b[i..n]).find(|(x, y)| x != y) {
        Some((x, y)) => x < y,
        None => a.len() <= b.len(),
    }
}

/// A string column over all chunks.
#[derive(Debug, Clone)]
pub struct StrCol<'a> {
    pub name: &'static str,
    chunks: Vec<StrChunk<'a>>,
    chunking: Chunking,
}

impl<'a> StrCol<'a> {
    pub fn new(name: &'static str, arrays: &'a [ArrayRef]) -> Result<Self> {
        let chunks = arrays
            .iter()
            .map(|a| StrChunk::new(name, a))
            .collect::<Result<Vec<_>>>()?;
        let chunking = Chunking::new(chunks.iter().map(StrChunk::len));
        Ok(StrCol {
            name,
            chunks,
            chunking,
        })
    }

    #[inline]
    pub fn get(&self, row: usize) -> Option<&'a str> {
        let (c, i) = self.chunking.locate(row);
        self.chunks[c].value(i)
    }

    /// `get(row)`'s length in bytes, without making the string.
    #[inline]
    pub fn byte_len(&self, row: usize) -> Option<usize> {
        let (c, i) = self.chunking.locate(row);
        self.chunks[c].byte_len(i)
    }

    /// The chunk holding every row of `rows` and their range in it, or
    /// `None` when they span chunks.
    pub fn chunk_of(&self, rows: Range<usize>) -> Option<(&StrChunk<'a>, Range<usize>)> {
        let (c, i) = self.locate(rows.start);
        let end = i + rows.len();
        (end <= self.chunks[c].len()).then(|| (&self.chunks[c], i..end))
    }

    /// Every value of `rows` is ASCII (`false` when that is not known: a
    /// view chunk). A dictionary chunk: its whole dictionary.
    pub fn all_ascii(&self, rows: Range<usize>) -> bool {
        self.bytes_behind(rows)
            .all(|bytes| bytes.is_some_and(|b| b.is_ascii()))
    }

    /// Call `f(rows, value)` once per run of consecutive rows of `rows` that
    /// hold the same value (a null is a run of one), in order. The run is
    /// found by a tight loop over the chunk, so the per-row cost is one
    /// compare; a run that crosses a chunk boundary is reported in two parts.
    #[inline]
    pub fn runs_in<E>(
        &self,
        rows: std::ops::Range<usize>,
        mut f: impl FnMut(std::ops::Range<usize>, Option<&'a str>) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        let mut row = rows.start;
        while row < rows.end {
            let (c, first) = self.chunking.locate(row);
            let chunk = &self.chunks[c];
            let end = first + (chunk.len() - first).min(rows.end - row);
            let base = row - first;
            macro_rules! runs {
                ($a:expr) => {{
                    let mut i = first;
                    while i < end {
                        if $a.is_null(i) {
                            f(base + i..base + i + 1, None)?;
                            i += 1;
                            continue;
                        }
                        let v = $a.value(i);
                        let mut j = i + 1;
                        while j < end && !$a.is_null(j) && same_str($a.value(j), v) {
                            j += 1;
                        }
                        f(base + i..base + j, Some(v))?;
                        i = j;
                    }
                }};
            }
            match chunk {
                StrChunk::Plain(Plain::Utf8(a)) => runs!(a),
                StrChunk::Plain(Plain::Large(a)) => runs!(a),
                StrChunk::Plain(Plain::View(a)) => runs!(a),
                StrChunk::Dict { .. } => {
                    let mut i = first;
                    while i < end {
                        let v = chunk.value(i);
                        let mut j = chunk.key_run_end(i).min(end);
                        // One value may sit under two keys: compare the text too.
                        while j < end && v.is_some() && chunk.value(j) == v {
                            j = chunk.key_run_end(j).min(end);
                        }
                        f(base + i..base + j, v)?;
                        i = j;
                    }
                }
            }
            row = base + end;
        }
        Ok(())
    }

    /// Which rows hold one of `names`, decided once per dictionary value:
    /// a scan then tests a row by its key, with no string read.
    pub fn members<'s>(&'s self, names: &'s [String]) -> Members<'s, 'a> {
        let per_key: Vec<Vec<bool>> = self
            .chunks
            .iter()
            .map(|chunk| match chunk {
                StrChunk::Dict { values, .. } => (0..values.len())
                    .map(|k| values.value(k).is_some_and(|v| contains(names, v)))
                    .collect(),
                StrChunk::Plain(_) => Vec::new(),
            })
            .collect();
        // No dictionary value a member and no plain chunk: no row can be.
        let possible = self.chunks.iter().zip(&per_key).any(|(chunk, keys)| {
            matches!(chunk, StrChunk::Plain(_)) || keys.iter().any(|&member| member)
        });
        Members {
            column: self,
            names,
            per_key,
            possible,
        }
    }

    /// Row `row`'s chunk and its place in it.
    #[inline]
    pub fn locate(&self, row: usize) -> (usize, usize) {
        self.chunking.locate(row)
    }

    /// The chunk `c` (numbered as `locate` numbers it).
    #[inline]
    pub fn chunk(&self, c: usize) -> &StrChunk<'a> {
        &self.chunks[c]
    }

    /// Whether a value among `rows` may hold `needle`, by one search over
    /// the bytes behind them per chunk (a dictionary chunk: its whole
    /// dictionary). `false` is exact: no value holds it. `true` only says
    /// "look row by row": a hit may straddle two values or lie in a null
    /// slot, and a view chunk is not searched at all.
    pub fn may_hold(&self, rows: Range<usize>, needle: &Finder<'_>) -> bool {
        self.bytes_behind(rows)
            .any(|bytes| bytes.is_none_or(|b| needle.find(b).is_some()))
    }

    /// Per chunk that `rows` touch, the bytes behind its rows (a dictionary
    /// chunk: its whole dictionary; `None`: not known, a view chunk). None
    /// for no rows.
    fn bytes_behind(&self, rows: Range<usize>) -> impl Iterator<Item = Option<&'a [u8]>> + '_ {
        let chunks = match rows.is_empty() {
            true => 0..0,
            false => self.locate(rows.start).0..self.locate(rows.end - 1).0 + 1,
        };
        chunks.map(move |c| {
            let start = self.chunking.chunk_start(c);
            let local = rows.start.max(start) - start
                ..rows.end.min(self.chunking.chunk_start(c + 1)) - start;
            match &self.chunks[c] {
                StrChunk::Plain(plain) => plain.bytes_of(local),
                StrChunk::Dict { values, .. } => values.bytes_of(0..values.len()),
            }
        })
    }

    pub fn chunks(&self) -> impl Iterator<Item = (usize, &StrChunk<'a>)> {
        self.chunks
            .iter()
            .enumerate()
            .map(|(c, chunk)| (self.chunking.chunk_start(c), chunk))
    }

    pub fn rows(&self) -> usize {
        self.chunking.rows()
    }
}

/// `names` holds `value`.
#[inline]
fn contains(names: &[String], value: &str) -> bool {
    names.iter().any(|n| same_str(n, value))
}

/// Rows of a string column whose value is one of a few names (`StrCol::members`).
pub struct Members<'s, 'a> {
    column: &'s StrCol<'a>,
    names: &'s [String],
    /// Per chunk: whether each dictionary value is a member (empty when plain).
    per_key: Vec<Vec<bool>>,
    /// Some row may be a member (else no row is read at all).
    possible: bool,
}

impl Members<'_, '_> {
    #[inline]
    pub fn contains(&self, row: usize) -> bool {
        if !self.possible || self.names.is_empty() {
            return false;
        }
        let (c, i) = self.column.chunking.locate(row);
        match &self.column.chunks[c] {
            StrChunk::Dict { keys, .. } => self.per_key[c].get(keys.get(i)).copied() == Some(true),
            StrChunk::Plain(plain) => plain.value(i).is_some_and(|v| contains(self.names, v)),
        }
    }
}

/// Map int32 dictionary keys of a dictionary of at most 16 values through
/// `table` (the dictionary's codes, `NULL_CODE` past them) into `out`, 32
/// keys per step with AVX2, until a key outside 0..16 (negative or past the
/// values); returns how many keys were mapped (none on a CPU without AVX2).
fn codes_by_vector(keys: &[i32], table: &[u8; 256], out: &mut Vec<u8>) -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        // Only the first 16 entries are read: the caller's dictionary has
        // at most 16 values, so every key past them reads NULL_CODE.
        debug_assert!(table[16..].iter().all(|&c| c == NULL_CODE));
        if std::is_x86_feature_detected!("avx2") {
            let lut: [u8; 16] = table[..16].try_into().expect("16 entries");
            // SAFETY: the CPU supports AVX2 (checked just above).
            return unsafe { codes_avx2(keys, &lut, out) };
        }
    }
    let _ = (keys, table, out);
    0
}

/// SAFETY (callers): the CPU supports AVX2 (`is_x86_feature_detected!`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn codes_avx2(keys: &[i32], lut: &[u8; 16], out: &mut Vec<u8>) -> usize {
    use std::arch::x86_64::*;
    let table = _mm256_broadcastsi128_si256(_mm_loadu_si128(lut.as_ptr().cast()));
    let outside = _mm256_set1_epi32(!15);
    // packs interleave the two 128-bit lanes: put the 4-key groups back in order
    let order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    let whole = keys.len() / 32 * 32;
    out.reserve(whole);
    let base = out.len();
    let mut i = 0;
    while i < whole {
        // SAFETY: i + 32 <= keys.len(), so `p` is inside `keys`...
        let p = unsafe { keys.as_ptr().add(i) }.cast::<__m256i>();
        // SAFETY: ...and the four unaligned 8-key loads from it are in bounds.
        let (a, b, c, d) = unsafe {
            (
                _mm256_loadu_si256(p),
                _mm256_loadu_si256(p.add(1)),
                _mm256_loadu_si256(p.add(2)),
                _mm256_loadu_si256(p.add(3)),
            )
        };
        let any = _mm256_or_si256(_mm256_or_si256(a, b), _mm256_or_si256(c, d));
        if _mm256_testz_si256(any, outside) == 0 {
            break; // a key outside 0..16: the scalar path takes over here
        }
        let bytes = _mm256_packus_epi16(_mm256_packus_epi32(a, b), _mm256_packus_epi32(c, d));
        let codes = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(table, bytes), order);
        // SAFETY: `reserve(whole)` above leaves room for base + whole bytes.
        unsafe { _mm256_storeu_si256(out.as_mut_ptr().add(base + i).cast(), codes) };
        i += 32;
    }
    // SAFETY: bytes base..base + i were written above.
    unsafe { out.set_len(base + i) };
    i
}

/// A column of small codes (role, part type, status): int8, or strings mapped
/// through `parse`. Decoded once into one byte per row; `NULL_CODE` is null.
pub const NULL_CODE: u8 = u8::MAX;

pub fn decode_codes(
    name: &'static str,
    arrays: &[ArrayRef],
    parse: impl Fn(&str) -> Option<u8>,
    valid_int: impl Fn(i8) -> Option<u8>,
    what: &'static str,
) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(arrays.iter().map(|a| a.len()).sum());
    let unknown = |value: String, row: usize| CoreError::UnknownValue {
        what,
        value,
        at: crate::error::Location::column(name).row(row),
    };
    for array in arrays {
        let base = out.len();
        if let DataType::Int8 = array.data_type() {
            let ints: &Int8Array = array.as_primitive::<Int8Type>();
            for i in 0..ints.len() {
                if ints.is_null(i) {
                    out.push(NULL_CODE);
                } else {
                    let v = ints.value(i);
                    out.push(valid_int(v).ok_or_else(|| unknown(v.to_string(), base + i))?);
                }
            }
            continue;
        }
        if let DataType::Dictionary(_, _) = array.data_type() {
            let dict = array.as_any_dictionary();
            let values = StrChunk::new(name, dict.values())
                .map_err(|_| type_error(name, array.data_type(), "int8 codes or a string type"))?;
            // Decode each dictionary value once into a lookup table (UNKNOWN:
            // not a known value), map the keys straight from the key buffer,
            // then look for nulls and unknowns only where they can be.
            const UNKNOWN: u8 = NULL_CODE - 1;
            let lut: Vec<u8> = (0..values.len())
                .map(|k| {
                    values
                        .value(k)
                        .map_or(NULL_CODE, |v| parse(v).unwrap_or(UNKNOWN))
                })
                .collect();
            let code = |k: usize| lut.get(k).copied().unwrap_or(NULL_CODE);
            // A code column's dictionary is a handful of values: a fixed
            // 256-entry table indexed by the key clamped to 255 needs no
            // bounds check per row (any key past the values reads NULL_CODE).
            let mut small = [NULL_CODE; 256];
            if lut.len() < 256 {
                small[..lut.len()].copy_from_slice(&lut);
            }
            macro_rules! keys {
                ($t:ty) => {
                    keys!($t, |_: &[_], _: &mut Vec<u8>| 0)
                };
                ($t:ty, $vector:expr) => {{
                    let keys = dict.keys().as_primitive::<$t>().values();
                    let done: usize = ($vector)(&keys[..], &mut out);
                    let keys = &keys[done..];
                    if lut.len() < 256 {
                        out.extend(keys.iter().map(|&k| {
                            // Negative keys wrap to huge values and clamp too.
                            small[(k as i64 as u64).min(255) as usize]
                        }))
                    } else {
                        out.extend(keys.iter().map(|&k| code(k as usize)))
                    }
                }};
            }
            use arrow_array::types::{Int16Type, Int32Type, UInt16Type, UInt32Type, UInt8Type};
            match dict.keys().data_type() {
                DataType::Int8 => keys!(Int8Type),
                DataType::Int16 => keys!(Int16Type),
                // int32 keys of a small dictionary: 32 rows per step.
                DataType::Int32 => keys!(Int32Type, |k: &[i32], o: &mut Vec<u8>| {
                    match lut.len() <= 16 {
                        true => codes_by_vector(k, &small, o),
                        false => 0,
                    }
                }),
                DataType::UInt8 => keys!(UInt8Type),
                DataType::UInt16 => keys!(UInt16Type),
                DataType::UInt32 => keys!(UInt32Type),
                _ => out.extend(dict.normalized_keys().into_iter().map(code)),
            }
            if let Some(nulls) = dict.keys().logical_nulls() {
                // Null slots found a word of the validity bitmap at a time.
                for i in (!nulls.inner()).set_indices() {
                    out[base + i] = NULL_CODE;
                }
            }
            if lut.contains(&UNKNOWN) {
                if let Some(i) = out[base..].iter().position(|&c| c == UNKNOWN) {
                    let k = dict.normalized_keys()[i];
                    return Err(unknown(values.value(k).unwrap_or("").to_owned(), base + i));
                }
            }
            continue;
        }
        let chunk = StrChunk::new(name, array)
            .map_err(|_| type_error(name, array.data_type(), "int8 codes or a string type"))?;
        for i in 0..chunk.len() {
            match chunk.value(i) {
                None => out.push(NULL_CODE),
                Some(s) => out.push(parse(s).ok_or_else(|| unknown(s.to_owned(), base + i))?),
            }
        }
    }
    Ok(out)
}

/// Bool column as one bit-flag per row ORed into `flags` (null = false).
pub fn or_bool_flags(
    name: &'static str,
    arrays: &[ArrayRef],
    flag: u8,
    flags: &mut [u8],
) -> Result<()> {
    let mut row = 0;
    for array in arrays {
        let bools: &BooleanArray = match array.data_type() {
            DataType::Boolean => array.as_boolean(),
            DataType::Null => {
                row += array.len();
                continue;
            }
            other => return Err(type_error(name, other, "bool")),
        };
        // Only set bits matter (most flags are false): walk them, not every row.
        let set = match bools.nulls() {
            Some(valid) => &bools.values().clone() & valid.inner(),
            None => bools.values().clone(),
        };
        for i in set.set_indices() {
            flags[row + i] |= flag;
        }
        row += bools.len();
    }
    Ok(())
}

/// Int64 column: flag rows whose value is set and non-zero (JavaScript truthiness,
/// which is how OpenCode reads `time.compacted`).
pub fn or_nonzero_flags(
    name: &'static str,
    arrays: &[ArrayRef],
    flag: u8,
    flags: &mut [u8],
) -> Result<()> {
    let mut row = 0;
    for array in arrays {
        let ints: &Int64Array = match array.data_type() {
            DataType::Int64 => array.as_primitive::<Int64Type>(),
            DataType::Null => {
                row += array.len();
                continue;
            }
            other => return Err(type_error(name, other, "int64")),
        };
        let dst = &mut flags[row..row + ints.len()];
        let set = |dst: &mut [u8], values: &[i64]| {
            for (f, &v) in dst.iter_mut().zip(values) {
                *f |= flag * u8::from(v != 0);
            }
        };
        match ints.nulls() {
            None => set(dst, ints.values()),
            // 64 rows per validity word: all null (the usual `compacted_at`)
            // skipped, all valid in one vectorised pass, a mix row by row.
            Some(nulls) => {
                let words = nulls.inner().bit_chunks();
                let values = ints.values();
                let last = words.chunk_len() * 64;
                let each = |dst: &mut [u8], values: &[i64], word: u64| match word {
                    0 => {}
                    u64::MAX => set(dst, values),
                    _ => {
                        for (j, (f, &v)) in dst.iter_mut().zip(values).enumerate() {
                            *f |= flag * u8::from(word >> j & 1 == 1 && v != 0);
                        }
                    }
                };
                for (k, word) in words.iter().enumerate() {
                    let at = k * 64..k * 64 + 64;
                    each(&mut dst[at.clone()], &values[at], word);
                }
                each(&mut dst[last..], &values[last..], words.remainder_bits());
            }
        }
        row += ints.len();
    }
    Ok(())
}

/// A counted-once length column (`output_utf16`): one value per row,
/// `NO_LENGTH` where it is null (that row's text is measured instead).
#[derive(Debug, Clone)]
pub enum Lengths<'a> {
    /// One int64 chunk without a negative value (the usual case): read in
    /// place, so a scan allocates and faults in nothing for it.
    InPlace {
        values: &'a [i64],
        nulls: Option<&'a NullBuffer>,
    },
    /// Anything else, copied once.
    Owned(Vec<u64>),
}

impl Lengths<'_> {
    #[inline]
    pub fn get(&self, row: usize) -> u64 {
        match self {
            Lengths::InPlace { values, nulls } => match nulls {
                Some(nulls) if nulls.is_null(row) => NO_LENGTH,
                _ => values[row] as u64,
            },
            Lengths::Owned(values) => values[row],
        }
    }
}

/// `name`'s lengths (see `Lengths`). A negative length is an error naming
/// the row.
pub fn decode_lengths<'a>(
    name: &'static str,
    arrays: &'a [ArrayRef],
    rows: usize,
) -> Result<Lengths<'a>> {
    if let [array] = arrays {
        if let DataType::Int64 = array.data_type() {
            let ints = array.as_primitive::<Int64Type>();
            // No sign bit in any value, null slots included: one vectorised check.
            if ints.values().iter().fold(0, |any, &v| any | v) >= 0 {
                return Ok(Lengths::InPlace {
                    values: ints.values(),
                    nulls: ints.nulls(),
                });
            }
        }
    }
    let mut out = Vec::with_capacity(rows);
    for array in arrays {
        match array.data_type() {
            DataType::Int64 => {
                let ints = array.as_primitive::<Int64Type>();
                // No sign bit in any value, null slots included (the usual
                // case): one vectorised check and copy, then the nulls marked.
                if ints.values().iter().fold(0, |any, &v| any | v) >= 0 {
                    let base = out.len();
                    out.extend(ints.values().iter().map(|&v| v as u64));
                    if let Some(nulls) = ints.nulls() {
                        for i in (!nulls.inner()).set_indices() {
                            out[base + i] = NO_LENGTH;
                        }
                    }
                    continue;
                }
                for i in 0..ints.len() {
                    if ints.is_null(i) {
                        out.push(NO_LENGTH);
                    } else {
                        let v = ints.value(i);
                        if v < 0 {
                            return Err(CoreError::Format {
                                what: format!("{name} of row {} is negative ({v})", out.len()),
                                at: crate::error::Location::column(name).row(out.len()),
                            });
                        }
                        out.push(v as u64);
                    }
                }
            }
            DataType::Null => out.resize(out.len() + array.len(), NO_LENGTH),
            other => return Err(type_error(name, other, "int64")),
        }
    }
    Ok(Lengths::Owned(out))
}

/// `f` of every string of an Arrow string array (any string type or a
/// dictionary of one) as an int64 array; nulls stay null. Rows run in
/// parallel blocks of `block`; a dictionary's distinct values once each.
pub fn map_strings<F>(array: &ArrayRef, block: usize, f: F) -> Result<Int64Array>
where
    F: Fn(&str) -> i64 + Sync,
{
    use rayon::prelude::*;

    let chunk = StrChunk::new("values", array)?;
    let one = |v: Option<&str>| v.map_or(0, &f);
    if rayon::current_thread_index().is_none() {
        // Outside a pool (`parallel::run_small`): on this thread, never
        // rayon's global pool.
        let values: Vec<i64> = (0..chunk.len()).map(|i| one(chunk.value(i))).collect();
        return Ok(Int64Array::new(values.into(), array.logical_nulls()));
    }
    let values: Vec<i64> = match &chunk {
        StrChunk::Dict { keys, values } => {
            let per_key: Vec<i64> = (0..values.len())
                .into_par_iter()
                .map(|k| one(values.value(k)))
                .collect();
            (0..keys.len())
                .map(|i| match keys.get(i) {
                    usize::MAX => 0,
                    k => per_key[k],
                })
                .collect()
        }
        _ => {
            let mut out = vec![0i64; chunk.len()];
            out.par_chunks_mut(block).enumerate().for_each(|(b, dst)| {
                for (j, slot) in dst.iter_mut().enumerate() {
                    *slot = one(chunk.value(b * block + j));
                }
            });
            out
        }
    };
    Ok(Int64Array::new(values.into(), array.logical_nulls()))
}

/// A row of a length column without a value.
pub const NO_LENGTH: u64 = u64::MAX;

/// Strings of a (chunked, any string layout) column at `rows`, as one utf8
/// array; pyarrow's `take` has no kernel for utf8_view.
pub fn take_strings(chunks: &[ArrayRef], rows: &[u64]) -> Result<StringArray> {
    let col = StrCol::new("column", chunks)?;
    let n = col.rows();
    rows.iter()
        .map(|&r| {
            let r = r as usize;
            if r >= n {
                return Err(CoreError::Config(format!(
                    "row {r} is out of range: the column has {n} rows"
                )));
            }
            Ok(col.get(r))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn map_strings_gives_the_same_on_the_calling_thread_as_in_a_pool() {
        let plain: ArrayRef = Arc::new(arrow_array::StringArray::from(vec![
            Some("ab"),
            None,
            Some("é😀"),
        ]));
        let dict: ArrayRef = Arc::new(
            vec![Some("x"), None, Some("yy"), Some("x")]
                .into_iter()
                .collect::<arrow_array::DictionaryArray<arrow_array::types::Int32Type>>(),
        );
        for array in [plain, dict] {
            let len = |s: &str| s.chars().count() as i64;
            let here = map_strings(&array, 2, len).unwrap();
            let pooled = crate::parallel::run(Some(2), || map_strings(&array, 2, len)).unwrap();
            assert_eq!(here, pooled);
            assert_eq!(
                here.null_count(),
                array.logical_nulls().map_or(0, |n| n.null_count())
            );
        }
    }

    #[test]
    fn may_hold_is_exact_when_false_and_searches_only_the_rows_asked() {
        let needle = Finder::new("\"pinned\"");
        let a: ArrayRef = Arc::new(StringArray::from(vec![
            Some(r#"{"a":1}"#),
            Some(r#"{"pinned":true}"#),
            None,
            Some(r#"{"b":2}"#),
        ]));
        let b: ArrayRef = Arc::new(LargeStringArray::from(vec![r#"{"c":"pin"#, r#"ned""#]));
        // A slice (offsets not from zero) and a second chunk.
        let arrays = [a.slice(0, 4), b];
        let col = StrCol::new("part_json", &arrays).unwrap();
        assert!(col.may_hold(0..4, &needle));
        assert!(col.may_hold(1..2, &needle));
        assert!(!col.may_hold(0..1, &needle));
        assert!(!col.may_hold(2..4, &needle));
        assert!(!col.may_hold(3..3, &needle));
        // Chunks are searched apart; within one a hit may straddle two
        // values ("pin" + "ned": a false "maybe", never a missed pin).
        assert!(!col.may_hold(3..5, &needle));
        assert!(!col.may_hold(4..5, &needle) && !col.may_hold(5..6, &needle));
        assert!(col.may_hold(4..6, &needle));
        // A dictionary chunk is judged by its whole dictionary; a view chunk
        // is never searched.
        let dict: ArrayRef = Arc::new(
            vec![Some(r#"{"x":1}"#), None]
                .into_iter()
                .collect::<arrow_array::DictionaryArray<Int32Type>>(),
        );
        let view: ArrayRef = Arc::new(StringViewArray::from(vec![r#"{"x":1}"#]));
        let arrays = [dict, view];
        let col = StrCol::new("part_json", &arrays).unwrap();
        assert!(!col.may_hold(0..2, &needle));
        assert!(col.may_hold(2..3, &needle));
    }

    #[test]
    fn codes_keep_null_keys_at_any_offset() {
        use arrow_array::{DictionaryArray, Int16Array};
        use arrow_buffer::NullBuffer;
        let parse = |v: &str| {
            ["a", "b", "c"]
                .iter()
                .position(|&x| x == v)
                .map(|p| p as u8)
        };
        let values: ArrayRef = Arc::new(StringArray::from(vec!["c", "a", "b"]));
        // Null slots hold keys past the values (9, -1) or a valid one (0).
        let valid = NullBuffer::from(vec![true, false, true, false, true, false, true]);
        let raw = [0, 9, 2, -1, 1, 0, 0];
        let keys32 = Int32Array::new(raw.to_vec().into(), Some(valid.clone()));
        let keys16 = Int16Array::new(raw.map(|k| k as i16).to_vec().into(), Some(valid));
        let want = [2, NULL_CODE, 1, NULL_CODE, 0, NULL_CODE, 2];
        let dicts: [ArrayRef; 2] = [
            Arc::new(DictionaryArray::<Int32Type>::new(keys32, values.clone())),
            Arc::new(DictionaryArray::<arrow_array::types::Int16Type>::new(
                keys16, values,
            )),
        ];
        for dict in dicts {
            for (offset, len) in [(0, 7), (1, 5), (3, 4)] {
                let sliced = dict.slice(offset, len);
                let got = decode_codes("role", &[sliced], parse, |_| None, "role").unwrap();
                assert_eq!(got, want[offset..offset + len], "{offset} {len}");
            }
        }
    }

    #[test]
    fn members_by_dictionary_value_plain_text_and_chunk() {
        use arrow_array::DictionaryArray;
        let names = vec!["skill".to_owned(), "todo".to_owned()];
        let dict = |keys: Vec<Option<i32>>, values: Vec<&str>| -> ArrayRef {
            Arc::new(DictionaryArray::<Int32Type>::new(
                Int32Array::from(keys),
                Arc::new(StringArray::from(values)),
            ))
        };
        // A dictionary holding a member (twice over), a plain chunk, and a
        // dictionary holding none.
        let chunks = vec![
            dict(
                vec![Some(0), Some(1), None, Some(2), Some(3)],
                vec!["read", "skill", "bash", "skill"],
            ),
            Arc::new(StringArray::from(vec![Some("todo"), None, Some("read")])) as ArrayRef,
            dict(vec![Some(0), Some(1)], vec!["read", "bash"]),
        ];
        let column = StrCol::new("tool", &chunks).unwrap();
        let members = column.members(&names);
        let got: Vec<bool> = (0..10).map(|r| members.contains(r)).collect();
        let want = [
            false, true, false, false, true, true, false, false, false, false,
        ];
        assert_eq!(got, want);
        // Without a member anywhere no row is one; nor with no names.
        let none = &chunks[2..];
        let column = StrCol::new("tool", none).unwrap();
        assert!(!(0..2).any(|r| column.members(&names).contains(r)));
        let column = StrCol::new("tool", &chunks).unwrap();
        assert!(!(0..10).any(|r| column.members(&[]).contains(r)));
    }

    #[test]
    fn codes_of_long_int32_keys_match_a_lookup_per_row() {
        use arrow_array::DictionaryArray;
        use arrow_buffer::NullBuffer;
        // Deterministic pseudo-random keys: dictionaries of 3 and of 20
        // values (only the first takes 32 keys per step), nulls over any key.
        let mut state = 7u64;
        let mut next = move || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 33) as i32
        };
        let names = [
            "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q",
            "r", "s", "t",
        ];
        let parse = |v: &str| names.iter().position(|&x| x == v).map(|p| (p * 3) as u8);
        let decode = |array: ArrayRef| decode_codes("role", &[array], parse, |_| None, "role");
        for size in [3usize, 16, 20] {
            for len in [0usize, 31, 32, 33, 64, 100, 257] {
                let keys: Vec<i32> = (0..len).map(|_| next().rem_euclid(size as i32)).collect();
                let valid: Vec<bool> = (0..len).map(|_| next() % 7 != 0).collect();
                let array =
                    Int32Array::new(keys.clone().into(), Some(NullBuffer::from(valid.clone())));
                let values: ArrayRef = Arc::new(StringArray::from(names[..size].to_vec()));
                let dict: ArrayRef = Arc::new(DictionaryArray::<Int32Type>::new(array, values));
                for offset in [0, 1.min(len), 5.min(len)] {
                    let n = len - offset;
                    let got = decode(dict.slice(offset, n)).unwrap();
                    let want: Vec<u8> = (offset..len)
                        .map(|i| match valid[i] {
                            true => (keys[i] * 3) as u8,
                            false => NULL_CODE,
                        })
                        .collect();
                    assert_eq!(got, want, "size {size} len {len} offset {offset}");
                }
            }
        }
        // A dictionary of 256 values and more maps by the per-key table: its
        // first 16 codes must not come from the small table.
        let mut many: Vec<String> = vec!["a".into(), "b".into(), "c".into()];
        many.extend((0..297).map(|i| format!("other{i}")));
        let keys: Vec<i32> = (0..96).map(|i| i % 3).collect();
        let dict = DictionaryArray::<Int32Type>::new(
            Int32Array::from(keys.clone()),
            Arc::new(StringArray::from(many)),
        );
        let got = decode(Arc::new(dict)).unwrap();
        let want: Vec<u8> = keys.iter().map(|&k| (k * 3) as u8).collect();
        assert_eq!(got, want);
        // A key outside the values in the middle of a run of vectors (only
        // an unchecked array can hold one): the scalar path maps it to null.
        let mut keys: Vec<i32> = (0..96).map(|i| i % 3).collect();
        keys[40] = 9;
        keys[70] = -2;
        let values: ArrayRef = Arc::new(StringArray::from(vec!["a", "b", "c"]));
        // SAFETY: out-of-range keys are what this test feeds on purpose; the
        // decode never indexes the values by a key.
        let dict = unsafe {
            DictionaryArray::<Int32Type>::new_unchecked(Int32Array::from(keys.clone()), values)
        };
        let got = decode(Arc::new(dict)).unwrap();
        let want: Vec<u8> = keys
            .iter()
            .map(|&k| {
                if (0..3).contains(&k) {
                    (k * 3) as u8
                } else {
                    NULL_CODE
                }
            })
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn nonzero_flags_ignore_values_under_null_slots_at_any_offset() {
        use arrow_buffer::{NullBuffer, ScalarBuffer};
        // The null slot at index 1 holds a non-zero value.
        let values = ScalarBuffer::from(vec![5i64, 7, 0, 3, 0, 2]);
        let nulls = NullBuffer::from(vec![true, false, true, true, false, true]);
        let array = Int64Array::new(values, Some(nulls));
        for (offset, len) in [(0, 6), (1, 4), (3, 3)] {
            let sliced: ArrayRef = Arc::new(array.slice(offset, len));
            let mut flags = vec![0b10u8; len];
            or_nonzero_flags("compacted_at", &[sliced], 1, &mut flags).unwrap();
            let want: Vec<u8> = (offset..offset + len)
                .map(|i| 0b10 | u8::from(array.is_valid(i) && array.value(i) != 0))
                .collect();
            assert_eq!(flags, want, "{offset} {len}");
        }
        // Longer: whole validity words all null, all valid and mixed.
        let n = 400;
        let values: Vec<i64> = (0..n).map(|i| (i % 3) as i64).collect();
        let valid: Vec<bool> = (0..n)
            .map(|i| i >= 128 && (i < 256 || i % 5 != 0))
            .collect();
        let array = Int64Array::new(values.into(), Some(NullBuffer::from(valid)));
        for (offset, len) in [(0, n), (3, 300), (64, 336), (130, 70)] {
            let sliced: ArrayRef = Arc::new(array.slice(offset, len));
            let mut flags = vec![0u8; len];
            or_nonzero_flags("compacted_at", &[sliced], 4, &mut flags).unwrap();
            let want: Vec<u8> = (offset..offset + len)
                .map(|i| 4 * u8::from(array.is_valid(i) && array.value(i) != 0))
                .collect();
            assert_eq!(flags, want, "{offset} {len}");
        }
    }

    #[test]
    fn lengths_keep_nulls_at_any_offset_and_refuse_negatives() {
        let array = Int64Array::from(vec![Some(7), None, Some(0), None, Some(5), Some(9)]);
        for (offset, len) in [(0, 6), (1, 4), (3, 3)] {
            let sliced: ArrayRef = Arc::new(array.slice(offset, len));
            let got = decode_lengths("output_utf16", std::slice::from_ref(&sliced), len).unwrap();
            assert!(matches!(got, Lengths::InPlace { .. }));
            let got: Vec<u64> = (0..len).map(|i| got.get(i)).collect();
            let want: Vec<u64> = (offset..offset + len)
                .map(|i| match array.is_null(i) {
                    true => NO_LENGTH,
                    false => array.value(i) as u64,
                })
                .collect();
            assert_eq!(got, want);
        }
        // A negative value is an error naming its row, a null over one is not.
        let negative: ArrayRef = Arc::new(Int64Array::from(vec![Some(1), Some(-4)]));
        let err = decode_lengths("output_utf16", &[negative], 2).unwrap_err();
        assert!(err.to_string().contains("row 1 is negative (-4)"), "{err}");
        let hidden = Int64Array::new(vec![1, -4].into(), Some(vec![true, false].into()));
        let hidden = [Arc::new(hidden) as ArrayRef];
        let got = decode_lengths("output_utf16", &hidden, 2).unwrap();
        assert_eq!((got.get(0), got.get(1)), (1, NO_LENGTH));
        // Two chunks are copied into one.
        let chunks: [ArrayRef; 2] = [
            Arc::new(Int64Array::from(vec![Some(3), None])),
            Arc::new(Int64Array::from(vec![None, Some(4)])),
        ];
        let got = decode_lengths("output_utf16", &chunks, 4).unwrap();
        assert!(matches!(got, Lengths::Owned(_)));
        let got: Vec<u64> = (0..4).map(|i| got.get(i)).collect();
        assert_eq!(got, vec![3, NO_LENGTH, NO_LENGTH, 4]);
    }

    #[test]
    fn short_strings_compare_as_strings_at_every_length() {
        let ids: Vec<String> = (0..40)
            .flat_map(|n| {
                let base = "m".repeat(n);
                let mut changed: Vec<String> = (0..n)
                    .map(|i| {
                        let mut b = base.clone().into_bytes();
                        b[i] = b'x';
                        String::from_utf8(b).unwrap()
                    })
                    .collect();
                changed.push(base);
                changed
            })
            .collect();
        for a in &ids {
            for b in &ids {
                assert_eq!(same_str(a, b), a == b, "{a:?} {b:?}");
                assert_eq!(str_le(a, b), a <= b, "{a:?} {b:?}");
            }
        }
        // Prefixes, and bytes above 0x7f (unsigned order).
        for (a, b) in [
            ("msg_0001", "msg_00010"),
            ("", "a"),
            ("é", "z"),
            ("abcdefgh1", "abcdefgh"),
        ] {
            assert_eq!(str_le(a, b), a <= b, "{a:?} {b:?}");
            assert_eq!(str_le(b, a), b <= a, "{b:?} {a:?}");
        }
    }
}
