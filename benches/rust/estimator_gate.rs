//! Speed gate for a richer byte-level estimator (issue 16 part 2,
//! docs/estimator-experiments.md): the bigram sum alone against the bigram
//! plus a signed i16 correction table indexed by a multiplicative hash of the
//! last three bytes, at 2^16 and 2^18 slots, one core.
//!
//! `cargo bench --bench estimator_gate` times the main candidates with
//! criterion (wall time); `CTXCOMPACT_GATE_CPU=ROUNDS` times every loop tried
//! by this thread's CPU time instead (best of ROUNDS; on a shared machine the
//! wall time counts other processes), as in docs/estimator-experiments.md.
//! `CTXCOMPACT_GATE_TEXT=FILE` reads the texts from FILE (NUL-separated, e.g.
//! the estimator corpus), else this repository's text in ~700-byte messages.
//! `CTXCOMPACT_GATE_ONLY=a,b` times only the loops whose names contain a or b
//! (`estimate/` for the library's fused estimate against its two passes).
//! The tables hold random weights: the speed depends on the bytes read, not on
//! the weights. Nothing here is used by the library.

use criterion::{black_box, criterion_group, Criterion, Throughput};
use ctxcompact::bigram::Tail;

const HASH: u32 = 0x9E37_79B1;

fn texts() -> Vec<Vec<u8>> {
    if let Ok(path) = std::env::var("CTXCOMPACT_GATE_TEXT") {
        let raw = std::fs::read(path).expect("CTXCOMPACT_GATE_TEXT");
        return raw.split(|&b| b == 0).map(<[u8]>::to_vec).collect();
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut text = String::new();
    for dir in ["rust/src", "docs"] {
        let mut files: Vec<_> = std::fs::read_dir(root.join(dir))
            .unwrap()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_file())
            .collect();
        files.sort();
        for file in files {
            text += &std::fs::read_to_string(file).unwrap_or_default();
        }
    }
    let mut messages = Vec::new();
    let mut current = String::new();
    for line in text.split_inclusive('\n') {
        current.push_str(line);
        if current.len() >= 700 {
            messages.push(std::mem::take(&mut current).into_bytes());
        }
    }
    let total: usize = messages.iter().map(Vec::len).sum();
    let repeat = 20_000_000 / total + 1;
    (0..repeat).flat_map(|_| messages.clone()).collect()
}

fn random_u16(n: usize, seed: u64) -> Vec<u16> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s as u16
        })
        .collect()
}

/// Today's pair sum (rust/src/bigram.rs): four sums side by side.
fn bigram(by_pair: &[u16; 65536], bytes: &[u8]) -> u64 {
    if bytes.len() < 2 {
        return 0;
    }
    let mut sums = [0u64; 4];
    let n = bytes.len() - 1;
    let mut at = 0;
    while at + 4 <= n {
        for (j, sum) in sums.iter_mut().enumerate() {
            let i = at + j;
            *sum += u64::from(by_pair[usize::from(u16::from_le_bytes([bytes[i], bytes[i + 1]]))]);
        }
        at += 4;
    }
    let rest: u64 = bytes[at..]
        .windows(2)
        .map(|p| u64::from(by_pair[usize::from(u16::from_le_bytes([p[0], p[1]]))]))
        .sum();
    sums.iter().sum::<u64>() + rest
}

#[inline(always)]
fn slot<const BITS: u32>(key: u32) -> usize {
    (key.wrapping_mul(HASH) >> (32 - BITS)) as usize
}

/// Bigram plus hashed trigram, one u32 load per byte: bytes i-2, i-1, i, i+1
/// (little-endian); the pair is bits 8..24, the trigram key bits 0..24.
fn bi_tri_u32<const BITS: u32>(by_pair: &[u16; 65536], tri: &[i16], bytes: &[u8]) -> i64 {
    let tri = &tri[..1 << BITS];
    if bytes.len() < 3 {
        return bigram(by_pair, bytes) as i64;
    }
    let mut base = u64::from(by_pair[usize::from(u16::from_le_bytes([bytes[0], bytes[1]]))]);
    let mut corr = 0i64;
    let mut b4 = [0u64; 4];
    let mut c4 = [0i64; 4];
    // position i (2..n) reads bytes[i-2..i+2]: whole u32 loads while i + 2 <= n
    let n = bytes.len();
    let mut i = 2;
    while i + 4 + 1 < n {
        for j in 0..4 {
            let at = i + j - 2;
            let x = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
            b4[j] += u64::from(by_pair[((x >> 8) & 0xFFFF) as usize]);
            c4[j] += i64::from(tri[slot::<BITS>(x & 0xFF_FFFF)]);
        }
        i += 4;
    }
    while i < n {
        let x = u32::from(bytes[i - 2]) | u32::from(bytes[i - 1]) << 8 | u32::from(bytes[i]) << 16;
        base += u64::from(by_pair[(x >> 8) as usize]);
        corr += i64::from(tri[slot::<BITS>(x)]);
        i += 1;
    }
    (base + b4.iter().sum::<u64>()) as i64 + corr + c4.iter().sum::<i64>()
}

