//! Scanning JSON text without a parser, where a hot loop only needs to find
//! where a string ends.

/// Index of the first byte that ends a plain JSON string's fast read: a
/// quote, a backslash or a control character. Eight bytes at a time (the
/// SWAR zero-byte test; its lowest flagged byte is always exact), the tail
/// too when `b` has 8 bytes: its last 8, overlapping bytes already read
/// (they hold no stop byte, so none is flagged and the lowest flag is still
/// exact). Byte by byte, the tail's exit was a mispredicted branch per
/// string of varying length.
#[inline]
pub fn string_stop(b: &[u8]) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGH;
    let stops = |w: u64| {
        zero(w ^ (ONES * u64::from(b'"')))
            | zero(w ^ (ONES * u64::from(b'\\')))
            | (w.wrapping_sub(ONES * 0x20) & !w & HIGH)
    };
    let mut words = b.chunks_exact(8);
    let mut at = 0;
    for w in &mut words {
        let hit = stops(u64::from_le_bytes(w.try_into().expect("8 bytes")));
        if hit != 0 {
            return Some(at + (hit.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    if at == b.len() {
        return None;
    }
    if b.len() >= 8 {
        let last = b.len() - 8;
        let hit = stops(u64::from_le_bytes(b[last..].try_into().expect("8 bytes")));
        return (hit != 0).then(|| last + (hit.trailing_zeros() / 8) as usize);
    }
    words
        .remainder()
        .iter()
        .position(|&c| c == b'"' || c == b'\\' || c < 0x20)
        .map(|p| at + p)
}

/// Why serde_json refused a text, in words: arrays and objects nested past
/// its limit of 128 levels are said to be so (as the Python readers say of
/// text past Python's recursion limit, `ctxcompact._json.TOO_DEEP`).
pub fn json_error(e: &serde_json::Error) -> String {
    let text = e.to_string();
    match text.starts_with("recursion limit exceeded") {
        true => format!(
            "nested too deeply: arrays and objects nest past the parser's limit of 128 levels \
             (at column {})",
            e.column()
        ),
        false => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_stop_finds_the_first_stop_byte() {
        for len in 0..40 {
            for stop in [b'"', b'\\', 0x00, 0x1f] {
                for at in 0..len {
                    let mut b = vec![b'a'; len];
                    b[at] = stop;
                    if at + 1 < len {
                        b[at + 1] = b'"';
                    }
                    assert_eq!(string_stop(&b), Some(at), "{len} {at} {stop}");
                }
            }
            assert_eq!(string_stop(&vec![b'a'; len]), None);
            // bytes just above the stops, and multi-byte UTF-8, are not stops
            let other: Vec<u8> = " !#[]~\x7f\u{e9}".bytes().cycle().take(len).collect();
            assert_eq!(string_stop(&other), None, "{len}");
            // a stop anywhere after them, the tail's too (read again overlapping)
            for at in 0..len {
                let mut b = other.clone();
                b[at] = b'\\';
                assert_eq!(string_stop(&b), Some(at), "{len} {at}");
            }
        }
    }
}