/// As `bi_tri_u32`, one u64 load per six positions.
fn bi_tri_u64<const BITS: u32>(by_pair: &[u16; 65536], tri: &[i16], bytes: &[u8]) -> i64 {
    let tri = &tri[..1 << BITS];
    if bytes.len() < 3 {
        return bigram(by_pair, bytes) as i64;
    }
    let mut base = u64::from(by_pair[usize::from(u16::from_le_bytes([bytes[0], bytes[1]]))]);
    let mut corr = 0i64;
    let mut b6 = [0u64; 6];
    let mut c6 = [0i64; 6];
    let n = bytes.len();
    let mut i = 2;
    // positions i..i+6 read bytes[i-2..i+6]
    while i + 6 <= n {
        let x = u64::from_le_bytes(bytes[i - 2..i + 6].try_into().unwrap());
        for j in 0..6 {
            let k = (x >> (8 * j)) as u32;
            b6[j] += u64::from(by_pair[((k >> 8) & 0xFFFF) as usize]);
            c6[j] += i64::from(tri[slot::<BITS>(k & 0xFF_FFFF)]);
        }
        i += 6;
    }
    while i < n {
        let x = u32::from(bytes[i - 2]) | u32::from(bytes[i - 1]) << 8 | u32::from(bytes[i]) << 16;
        base += u64::from(by_pair[(x >> 8) as usize]);
        corr += i64::from(tri[slot::<BITS>(x)]);
        i += 1;
    }
    (base + b6.iter().sum::<u64>()) as i64 + corr + c6.iter().sum::<i64>()
}

/// Slot indices of a block computed first (a loop LLVM vectorises), then the
/// loads.
fn bi_tri_block<const BITS: u32, T: Copy + Into<i64>>(
    by_pair: &[u16; 65536],
    tri: &[T],
    bytes: &[u8],
) -> i64 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2 (checked just above).
            return unsafe { bi_tri_block_avx2::<BITS, T>(by_pair, tri, bytes) };
        }
    }
    bi_tri_block_portable::<BITS, T>(by_pair, tri, bytes)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn bi_tri_block_avx2<const BITS: u32, T: Copy + Into<i64>>(
    by_pair: &[u16; 65536],
    tri: &[T],
    bytes: &[u8],
) -> i64 {
    bi_tri_block_portable::<BITS, T>(by_pair, tri, bytes)
}

#[inline(always)]
fn bi_tri_block_portable<const BITS: u32, T: Copy + Into<i64>>(
    by_pair: &[u16; 65536],
    tri: &[T],
    bytes: &[u8],
) -> i64 {
    const BLOCK: usize = 64;
    let tri = &tri[..1 << BITS];
    if bytes.len() < 3 {
        return bigram(by_pair, bytes) as i64;
    }
    let mut base = u64::from(by_pair[usize::from(u16::from_le_bytes([bytes[0], bytes[1]]))]);
    let mut corr = 0i64;
    let n = bytes.len();
    let mut i = 2;
    let mut pairs = [0u16; BLOCK];
    let mut slots = [0u32; BLOCK];
    while i + BLOCK <= n {
        let (a, b, c) = (
            &bytes[i - 2..i - 2 + BLOCK],
            &bytes[i - 1..i - 1 + BLOCK],
            &bytes[i..i + BLOCK],
        );
        for j in 0..BLOCK {
            pairs[j] = u16::from(b[j]) | u16::from(c[j]) << 8;
            let key = u32::from(a[j]) | u32::from(b[j]) << 8 | u32::from(c[j]) << 16;
            slots[j] = key.wrapping_mul(HASH) >> (32 - BITS);
        }
        let mut bs = [0u64; 4];
        let mut cs = [0i64; 4];
        for j in (0..BLOCK).step_by(4) {
            for k in 0..4 {
                bs[k] += u64::from(by_pair[usize::from(pairs[j + k])]);
                cs[k] += tri[slots[j + k] as usize & ((1 << BITS) - 1)].into();
            }
        }
        base += bs.iter().sum::<u64>();
        corr += cs.iter().sum::<i64>();
        i += BLOCK;
    }
    while i < n {
        let x = u32::from(bytes[i - 2]) | u32::from(bytes[i - 1]) << 8 | u32::from(bytes[i]) << 16;
        base += u64::from(by_pair[(x >> 8) as usize]);
        corr += tri[slot::<BITS>(x)].into();
        i += 1;
    }
    base as i64 + corr
}

/// AVX2 gathers: 8 positions at a time, the slot indices computed in vector
/// lanes and both tables read by `vpgatherdd` (32-bit reads at 2-byte steps,
/// so each table has one u16 of padding after its end).
#[cfg(target_arch = "x86_64")]
fn bi_tri_gather<const BITS: u32>(by_pair: &[u16], tri: &[i16], bytes: &[u8]) -> i64 {
    assert!(by_pair.len() > 65536 && tri.len() > 1 << BITS);
    if bytes.len() < 3 || !std::is_x86_feature_detected!("avx2") {
        return bi_tri_u32::<BITS>(by_pair[..65536].try_into().unwrap(), tri, bytes);
    }
    // SAFETY: AVX2 is present; the gathers read at most index 65536 / 2^BITS,
    // inside the padded tables (asserted above).
    unsafe { bi_tri_gather_avx2::<BITS>(by_pair, tri, bytes) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn bi_tri_gather_avx2<const BITS: u32>(by_pair: &[u16], tri: &[i16], bytes: &[u8]) -> i64 {
    use std::arch::x86_64::*;
    let n = bytes.len();
    let mut base = u64::from(by_pair[usize::from(u16::from_le_bytes([bytes[0], bytes[1]]))]);
    let mut corr = 0i64;
    let mut i = 2;
    let hash = _mm256_set1_epi32(HASH as i32);
    let low16 = _mm256_set1_epi32(0xFFFF);
    let shift = _mm_cvtsi32_si128((32 - BITS) as i32);
    let p = bytes.as_ptr();
    let bp = by_pair.as_ptr() as *const i32;
    let tp = tri.as_ptr() as *const i32;
    // 8 lanes, flushed every 64 steps (64 x 65535 fits in u32 lanes)
    while i + 8 <= n {
        let mut bsum = _mm256_setzero_si256();
        let mut csum = _mm256_setzero_si256();
        let mut steps = 0;
        while i + 8 <= n && steps < 64 {
            let a = _mm256_cvtepu8_epi32(_mm_loadl_epi64(p.add(i - 2) as *const __m128i));
            let b = _mm256_cvtepu8_epi32(_mm_loadl_epi64(p.add(i - 1) as *const __m128i));
            let c = _mm256_cvtepu8_epi32(_mm_loadl_epi64(p.add(i) as *const __m128i));
            let pair = _mm256_or_si256(b, _mm256_slli_epi32(c, 8));
            let key = _mm256_or_si256(a, _mm256_slli_epi32(pair, 8));
            let slot = _mm256_srl_epi32(_mm256_mullo_epi32(key, hash), shift);
            let w = _mm256_i32gather_epi32(bp, pair, 2);
            let t = _mm256_i32gather_epi32(tp, slot, 2);
            bsum = _mm256_add_epi32(bsum, _mm256_and_si256(w, low16));
            csum = _mm256_add_epi32(csum, _mm256_srai_epi32(_mm256_slli_epi32(t, 16), 16));
            i += 8;
            steps += 1;
        }
        let mut lanes = [0u32; 8];
        _mm256_storeu_si256(lanes.as_mut_ptr() as *mut __m256i, bsum);
        base += lanes.iter().map(|&x| u64::from(x)).sum::<u64>();
        _mm256_storeu_si256(lanes.as_mut_ptr() as *mut __m256i, csum);
        corr += lanes.iter().map(|&x| i64::from(x as i32)).sum::<i64>();
    }
    while i < n {
        let x = u32::from(bytes[i - 2]) | u32::from(bytes[i - 1]) << 8 | u32::from(bytes[i]) << 16;
        base += u64::from(by_pair[(x >> 8) as usize]);
        corr += i64::from(tri[slot::<BITS>(x)]);
        i += 1;
    }
    base as i64 + corr
}

/// As `bi_tri_block`, with a slot that keeps a byte pair's trigrams together:
/// the high bits hash the pair, the low `LOW` bits the byte before it, so the
/// trigrams of one pair share a cache line (of 32 i16 when LOW is 5).
#[inline(always)]
fn local_slot<const BITS: u32, const LOW: u32>(key: u32) -> u32 {
    let pair = key >> 8;
    let p2 = key & 0xFF;
    (pair.wrapping_mul(HASH) >> (32 - BITS + LOW)) << LOW
        | (p2.wrapping_mul(0x2C1B_3C6D) >> (32 - LOW))
}

fn bi_tri_local<const BITS: u32, const LOW: u32>(
    by_pair: &[u16; 65536],
    tri: &[i16],
    bytes: &[u8],
) -> i64 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2 (checked just above).
            return unsafe { bi_tri_local_avx2::<BITS, LOW>(by_pair, tri, bytes) };
        }
    }
    bi_tri_local_portable::<BITS, LOW>(by_pair, tri, bytes)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn bi_tri_local_avx2<const BITS: u32, const LOW: u32>(
    by_pair: &[u16; 65536],
    tri: &[i16],
    bytes: &[u8],
) -> i64 {
    bi_tri_local_portable::<BITS, LOW>(by_pair, tri, bytes)
}

#[inline(always)]
fn bi_tri_local_portable<const BITS: u32, const LOW: u32>(
    by_pair: &[u16; 65536],
    tri: &[i16],
    bytes: &[u8],
) -> i64 {
    const BLOCK: usize = 64;
    let tri = &tri[..1 << BITS];
    if bytes.len() < 3 {
        return bigram(by_pair, bytes) as i64;
    }
    let mut base = u64::from(by_pair[usize::from(u16::from_le_bytes([bytes[0], bytes[1]]))]);
    let mut corr = 0i64;
    let n = bytes.len();
    let mut i = 2;
    let mut pairs = [0u16; BLOCK];
    let mut slots = [0u32; BLOCK];
    while i + BLOCK <= n {
        let (a, b, c) = (
            &bytes[i - 2..i - 2 + BLOCK],
            &bytes[i - 1..i - 1 + BLOCK],
            &bytes[i..i + BLOCK],
        );
        for j in 0..BLOCK {
            pairs[j] = u16::from(b[j]) | u16::from(c[j]) << 8;
            let key = u32::from(a[j]) | u32::from(b[j]) << 8 | u32::from(c[j]) << 16;
            slots[j] = local_slot::<BITS, LOW>(key);
        }
        let mut bs = [0u64; 4];
        let mut cs = [0i64; 4];
        for j in (0..BLOCK).step_by(4) {
            for k in 0..4 {
                bs[k] += u64::from(by_pair[usize::from(pairs[j + k])]);
                cs[k] += i64::from(tri[slots[j + k] as usize & ((1 << BITS) - 1)]);
            }
        }
        base += bs.iter().sum::<u64>();
        corr += cs.iter().sum::<i64>();
        i += BLOCK;
    }
    while i < n {
        let x = u32::from(bytes[i - 2]) | u32::from(bytes[i - 1]) << 8 | u32::from(bytes[i]) << 16;
        base += u64::from(by_pair[(x >> 8) as usize]);
        corr += i64::from(tri[local_slot::<BITS, LOW>(x) as usize]);
        i += 1;
    }
    base as i64 + corr
}

/// One table of `2^CLS` bigram tables, chosen by a class of the byte two
/// back (`class`, values below 2^CLS): one weight load per byte.
fn class_bigram<const CLS: u32>(table: &[u16], class: &[u8; 256], bytes: &[u8]) -> u64 {
    let table = &table[..1 << (16 + CLS)];
    if bytes.len() < 3 {
        return 0;
    }
    let mut sums = [0u64; 4];
    let n = bytes.len();
    let mut i = 2;
    while i + 4 <= n {
        for (j, sum) in sums.iter_mut().enumerate() {
            let at = i + j;
            let pair = usize::from(u16::from_le_bytes([bytes[at - 1], bytes[at]]));
            let c = usize::from(class[usize::from(bytes[at - 2])]);
            *sum += u64::from(table[(c << 16 | pair) & ((1 << (16 + CLS)) - 1)]);
        }
        i += 4;
    }
    let mut rest = 0;
    while i < n {
        let pair = usize::from(u16::from_le_bytes([bytes[i - 1], bytes[i]]));
        let c = usize::from(class[usize::from(bytes[i - 2])]);
        rest += u64::from(table[(c << 16 | pair) & ((1 << (16 + CLS)) - 1)]);
        i += 1;
    }
    sums.iter().sum::<u64>() + rest
}

/// The full estimate's extra pass today (rust/src/bigram.rs): spaces and
/// tabs inside a run of their own byte.
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

/// `bi_tri_block` plus today's run pass: what a full estimate would cost.
fn bi_tri_full<const BITS: u32, T: Copy + Into<i64>>(
    by_pair: &[u16; 65536],
    tri: &[T],
    bytes: &[u8],
) -> i64 {
    let (s, t) = inside_runs(bytes);
    bi_tri_block::<BITS, T>(by_pair, tri, bytes) - (s * 3000 + t * 2000) as i64
}

/// The bigram sum plus the run pass (today's `units_after`, less its edges).
fn bigram_full(by_pair: &[u16; 65536], bytes: &[u8]) -> i64 {
    let (s, t) = inside_runs(bytes);
    bigram(by_pair, bytes) as i64 - (s * 3000 + t * 2000) as i64
}

/// `bi_tri_full` with the run count folded into the block's index loop.
fn bi_tri_fused<const BITS: u32, T: Copy + Into<i64>>(
    by_pair: &[u16; 65536],
    tri: &[T],
    bytes: &[u8],
) -> i64 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2 (checked just above).
            return unsafe { bi_tri_fused_avx2::<BITS, T>(by_pair, tri, bytes) };
        }
    }
    bi_tri_fused_portable::<BITS, T>(by_pair, tri, bytes)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn bi_tri_fused_avx2<const BITS: u32, T: Copy + Into<i64>>(
    by_pair: &[u16; 65536],
    tri: &[T],
    bytes: &[u8],
) -> i64 {
    bi_tri_fused_portable::<BITS, T>(by_pair, tri, bytes)
}

#[inline(always)]
fn bi_tri_fused_portable<const BITS: u32, T: Copy + Into<i64>>(
    by_pair: &[u16; 65536],
    tri: &[T],
    bytes: &[u8],
) -> i64 {
    const BLOCK: usize = 64;
    let tri = &tri[..1 << BITS];
    if bytes.len() < 3 {
        return bigram(by_pair, bytes) as i64;
    }
    let mut base = u64::from(by_pair[usize::from(u16::from_le_bytes([bytes[0], bytes[1]]))]);
    let mut corr = 0i64;
    let (mut spaces, mut tabs) = (0u64, 0u64);
    let n = bytes.len();
    let mut i = 2;
    let mut pairs = [0u16; BLOCK];
    let mut slots = [0u32; BLOCK];
    while i + BLOCK <= n {
        let a: &[u8; BLOCK] = bytes[i - 2..i - 2 + BLOCK].try_into().unwrap();
        let b: &[u8; BLOCK] = bytes[i - 1..i - 1 + BLOCK].try_into().unwrap();
        let c: &[u8; BLOCK] = bytes[i..i + BLOCK].try_into().unwrap();
        let (mut s, mut t) = (0u32, 0u32);
        for j in 0..BLOCK {
            pairs[j] = u16::from(b[j]) | u16::from(c[j]) << 8;
            let key = u32::from(a[j]) | u32::from(b[j]) << 8 | u32::from(c[j]) << 16;
            slots[j] = key.wrapping_mul(HASH) >> (32 - BITS);
            let run = (a[j] == b[j]) & (b[j] == c[j]);
            s += u32::from(run & (b[j] == b' '));
            t += u32::from(run & (b[j] == b'\t'));
        }
        spaces += u64::from(s);
        tabs += u64::from(t);
        let mut bs = [0u64; 4];
        let mut cs = [0i64; 4];
        for (p4, s4) in pairs.chunks_exact(4).zip(slots.chunks_exact(4)) {
            for k in 0..4 {
                bs[k] += u64::from(by_pair[usize::from(p4[k])]);
                cs[k] += tri[s4[k] as usize & ((1 << BITS) - 1)].into();
            }
        }
        base += bs.iter().sum::<u64>();
        corr += cs.iter().sum::<i64>();
        i += BLOCK;
    }
    while i < n {
        let x = u32::from(bytes[i - 2]) | u32::from(bytes[i - 1]) << 8 | u32::from(bytes[i]) << 16;
        base += u64::from(by_pair[(x >> 8) as usize]);
        corr += tri[slot::<BITS>(x)].into();
        if bytes[i - 2] == bytes[i - 1] && bytes[i - 1] == bytes[i] {
            spaces += u64::from(bytes[i] == b' ');
            tabs += u64::from(bytes[i] == b'\t');
        }
        i += 1;
    }
    base as i64 + corr - (spaces * 3000 + tabs * 2000) as i64
}

/// The bigram sum with the run count folded in: blocks of 64 pairs, the runs
/// of a block counted in u8 lanes (vectorised) next to its pair loads.
fn fused_block<const BLOCK: usize>(by_pair: &[u16; 65536], bytes: &[u8]) -> i64 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2 (checked just above).
            return unsafe { fused_block_avx2::<BLOCK>(by_pair, bytes) };
        }
    }
    fused_block_portable::<BLOCK>(by_pair, bytes)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn fused_block_avx2<const BLOCK: usize>(by_pair: &[u16; 65536], bytes: &[u8]) -> i64 {
    fused_block_portable::<BLOCK>(by_pair, bytes)
}

#[inline(always)]
fn fused_block_portable<const BLOCK: usize>(by_pair: &[u16; 65536], bytes: &[u8]) -> i64 {
    let n = bytes.len();
    let mut sums = [0u64; 4];
    let (mut spaces, mut tabs) = (0u64, 0u64);
    let mut p = 0;
    while p + BLOCK + 2 <= n {
        let w = &bytes[p..p + BLOCK + 2];
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
                *sum +=
                    u64::from(by_pair[usize::from(u16::from_le_bytes([w[j + k], w[j + k + 1]]))]);
            }
        }
        p += BLOCK;
    }
    let mut rest = 0u64;
    while p + 1 < n {
        rest += u64::from(by_pair[usize::from(u16::from_le_bytes([bytes[p], bytes[p + 1]]))]);
        if p + 2 < n && bytes[p] == bytes[p + 1] && bytes[p + 1] == bytes[p + 2] {
            spaces += u64::from(bytes[p + 1] == b' ');
            tabs += u64::from(bytes[p + 1] == b'\t');
        }
        p += 1;
    }
    (sums.iter().sum::<u64>() + rest) as i64 - (spaces * 3000 + tabs * 2000) as i64
}

/// Today's separate run pass, counted in u8 lanes over 64-byte blocks.
fn runs_u8(bytes: &[u8]) -> (u64, u64) {
    #[cfg(target_arch = "x86_64")]
    {
        if bytes.len() >= 64 && std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2 (checked just above).
            return unsafe { runs_u8_avx2(bytes) };
        }
    }
    runs_u8_portable(bytes)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn runs_u8_avx2(bytes: &[u8]) -> (u64, u64) {
    runs_u8_portable(bytes)
}

#[inline(always)]
fn runs_u8_portable(bytes: &[u8]) -> (u64, u64) {
    const BLOCK: usize = 64;
    let n = bytes.len();
    let (mut spaces, mut tabs) = (0u64, 0u64);
    let mut p = 0;
    while p + BLOCK + 2 <= n {
        let w: &[u8; BLOCK + 2] = bytes[p..p + BLOCK + 2].try_into().unwrap();
        let (mut s, mut t) = (0u8, 0u8);
        for j in 0..BLOCK {
            let (a, b, c) = (w[j], w[j + 1], w[j + 2]);
            let run = (a == b) & (b == c);
            s += u8::from(run & (b == b' '));
            t += u8::from(run & (b == b'\t'));
        }
        spaces += u64::from(s);
        tabs += u64::from(t);
        p += BLOCK;
    }
    while p + 2 < n {
        if bytes[p] == bytes[p + 1] && bytes[p + 1] == bytes[p + 2] {
            spaces += u64::from(bytes[p + 1] == b' ');
            tabs += u64::from(bytes[p + 1] == b'\t');
        }
        p += 1;
    }
    (spaces, tabs)
}

fn bigram_runs_u8(by_pair: &[u16; 65536], bytes: &[u8]) -> i64 {
    let (s, t) = runs_u8(bytes);
    bigram(by_pair, bytes) as i64 - (s * 3000 + t * 2000) as i64
}

/// The pair loop with a scalar run check per pair.
fn fused_scalar(by_pair: &[u16; 65536], bytes: &[u8]) -> i64 {
    let n = bytes.len();
    let mut sums = [0u64; 4];
    let mut ins = [0u64; 4];
    let mut p = 0;
    while p + 4 + 2 <= n {
        for k in 0..4 {
            let (a, b, c) = (bytes[p + k], bytes[p + k + 1], bytes[p + k + 2]);
            sums[k] += u64::from(by_pair[usize::from(u16::from_le_bytes([a, b]))]);
            let run = (a == b) & (b == c);
            ins[k] += u64::from(run & (b == b' ')) * 3000 + u64::from(run & (b == b'\t')) * 2000;
        }
        p += 4;
    }
    let mut rest = 0i64;
    while p + 1 < n {
        rest += i64::from(by_pair[usize::from(u16::from_le_bytes([bytes[p], bytes[p + 1]]))]);
        if p + 2 < n && bytes[p] == bytes[p + 1] && bytes[p + 1] == bytes[p + 2] {
            rest -=
                i64::from(bytes[p + 1] == b' ') * 3000 + i64::from(bytes[p + 1] == b'\t') * 2000;
        }
        p += 1;
    }
    sums.iter().sum::<u64>() as i64 - ins.iter().sum::<u64>() as i64 + rest
}

fn bench(c: &mut Criterion) {
    let texts = texts();
    let bytes: usize = texts.iter().map(Vec::len).sum();
    eprintln!("{} texts, {bytes} bytes", texts.len());
    let by_pair: Box<[u16; 65536]> = random_u16(65536, 7).into_boxed_slice().try_into().unwrap();
    let tri: Vec<i16> = random_u16(1 << 18, 11)
        .into_iter()
        .map(|w| w as i16)
        .collect();
    // the variants agree on the sum
    for t in texts.iter().take(2000) {
        let a = bi_tri_u32::<18>(&by_pair, &tri, t);
        assert_eq!(a, bi_tri_u64::<18>(&by_pair, &tri, t));
        assert_eq!(a, bi_tri_block::<18, i16>(&by_pair, &tri, t));
    }
    let mut group = c.benchmark_group("gate");
    group
        .sample_size(10)
        .throughput(Throughput::Bytes(bytes as u64));
    group.bench_function("bigram", |b| {
        b.iter(|| texts.iter().map(|t| bigram(&by_pair, t)).sum::<u64>())
    });
    macro_rules! variant {
        ($name:literal, $f:expr) => {
            group.bench_function($name, |b| {
                b.iter(|| texts.iter().map(|t| $f(black_box(t))).sum::<i64>())
            });
        };
    }
    let tri8: Vec<i8> = tri.iter().map(|&w| w as i8).collect();
    variant!("bigram+runs", |t| bigram_full(&by_pair, t));
    variant!("bi+tri16 i16", |t| bi_tri_fused::<16, i16>(
        &by_pair, &tri, t
    ));
    variant!("bi+tri16 i8", |t| bi_tri_fused::<16, i8>(
        &by_pair, &tri8, t
    ));
    variant!("bi+tri18 i16", |t| bi_tri_fused::<18, i16>(
        &by_pair, &tri, t
    ));
    variant!("bi+tri18 i8", |t| bi_tri_fused::<18, i8>(
        &by_pair, &tri8, t
    ));
    group.finish();
}

/// This thread's time on a CPU in ns (`/proc/thread-self/schedstat`): on a
/// shared machine the wall time also counts the time other processes ran.
fn cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// `CTXCOMPACT_GATE_CPU=ROUNDS`: every variant in turn, ROUNDS times, timed by
/// CPU time; prints the best GB/s of each.
fn cpu_time_gate(rounds: usize) {
    let texts = texts();
    let bytes: usize = texts.iter().map(Vec::len).sum();
    let by_pair: Box<[u16; 65536]> = random_u16(65536, 7).into_boxed_slice().try_into().unwrap();
    let tri: Vec<i16> = random_u16(1 << 18, 11)
        .into_iter()
        .map(|w| w as i16)
        .collect();
    let tri8: Vec<i8> = tri.iter().map(|&w| w as i8).collect();
    let mut pair_pad = by_pair.to_vec();
    pair_pad.push(0);
    let tri_pad = tri.clone();
    let tri16_pad: Vec<i16> = tri[..1 << 16].iter().copied().chain([0]).collect();
    let tri17_pad: Vec<i16> = tri[..1 << 17].iter().copied().chain([0]).collect();
    let mut tri18_pad = tri_pad.clone();
    tri18_pad.push(0);
    for t in texts.iter().take(3000) {
        assert_eq!(
            bi_tri_u32::<16>(&by_pair, &tri, t),
            bi_tri_gather::<16>(&pair_pad, &tri16_pad, t)
        );
        assert_eq!(
            bi_tri_u32::<18>(&by_pair, &tri, t),
            bi_tri_gather::<18>(&pair_pad, &tri18_pad, t)
        );
    }
    let big = random_u16(1 << 19, 5);
    let class_of = |bits: u32| -> [u8; 256] {
        std::array::from_fn(|b| {
            let c: u8 = match b as u8 {
                b'a'..=b'z' => 0,
                b'A'..=b'Z' => 1,
                b' ' => 2,
                b'0'..=b'9' => 3,
                b'\n' => 4,
                0x80.. => 5,
                b'_' | b'-' => 6,
                _ => 7,
            };
            c & ((1 << bits) - 1) as u8
        })
    };
    let (class1, class2, class3) = (class_of(1), class_of(2), class_of(3));
    for t in texts.iter().take(3000) {
        let whole = bi_tri_u32::<16>(&by_pair, &tri, t);
        assert_eq!(whole, bi_tri_block::<16, i16>(&by_pair, &tri, t));
        assert_eq!(
            bi_tri_full::<18, i8>(&by_pair, &tri8, t),
            bi_tri_fused::<18, i8>(&by_pair, &tri8, t)
        );
    }
    // The library's estimate (o200k's table), the fused loop and the two
    // passes it replaced, checked equal.
    let o200k = ctxcompact::bigram::Family::O200k.table();
    for t in &texts {
        assert_eq!(
            o200k.units_after(Tail::NONE, t),
            o200k.units_after_two_pass(Tail::NONE, t)
        );
    }
    type Kernel<'a> = Box<dyn Fn(&[u8]) -> i64 + 'a>;
    let kernels: Vec<(&str, Kernel)> = vec![
        ("bigram", Box::new(|t| bigram(&by_pair, t) as i64)),
        (
            "bi+tri16/u32",
            Box::new(|t| bi_tri_u32::<16>(&by_pair, &tri, t)),
        ),
        (
            "bi+tri18/u32",
            Box::new(|t| bi_tri_u32::<18>(&by_pair, &tri, t)),
        ),
        (
            "bi+tri16/u64",
            Box::new(|t| bi_tri_u64::<16>(&by_pair, &tri, t)),
        ),
        (
            "bi+tri18/u64",
            Box::new(|t| bi_tri_u64::<18>(&by_pair, &tri, t)),
        ),
        (
            "bi+tri16/block",
            Box::new(|t| bi_tri_block::<16, i16>(&by_pair, &tri, t)),
        ),
        (
            "bi+tri17/block",
            Box::new(|t| bi_tri_block::<17, i16>(&by_pair, &tri, t)),
        ),
        (
            "bi+tri18/block",
            Box::new(|t| bi_tri_block::<18, i16>(&by_pair, &tri, t)),
        ),
        (
            "bi+tri16/block/i8",
            Box::new(|t| bi_tri_block::<16, i8>(&by_pair, &tri8, t)),
        ),
        (
            "bi+tri17/block/i8",
            Box::new(|t| bi_tri_block::<17, i8>(&by_pair, &tri8, t)),
        ),
        (
            "bi+tri18/block/i8",
            Box::new(|t| bi_tri_block::<18, i8>(&by_pair, &tri8, t)),
        ),
        (
            "bi+tri16/gather",
            Box::new(|t| bi_tri_gather::<16>(&pair_pad, &tri16_pad, t)),
        ),
        (
            "bi+tri17/gather",
            Box::new(|t| bi_tri_gather::<17>(&pair_pad, &tri17_pad, t)),
        ),
        (
            "bi+tri18/gather",
            Box::new(|t| bi_tri_gather::<18>(&pair_pad, &tri18_pad, t)),
        ),
        (
            "bi+tri16/local5",
            Box::new(|t| bi_tri_local::<16, 5>(&by_pair, &tri, t)),
        ),
        (
            "bi+tri18/local5",
            Box::new(|t| bi_tri_local::<18, 5>(&by_pair, &tri, t)),
        ),
        (
            "bi+tri18/local6",
            Box::new(|t| bi_tri_local::<18, 6>(&by_pair, &tri, t)),
        ),
        (
            "bi+tri18/local7",
            Box::new(|t| bi_tri_local::<18, 7>(&by_pair, &tri, t)),
        ),
        (
            "bi+tri12/block",
            Box::new(|t| bi_tri_block::<12, i16>(&by_pair, &tri, t)),
        ),
        (
            "bi+tri14/block",
            Box::new(|t| bi_tri_block::<14, i16>(&by_pair, &tri, t)),
        ),
        (
            "bi+tri15/block/i8",
            Box::new(|t| bi_tri_block::<15, i8>(&by_pair, &tri8, t)),
        ),
        ("bigram+runs", Box::new(|t| bigram_full(&by_pair, t))),
        ("bigram+runs/u8", Box::new(|t| bigram_runs_u8(&by_pair, t))),
        (
            "fused/block32",
            Box::new(|t| fused_block::<32>(&by_pair, t)),
        ),
        (
            "fused/block64",
            Box::new(|t| fused_block::<64>(&by_pair, t)),
        ),
        (
            "fused/block128",
            Box::new(|t| fused_block::<128>(&by_pair, t)),
        ),
        ("fused/scalar", Box::new(|t| fused_scalar(&by_pair, t))),
        (
            "full tri16 i16",
            Box::new(|t| bi_tri_full::<16, i16>(&by_pair, &tri, t)),
        ),
        (
            "full tri16 i8",
            Box::new(|t| bi_tri_full::<16, i8>(&by_pair, &tri8, t)),
        ),
        (
            "full tri18 i16",
            Box::new(|t| bi_tri_full::<18, i16>(&by_pair, &tri, t)),
        ),
        (
            "fused tri16 i16",
            Box::new(|t| bi_tri_fused::<16, i16>(&by_pair, &tri, t)),
        ),
        (
            "fused tri16 i8",
            Box::new(|t| bi_tri_fused::<16, i8>(&by_pair, &tri8, t)),
        ),
        (
            "fused tri18 i16",
            Box::new(|t| bi_tri_fused::<18, i16>(&by_pair, &tri, t)),
        ),
        (
            "fused tri18 i8",
            Box::new(|t| bi_tri_fused::<18, i8>(&by_pair, &tri8, t)),
        ),
        (
            "cls1-bigram",
            Box::new(|t| class_bigram::<1>(&big, &class1, t) as i64),
        ),
        (
            "cls2-bigram",
            Box::new(|t| class_bigram::<2>(&big, &class2, t) as i64),
        ),
        (
            "cls3-bigram",
            Box::new(|t| class_bigram::<3>(&big, &class3, t) as i64),
        ),
        (
            "estimate/two-pass",
            Box::new(|t| o200k.units_after_two_pass(Tail::NONE, t) as i64),
        ),
        (
            "estimate/fused",
            Box::new(|t| o200k.units_after(Tail::NONE, t) as i64),
        ),
    ];
    for t in texts.iter().take(3000) {
        let old = bigram_full(&by_pair, t);
        assert_eq!(old, bigram_runs_u8(&by_pair, t));
        assert_eq!(old, fused_block::<32>(&by_pair, t));
        assert_eq!(old, fused_block::<64>(&by_pair, t));
        assert_eq!(old, fused_block::<128>(&by_pair, t));
        assert_eq!(old, fused_scalar(&by_pair, t));
    }
    // `CTXCOMPACT_GATE_ONLY=a,b`: only the loops whose name contains a or b
    let only: Option<Vec<String>> = std::env::var("CTXCOMPACT_GATE_ONLY")
        .ok()
        .map(|s| s.split(',').map(str::to_owned).collect());
    let kernels: Vec<(&str, Kernel)> = kernels
        .into_iter()
        .filter(|(name, _)| {
            only.as_ref()
                .is_none_or(|o| o.iter().any(|w| name.contains(w.as_str())))
        })
        .collect();
    let mut best = vec![0f64; kernels.len()];
    // ~400 MB a measurement: the CPU time is read at scheduler-tick precision
    let reps = (400_000_000 / bytes.max(1)).max(1);
    for _ in 0..rounds {
        for (k, (_, f)) in kernels.iter().enumerate() {
            let t0 = cpu_ns();
            let mut sink = 0i64;
            for _ in 0..reps {
                sink = sink.wrapping_add(texts.iter().map(|t| f(black_box(t))).sum::<i64>());
            }
            black_box(sink);
            let gbs = (reps * bytes) as f64 / (cpu_ns() - t0).max(1) as f64;
            best[k] = best[k].max(gbs);
        }
    }
    println!(
        "{} texts, {bytes} bytes, best of {rounds} rounds by CPU time:",
        texts.len()
    );
    for ((name, _), gbs) in kernels.iter().zip(best) {
        println!("{name:16} {gbs:.2} GB/s");
    }
}

criterion_group!(benches, bench);

fn main() {
    if let Some(rounds) = std::env::var("CTXCOMPACT_GATE_CPU")
        .ok()
        .and_then(|r| r.parse().ok())
    {
        cpu_time_gate(rounds);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
