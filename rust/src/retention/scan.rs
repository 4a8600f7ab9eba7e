//! The regular expressions of python/ctxcompact/tuning/retention.py, each
//! matched as Python's backtracking `re` matches it (the same leftmost match,
//! the same alternative, Python's Unicode classes from `classes`), written
//! out by hand: the lookarounds they use are not in the `regex` crates. Each
//! function names the Python pattern it stands for; the hypothesis test of
//! tests/tuning/test_retention_core.py holds them to Python on random texts.
//!
//! Texts are slices of `char` (positions are code points, as in Python),
//! or, where a function is generic over `C: Ch`, of the bytes of an ASCII
//! text (one byte, one code point): the fast path, the same matches.

use std::borrow::Cow;
use std::sync::OnceLock;

use super::classes::{DIGIT, FOLDS, SPACE, WORD};

/// A code point of a text: a `char`, or a byte of an ASCII text.
pub trait Ch: Copy + Into<char> {
    /// The ASCII character `b`.
    fn ascii(b: u8) -> Self;
}

impl Ch for char {
    fn ascii(b: u8) -> char {
        b as char
    }
}

impl Ch for u8 {
    fn ascii(b: u8) -> u8 {
        b
    }
}

/// The text of code points `s`.
pub fn text<C: Ch>(s: &[C]) -> String {
    s.iter().map(|&c| c.into()).collect()
}

fn within(table: &[(u32, u32)], c: char) -> bool {
    let c = c as u32;
    table
        .binary_search_by(|&(a, b)| {
            if b < c {
                std::cmp::Ordering::Less
            } else if a > c {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        })
        .is_ok()
}

/// Python's `\w`.
#[inline]
pub fn is_word(c: char) -> bool {
    if c.is_ascii() {
        c.is_ascii_alphanumeric() || c == '_'
    } else {
        within(WORD, c)
    }
}

/// Python's `\d`.
#[inline]
pub fn is_digit(c: char) -> bool {
    if c.is_ascii() {
        c.is_ascii_digit()
    } else {
        within(DIGIT, c)
    }
}

/// Python's `\s` (`str.isspace`).
#[inline]
pub fn is_space(c: char) -> bool {
    if c.is_ascii() {
        matches!(c, '\t'..='\r' | '\x1c'..='\x1f' | ' ')
    } else {
        within(SPACE, c)
    }
}

/// `c` matches the ASCII letter `letter` under `re.IGNORECASE`.
fn ci(c: char, letter: char) -> bool {
    c.to_ascii_lowercase() == letter
        || (!c.is_ascii() && FOLDS.iter().any(|&(l, x)| l == letter && x == c))
}

/// `word` (lowercase ASCII) at `at`, case-insensitively.
fn ci_at<C: Ch>(s: &[C], at: usize, word: &str) -> bool {
    let mut i = at;
    for l in word.chars() {
        match s.get(i) {
            Some(&c) if ci(c.into(), l) => i += 1,
            _ => return false,
        }
    }
    true
}

fn at<C: Ch>(s: &[C], i: usize, word: &str) -> bool {
    (i..)
        .zip(word.chars())
        .all(|(k, l)| s.get(k).is_some_and(|&c| c.into() == l))
}

fn run<C: Ch>(s: &[C], from: usize, class: impl Fn(char) -> bool) -> usize {
    s.get(from..).map_or(0, |rest| {
        rest.iter().take_while(|&&c| class(c.into())).count()
    })
}

/// The code point at `i`.
fn get<C: Ch>(s: &[C], i: usize) -> Option<char> {
    s.get(i).map(|&c| c.into())
}

fn word_at<C: Ch>(s: &[C], i: usize) -> bool {
    s.get(i).is_some_and(|&c| is_word(c.into()))
}

/// Python's `str.split()`.
pub fn split(s: &str) -> Vec<&str> {
    s.split(is_space).filter(|w| !w.is_empty()).collect()
}

/// The first `n` characters of Python's `" ".join(s.split())`, the rest of
/// `s` not read.
pub fn squeeze_head(s: &str, n: usize) -> String {
    let mut out = String::new();
    let mut count = 0;
    for (i, w) in s.split(is_space).filter(|w| !w.is_empty()).enumerate() {
        for c in (i > 0).then_some(' ').into_iter().chain(w.chars()) {
            if count == n {
                return out;
            }
            out.push(c);
            count += 1;
        }
    }
    out
}

/// Python's `s.strip()`.
pub fn strip(s: &str) -> &str {
    s.trim_matches(is_space)
}

/// Python's `str.splitlines()` (without the line ends), one line at a time.
pub fn splitlines(s: &str) -> impl Iterator<Item = &str> {
    let mut start = 0;
    let mut chars = s.char_indices().peekable();
    std::iter::from_fn(move || {
        while let Some((i, c)) = chars.next() {
            let end = match c {
                '\r' => match chars.peek() {
                    Some(&(_, '\n')) => {
                        chars.next();
                        i + 2
                    }
                    _ => i + 1,
                },
                '\n' | '\x0b' | '\x0c' | '\x1c' | '\x1d' | '\x1e' => i + 1,
                '\u{85}' | '\u{2028}' | '\u{2029}' => i + c.len_utf8(),
                _ => continue,
            };
            let line = &s[start..i];
            start = end;
            return Some(line);
        }
        if start < s.len() {
            let line = &s[start..];
            start = s.len();
            return Some(line);
        }
        None
    })
}

/// The texts of the elements of the compact JSON array `json` (no spaces
/// between them, as serde_json writes it): split at the commas outside
/// strings and nested values, without reading the values. `None`: not an
/// array so written.
pub fn json_elements(json: &str) -> Option<Vec<&str>> {
    let b = json.as_bytes();
    if b.len() < 2 || b[0] != b'[' || b[b.len() - 1] != b']' {
        return None;
    }
    let (mut out, mut depth, mut start, mut i) = (Vec::new(), 0usize, 1, 1);
    while i < b.len() - 1 {
        match b[i] {
            b'"' => {
                // to the string's closing quote, over its escapes
                i += 1;
                loop {
                    i += memchr::memchr2(b'"', b'\\', b.get(i..)?)?;
                    if b[i] == b'"' {
                        break;
                    }
                    i += 2;
                }
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.checked_sub(1)?,
            b',' if depth == 0 => {
                out.push(json.get(start..i)?);
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    if depth != 0 || i != b.len() - 1 {
        return None;
    }
    if start < i {
        out.push(json.get(start..i)?);
    } else if !out.is_empty() {
        return None;
    }
    Some(out)
}

/// The bytes a line end (`splitlines`') starts with.
const LINE_END_HEAD: [bool; 256] = {
    let mut t = [false; 256];
    let heads = [b'\n', b'\r', 0x0b, 0x0c, 0x1c, 0x1d, 0x1e, 0xc2, 0xe2];
    let mut k = 0;
    while k < heads.len() {
        t[heads[k] as usize] = true;
        k += 1;
    }
    t
};

/// Whether one of the 8 bytes of `x` may be in `LINE_END_HEAD`: one is
/// under 0x20, 0xc2 or 0xe2 (never false for a chunk holding one).
#[inline]
fn may_end_line(x: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGH != 0;
    let under_0x20 = x.wrapping_sub(ONES * 0x20) & !x & HIGH != 0;
    under_0x20 || zero(x ^ (ONES * 0xc2)) || zero(x ^ (ONES * 0xe2))
}

/// The first line of `s` (`splitlines`' lines) `keep` takes: the line
/// ends found in the bytes (no line end is part of another character's
/// UTF-8), "\r\n" one end.
pub fn find_line<'s>(s: &'s str, mut keep: impl FnMut(&'s str) -> bool) -> Option<&'s str> {
    let b = s.as_bytes();
    let (mut start, mut i) = (0, 0);
    while i < b.len() {
        if !LINE_END_HEAD[b[i] as usize] {
            i += 1;
            // 8 bytes at a time while none may start a line end
            while let Some(chunk) = b.get(i..i + 8) {
                if may_end_line(u64::from_le_bytes(chunk.try_into().unwrap())) {
                    break;
                }
                i += 8;
            }
            continue;
        }
        let end = match b[i] {
            b'\r' if b.get(i + 1) == Some(&b'\n') => 2,
            b'\n' | b'\r' | 0x0b | 0x0c | 0x1c | 0x1d | 0x1e => 1,
            0xc2 if b.get(i + 1) == Some(&0x85) => 2,
            0xe2 if b.get(i + 1) == Some(&0x80) && matches!(b.get(i + 2), Some(0xa8 | 0xa9)) => 3,
            _ => {
                i += 1;
                continue;
            }
        };
        let line = &s[start..i];
        if keep(line) {
            return Some(line);
        }
        i += end;
        start = i;
    }
    (start < b.len())
        .then(|| &s[start..])
        .filter(|line| keep(line))
}

/// `_WORD.findall(lowered)`: `[a-z0-9][a-z0-9_'-]{3,}` (the text already lowercased).
pub fn words(lowered: &str, mut each: impl FnMut(&str)) {
    words_until(lowered, |w| {
        each(w);
        true
    });
}

/// `words`, until `each` says stop (false).
pub fn words_until(lowered: &str, mut each: impl FnMut(&str) -> bool) {
    let head = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    word_spans(lowered.as_bytes(), head, |a, b| each(&lowered[a..b]));
}

/// `words_until(&text.to_lowercase(), each)` of a `text` whose characters
/// outside ASCII lower outside it (`words_lower_alone`: every ASCII text),
/// each word lowered as it is found (the rest of the text is not lowered).
pub fn ascii_words_until(text: &str, mut each: impl FnMut(&str) -> bool) {
    debug_assert!(words_lower_alone(text));
    let head = |c: u8| c.is_ascii_alphanumeric();
    let mut word = String::new();
    word_spans(text.as_bytes(), head, |a, b| {
        word.clear();
        word.push_str(&text[a..b]);
        word.make_ascii_lowercase();
        each(&word)
    });
}

/// The characters outside ASCII whose lowercase (`char::to_lowercase`)
/// holds an ASCII character: İ and K (Kelvin sign).
const LOWER_TO_ASCII: [char; 2] = ['\u{130}', '\u{212a}'];

/// Whether `words_until(&text.to_lowercase(), ..)` reads the words
/// `ascii_words_until(text, ..)` reads: no character of `text` outside
/// ASCII lowers to one inside it (the other characters outside ASCII stay
/// outside it, so they end words alike in both).
pub fn words_lower_alone(text: &str) -> bool {
    static MARKS: OnceLock<[memchr::memmem::Finder<'static>; 2]> = OnceLock::new();
    let marks = MARKS.get_or_init(|| {
        LOWER_TO_ASCII.map(|c| {
            memchr::memmem::Finder::new(c.encode_utf8(&mut [0; 4]).as_bytes()).into_owned()
        })
    });
    text.is_ascii() || marks.iter().all(|m| m.find(text.as_bytes()).is_none())
}

/// The spans of `words` in `b` (`head`: a word's first byte), until `each`
/// says stop (false).
fn word_spans(b: &[u8], head: impl Fn(u8) -> bool, mut each: impl FnMut(usize, usize) -> bool) {
    let tail = |c: u8| head(c) || c == b'_' || c == b'\'' || c == b'-';
    let mut i = 0;
    while i < b.len() {
        if head(b[i]) {
            let n = b[i + 1..].iter().take_while(|&&c| tail(c)).count();
            if n >= 3 {
                if !each(i, i + 1 + n) {
                    return;
                }
                i += 1 + n;
                continue;
            }
        }
        i += 1;
    }
}

fn in_path(c: char) -> bool {
    is_word(c) || c == '.' || c == '-'
}

const EXTENSIONS: &[&str] = &[
    "py", "pyi", "js", "jsx", "ts", "tsx", "java", "go", "rs", "c", "cc", "cpp", "h", "hpp", "rb",
    "php", "cs", "kt", "swift", "scala", "md", "rst", "json", "yaml", "yml", "toml", "ini", "cfg",
    "txt", "sh", "sql", "html", "css", "xml",
];

/// `_PATH` matched at `i` (its lookbehind apart): the end of the first
/// match, in Python's order of trying, whose end `accept` takes.
fn path_at<C: Ch>(s: &[C], i: usize, accept: &dyn Fn(usize) -> bool) -> Option<usize> {
    // (?:~|\.{1,2})?/?(?:[\w.-]+/)+[\w.-]*\w\.[A-Za-z0-9]{1,8}(?![\w/])
    let mut heads = [i; 3];
    let n = match get(s, i) {
        Some('~') => {
            heads[0] = i + 1;
            2
        }
        Some('.') if get(s, i + 1) == Some('.') => {
            heads[0] = i + 2;
            heads[1] = i + 1;
            3
        }
        Some('.') => {
            heads[0] = i + 1;
            2
        }
        _ => 1,
    };
    for &p0 in &heads[..n] {
        let slashes: &[usize] = if get(s, p0) == Some('/') {
            &[p0 + 1, p0]
        } else {
            &[p0]
        };
        for &p1 in slashes {
            let mut dirs = Vec::new();
            let mut p = p1;
            loop {
                let r = run(s, p, in_path);
                if r >= 1 && get(s, p + r) == Some('/') {
                    p += r + 1;
                    dirs.push(p);
                } else {
                    break;
                }
            }
            for &q in dirs.iter().rev() {
                let l = run(s, q, in_path);
                for k in (0..=l).rev() {
                    let a = q + k;
                    if !(word_at(s, a) && get(s, a + 1) == Some('.')) {
                        continue;
                    }
                    let t = run(s, a + 2, |c| c.is_ascii_alphanumeric()).min(8);
                    for t in (1..=t).rev() {
                        if accept(a + 2 + t) {
                            return Some(a + 2 + t);
                        }
                    }
                }
            }
        }
    }
    // [\w-]+\.(?:py|...)(?![\w/])
    let l = run(s, i, |c| is_word(c) || c == '-');
    if l >= 1 && get(s, i + l) == Some('.') {
        for ext in EXTENSIONS {
            if at(s, i + l + 1, ext) {
                let e = i + l + 1 + ext.len();
                if accept(e) {
                    return Some(e);
                }
            }
        }
    }
    None
}

#[cfg(test)]
fn path_start<C: Ch>(s: &[C], i: usize) -> bool {
    i == 0 || {
        let c = s[i - 1].into();
        !(in_path(c) || c == '/')
    }
}

fn path_end<C: Ch>(s: &[C], e: usize) -> bool {
    get(s, e).is_none_or(|c| !(is_word(c) || c == '/'))
}

/// What a match of `_PATH` is made of: `[\w.-]`, `/` and `~`.
fn in_path_run(c: char) -> bool {
    in_path(c) || c == '/' || c == '~'
}

/// `_PATH.finditer(s)`: the (start, end) of each match.
///
/// A match is made of `in_path_run` characters, so it lies within one
/// run of them; inside a run, the lookbehind lets a match start only at
/// the run's start or after a `~` (every other character of a run is
/// `[\w./-]`), and a match holds a `/` (its directories) or a `.` (a name
/// with an extension) at or after where it starts. Only those starts are
/// tried; every other start fails alike (`paths_each_start` reads them all).
pub fn paths<C: Ch>(s: &[C]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let accept = |e: usize| path_end(s, e);
    let mut i = 0;
    while i < s.len() {
        if !in_path_run(s[i].into()) {
            i += 1;
            continue;
        }
        // the run's end, and its last `/` or `.`: no match starts after it
        let (mut end, mut last) = (i, None);
        while let Some(c) = get(s, end).filter(|&c| in_path_run(c)) {
            if c == '/' || c == '.' {
                last = Some(end);
            }
            end += 1;
        }
        let Some(last) = last else {
            i = end;
            continue;
        };
        let mut start = i;
        while start <= last {
            let from = match path_at(s, start, &accept) {
                Some(e) => {
                    out.push((start, e));
                    e
                }
                None => start,
            };
            // the next start: after the next `~`
            match (from..end).find(|&k| s[k].into() == '~') {
                Some(k) => start = k + 1,
                None => break,
            }
        }
        i = end;
    }
    out
}

/// `paths` trying every start the lookbehind lets through (the definition
/// `paths` skips by).
#[cfg(test)]
fn paths_each_start<C: Ch>(s: &[C]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let accept = |e: usize| path_end(s, e);
    let mut i = 0;
    while i < s.len() {
        if path_start(s, i) {
            if let Some(e) = path_at(s, i, &accept) {
                out.push((i, e));
                i = e;
                continue;
            }
        }
        i += 1;
    }
    out
}

/// `_PATH.fullmatch(s)`.
pub fn is_path<C: Ch>(s: &[C]) -> bool {
    !s.is_empty() && path_at(s, 0, &|e| e == s.len()).is_some()
}

/// `_PATH.sub(" ", s)`.
pub fn without_paths<C: Ch>(s: &[C]) -> Cow<'_, [C]> {
    cut(s, &paths(s))
}

/// `s` with each of its spans `cuts` (in order, apart) made a space: `s`
/// itself when there are none.
pub fn cut<'s, C: Ch>(s: &'s [C], cuts: &[(usize, usize)]) -> Cow<'s, [C]> {
    if cuts.is_empty() {
        return Cow::Borrowed(s);
    }
    let mut out = Vec::with_capacity(s.len());
    let mut pos = 0;
    for &(a, b) in cuts {
        out.extend_from_slice(&s[pos..a]);
        out.push(C::ascii(b' '));
        pos = b;
    }
    out.extend_from_slice(&s[pos..]);
    Cow::Owned(out)
}

/// `_FENCE.sub("\n", s)`: runs of two backticks or more made a line break.
pub fn without_fences<C: Ch>(s: &[C]) -> Vec<C> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        let n = run(s, i, |c| c == '`');
        if n >= 2 {
            out.push(C::ascii(b'\n'));
            i += n;
        } else {
            out.push(s[i]);
            i += 1;
        }
    }
    out
}

/// `_SPAN.search(s, pos)`: (start, end) of `` `name` `` (the name inside).
pub fn span<C: Ch>(s: &[C], pos: usize) -> Option<(usize, usize)> {
    let mut p = pos;
    while p < s.len() {
        if s[p].into() == '`' {
            let l = run(s, p + 1, |c| c != '`' && c != '\n');
            if l >= 1 && get(s, p + 1 + l) == Some('`') {
                return Some((p, p + l + 2));
            }
        }
        p += 1;
    }
    None
}

/// `_SENTENCE.search(s)`: `[.!?;] +[A-Z]`.
pub fn has_sentence<C: Ch>(s: &[C]) -> bool {
    (0..s.len()).any(|i| {
        matches!(s[i].into(), '.' | '!' | '?' | ';') && {
            let n = run(s, i + 1, |c| c == ' ');
            n >= 1 && get(s, i + 1 + n).is_some_and(|c| c.is_ascii_uppercase())
        }
    })
}

/// `_PROSE_WORD.fullmatch(w)`: `[A-Za-z]+[,;:.!?]?`.
pub fn is_prose_word(w: &str) -> bool {
    let body = match w.chars().last() {
        Some(',' | ';' | ':' | '.' | '!' | '?') => &w[..w.len() - 1],
        _ => w,
    };
    !body.is_empty() && body.bytes().all(|c| c.is_ascii_alphabetic())
}

/// `_IDENT.finditer(s)`: each code name (the group that matched).
pub fn identifiers<C: Ch>(s: &[C], mut each: impl FnMut(&[C])) {
    let upper = |c: char| c.is_ascii_uppercase();
    let lower_digit = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    let alnum = |c: char| c.is_ascii_alphanumeric();
    let ends = |e: usize| !word_at(s, e);
    let mut i = 0;
    while i < s.len() {
        let c: char = s[i].into();
        if !is_word(c) {
            i += 1;
            continue;
        }
        if i > 0 && word_at(s, i - 1) {
            // inside a word: none starts before its end
            i += run(s, i, is_word);
            continue;
        }
        let letter_ = c.is_ascii_alphabetic() || c == '_';
        // [A-Za-z_][A-Za-z0-9]*_[A-Za-z0-9_]+ then \b
        if letter_ {
            let a = i + 1 + run(s, i + 1, alnum);
            if get(s, a) == Some('_') {
                let m = run(s, a + 1, |c| c.is_ascii_alphanumeric() || c == '_');
                if m >= 1 && ends(a + 1 + m) {
                    each(&s[i..a + 1 + m]);
                    i = a + 1 + m;
                    continue;
                }
            }
        }
        // [a-z][a-z0-9]*[A-Z][A-Za-z0-9]* then \b, and [A-Z][a-z0-9]+[A-Z][A-Za-z0-9]*
        if c.is_ascii_lowercase() || c.is_ascii_uppercase() {
            let l = run(s, i + 1, lower_digit);
            let a = i + 1 + l;
            if (c.is_ascii_lowercase() || l >= 1) && get(s, a).is_some_and(upper) {
                let e = a + 1 + run(s, a + 1, alnum);
                if ends(e) {
                    each(&s[i..e]);
                    i = e;
                    continue;
                }
            }
        }
        // [A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+\(
        if letter_ {
            let mut p = i + 1 + run(s, i + 1, is_word);
            let mut parts = 0;
            while get(s, p) == Some('.')
                && get(s, p + 1).is_some_and(|x| x.is_ascii_alphabetic() || x == '_')
            {
                p += 2 + run(s, p + 2, is_word);
                parts += 1;
            }
            if parts >= 1 && get(s, p) == Some('(') {
                each(&s[i..p]);
                i = p + 1;
                continue;
            }
        }
        i += 1;
    }
}

/// The texts each match of `_ERROR_NAME` holds: none of them, no match.
const ERROR_MARKS: [&str; 4] = ["Error", "Exception", "panicked", "Segmentation fault"];

/// Whether `_ERROR_NAME` may match in `s` (it holds one of `ERROR_MARKS`).
pub fn may_name_error(s: &str) -> bool {
    static MARKS: OnceLock<[memchr::memmem::Finder<'static>; 4]> = OnceLock::new();
    let marks = MARKS.get_or_init(|| {
        ERROR_MARKS.map(|m| memchr::memmem::Finder::new(m.as_bytes()).into_owned())
    });
    marks.iter().any(|m| m.find(s.as_bytes()).is_some())
}

/// `_ERROR_NAME.finditer(s)`: `\b([A-Z]\w*(?:Error|Exception)|panicked|Segmentation fault)\b`.
pub fn error_names<C: Ch>(s: &[C], mut each: impl FnMut(&[C])) {
    let mut i = 0;
    while i < s.len() {
        if !(word_at(s, i) && (i == 0 || !word_at(s, i - 1))) {
            i += 1;
            continue;
        }
        let mut end = None;
        if s[i].into().is_ascii_uppercase() {
            let l = run(s, i + 1, is_word);
            let e = i + 1 + l;
            if (l >= 5 && at(s, e - 5, "Error")) || (l >= 9 && at(s, e - 9, "Exception")) {
                end = Some(e);
            }
        }
        if end.is_none() {
            for literal in ["panicked", "Segmentation fault"] {
                let e = i + literal.chars().count();
                if at(s, i, literal) && !word_at(s, e) {
                    end = Some(e);
                    break;
                }
            }
        }
        match end {
            Some(e) => {
                each(&s[i..e]);
                i = e;
            }
            None => i += 1,
        }
    }
}

/// `is_error_line` of a line as text, without making it code points: the
/// match reads the spaces it starts with, then at most 10 code points.
pub fn is_error_line_str(line: &str) -> bool {
    // the words start with e, f or t (no character folds to them): a line
    // starting with another ASCII character that is not a space fails
    if let Some(&b) = line.as_bytes().first() {
        let space = matches!(b, b'\t'..=b'\r' | 0x1c..=0x1f | b' ');
        if b.is_ascii() && !space && !matches!(b | 0x20, b'e' | b'f' | b't') {
            return false;
        }
    }
    let mut head = ['\0'; 10];
    let mut n = 0;
    for c in line.chars().skip_while(|&c| is_space(c)).take(head.len()) {
        head[n] = c;
        n += 1;
    }
    is_error_line(&head[..n])
}

/// `_ERROR_LINE.match(line)`: `^\s*(?:error|fatal|failed|failure|traceback)\b[:\s(]`, ignoring case.
pub fn is_error_line<C: Ch>(s: &[C]) -> bool {
    let k = run(s, 0, is_space);
    ["error", "fatal", "failed", "failure", "traceback"]
        .iter()
        .any(|w| {
            ci_at(s, k, w)
                && s.get(k + w.len()).is_some_and(|&c| {
                    let c = c.into();
                    c == ':' || c == '(' || is_space(c)
                })
        })
}

/// `_PLAN.search(s)`, ignoring case, `^` at each line:
/// `^\s*(?:\d+[.)]|- \[[ x]\]|step \d+)\s+\S|\b(?:plan|next steps?)\b`.
pub fn has_plan<C: Ch>(s: &[C]) -> bool {
    let n = s.len();
    let rest = |p: usize| {
        let w = run(s, p, is_space);
        w >= 1 && p + w < n
    };
    for i in 0..=n {
        if i == 0 || s[i - 1].into() == '\n' {
            let k = i + run(s, i, is_space);
            let d = run(s, k, is_digit);
            if d >= 1 && matches!(get(s, k + d), Some('.' | ')')) && rest(k + d + 1) {
                return true;
            }
            if at(s, k, "- [")
                && get(s, k + 3).is_some_and(|c| c == ' ' || ci(c, 'x'))
                && get(s, k + 4) == Some(']')
                && rest(k + 5)
            {
                return true;
            }
            if ci_at(s, k, "step") && get(s, k + 4) == Some(' ') {
                let d = run(s, k + 5, is_digit);
                if d >= 1 && rest(k + 5 + d) {
                    return true;
                }
            }
        }
        if i < n && word_at(s, i) && (i == 0 || !word_at(s, i - 1)) {
            if ci_at(s, i, "plan") && !word_at(s, i + 4) {
                return true;
            }
            if ci_at(s, i, "next") && get(s, i + 4) == Some(' ') && ci_at(s, i + 5, "step") {
                let e = i + 9;
                if (get(s, e).is_some_and(|c| ci(c, 's')) && !word_at(s, e + 1)) || !word_at(s, e) {
                    return true;
                }
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ASCII texts put together from pieces each pattern reads.
    fn texts() -> Vec<String> {
        let pieces = [
            "src/app/main.py",
            "../lib/x.rs",
            "~/.config/t.toml",
            "./run.sh",
            "a/b/c.d.ts",
            "README.md",
            "x.pyx/",
            "snake_case_x",
            "camelCase",
            "HttpServerError",
            "os.path.join(",
            "`code_name`",
            "`two words here now`",
            "``",
            "ValueError",
            "panicked at",
            "Segmentation fault",
            "MyException",
            "error: bad",
            "Fatal( x",
            "Traceback (x",
            "1. first",
            "- [x] done",
            "Step 3 go",
            "the plan is",
            "next steps",
            "Kelvin",
            "\r\n",
            "\x1c",
            " ",
            "\t",
            "\n",
            ".",
            "`",
            "x",
            "A",
        ];
        let mut out = Vec::new();
        for (i, a) in pieces.iter().enumerate() {
            for (j, b) in pieces.iter().enumerate() {
                let c = pieces[(i * 7 + j * 3) % pieces.len()];
                out.push(format!("{a}{b} {c}\n{b}{a}"));
            }
        }
        out
    }

    #[test]
    fn retention_scans_read_ascii_bytes_as_they_read_chars() {
        for t in texts() {
            let (b, c) = (t.as_bytes(), t.chars().collect::<Vec<char>>());
            assert_eq!(paths(b), paths(&c), "{t:?}");
            assert_eq!(is_path(b), is_path(&c), "{t:?}");
            assert_eq!(text(&without_paths(b)), text(&without_paths(&c)), "{t:?}");
            assert_eq!(text(&without_fences(b)), text(&without_fences(&c)), "{t:?}");
            assert_eq!(span(b, 0), span(&c, 0), "{t:?}");
            assert_eq!(has_sentence(b), has_sentence(&c), "{t:?}");
            assert_eq!(has_plan(b), has_plan(&c), "{t:?}");
            assert_eq!(is_error_line(b), is_error_line(&c), "{t:?}");
            assert_eq!(is_error_line_str(&t), is_error_line(&c), "{t:?}");
            let (mut x, mut y) = (Vec::new(), Vec::new());
            identifiers(b, |n| x.push(text(n)));
            identifiers(&c, |n| y.push(text(n)));
            assert_eq!(x, y, "{t:?}");
            let (mut x, mut y) = (Vec::new(), Vec::new());
            error_names(b, |n| x.push(text(n)));
            error_names(&c, |n| y.push(text(n)));
            assert_eq!(x, y, "{t:?}");
            // the prefilter passes every text with a match
            assert!(y.is_empty() || may_name_error(&t), "{t:?}");
        }
    }

    /// `texts`, and the same with characters outside ASCII (ones `\w`
    /// holds, ones it does not, ones that fold or lower to ASCII) around,
    /// inside and between the pieces.
    fn mixed_texts() -> Vec<String> {
        let marks = [
            "\u{e9}",
            "\u{6570}",
            "\u{1f680}",
            "\u{130}",
            "\u{212a}",
            "\u{3000}",
            "\u{2028}",
            "~",
        ];
        let mut out = texts();
        for (i, t) in texts().iter().enumerate() {
            let m = marks[i % marks.len()];
            let n = marks[(i / marks.len()) % marks.len()];
            out.push(format!("{m}{t}{n}"));
            out.push(t.replacen(' ', m, 1).replacen('/', &format!("{n}/"), 1));
            out.push(t.replacen('.', &format!("{m}."), 1).replacen('x', n, 1));
        }
        for extra in [
            "~/a/b.py~/c/d.rs",
            "a~b/c.py",
            "x.y.z~~./q/r.md/",
            "~~~",
            "..//a.b",
            "\u{e9}/a\u{e9}/b.py \u{e9}t\u{e9}.md",
            "src/a.py.",
            "a/b/c.d.e.f.g.h.i.j.k",
        ] {
            out.push(extra.into());
        }
        out
    }

    #[test]
    fn retention_may_end_line_flags_every_chunk_with_a_line_end_head() {
        for b in 0..=255u8 {
            for at in 0..8 {
                for fill in [b'a', 0x7f, 0x80, 0xc3, 0xe3, 0xff, b' '] {
                    let mut chunk = [fill; 8];
                    chunk[at] = b;
                    let x = u64::from_le_bytes(chunk);
                    if LINE_END_HEAD[b as usize] {
                        assert!(may_end_line(x), "{chunk:?}");
                    }
                    if b >= 0x20 && b != 0xc2 && b != 0xe2 && fill != b' ' {
                        assert!(!may_end_line(x), "{chunk:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn retention_paths_tried_at_their_possible_starts_are_all_paths() {
        for t in mixed_texts() {
            let c: Vec<char> = t.chars().collect();
            assert_eq!(paths(&c), paths_each_start(&c), "{t:?}");
            if t.is_ascii() {
                assert_eq!(paths(t.as_bytes()), paths_each_start(t.as_bytes()), "{t:?}");
            }
            let cut_text = text(&cut(&c, &paths(&c)));
            assert_eq!(text(&without_paths(&c)), cut_text, "{t:?}");
        }
    }

    #[test]
    fn retention_words_of_texts_lowering_alone_are_the_lowered_texts() {
        // every character outside ASCII lowers outside it, but K and İ
        for c in (0x80..=0x10ffff).filter_map(char::from_u32) {
            let to_ascii = c.to_lowercase().any(|l| l.is_ascii());
            assert_eq!(LOWER_TO_ASCII.contains(&c), to_ascii, "{c:?}");
            assert_eq!(words_lower_alone(&format!("ab{c}cd")), !to_ascii, "{c:?}");
        }
        for t in mixed_texts() {
            if !words_lower_alone(&t) {
                continue;
            }
            let mut whole = Vec::new();
            words(&t.to_lowercase(), |w| whole.push(w.to_string()));
            let mut each = Vec::new();
            ascii_words_until(&t, |w| {
                each.push(w.to_string());
                true
            });
            assert_eq!(each, whole, "{t:?}");
        }
    }

    #[test]
    fn retention_error_lines_fail_early_as_they_fail_late() {
        for t in mixed_texts() {
            let mut all = Vec::new();
            find_line(&t, |l| {
                all.push(l);
                false
            });
            for line in all.into_iter().chain([t.as_str()]) {
                for from in 0..line.len().min(4) {
                    let Some(l) = line.get(from..) else { continue };
                    let chars: Vec<char> = l.chars().collect();
                    assert_eq!(is_error_line_str(l), is_error_line(&chars), "{l:?}");
                }
            }
        }
        for l in [
            "Error: x",
            "eRROR(",
            "\tfatal x",
            "TRACEBACK:",
            "failure\u{3000}",
            "Ferror: x",
        ] {
            let chars: Vec<char> = l.chars().collect();
            assert_eq!(is_error_line_str(l), is_error_line(&chars), "{l:?}");
            assert_eq!(is_error_line_str(l), !l.starts_with('F'), "{l:?}");
        }
    }

    #[test]
    fn retention_find_line_reads_the_lines_splitlines_reads() {
        let ends = [
            "\n", "\r", "\r\n", "\x0b", "\x0c", "\x1c", "\x1e", "\u{85}", "\u{2028}", "\u{2029}",
        ];
        let lines = [
            "",
            " ",
            "x",
            "error: a",
            "\u{2003}Fatal( b",
            "\u{e9}t\u{e9}",
            "failed x",
            "FAİLED x",
        ];
        for (i, a) in lines.iter().enumerate() {
            for (j, b) in lines.iter().enumerate() {
                for end in ends {
                    let c = lines[(i + j) % lines.len()];
                    let t = format!("{a}{end}{b}{end}{end}{c}");
                    for keep in [is_error_line_str as fn(&str) -> bool, |l: &str| l == "x"] {
                        assert_eq!(
                            find_line(&t, keep),
                            splitlines(&t).find(|l| keep(l)),
                            "{t:?}"
                        );
                    }
                    let mut all = Vec::new();
                    find_line(&t, |l| {
                        all.push(l);
                        false
                    });
                    assert_eq!(all, splitlines(&t).collect::<Vec<_>>(), "{t:?}");
                    let line = t.lines().next().unwrap_or("");
                    let chars: Vec<char> = line.chars().collect();
                    assert_eq!(is_error_line_str(line), is_error_line(&chars), "{line:?}");
                }
            }
        }
    }

    #[test]
    fn retention_json_elements_are_the_values_as_serde_writes_them() {
        let values = serde_json::json!([
            {"role": "user", "content": "a, [b] {c} \"d\" \\"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "x", "function": {"name": "n", "arguments": "{\"p\": [1, 2]}"}}]},
            {"role": "tool", "tool_call_id": "x", "content": "\u{e9}\n\\\""},
            {"role": "user", "content": [{"type": "text", "text": ","}]}
        ]);
        let text = values.to_string();
        let got = json_elements(&text).expect("an array");
        let want: Vec<String> = values
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.to_string())
            .collect();
        assert_eq!(got, want);
        assert_eq!(json_elements("[]"), Some(vec![]));
        for bad in [
            "", "[", "{}", "[{}", "[{},]", "[\"a]", "[}]", "[{}}]", "[,]",
        ] {
            assert_eq!(json_elements(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn retention_error_names_need_their_marks() {
        let mut found = Vec::new();
        for t in [
            "ValueError x",
            "x panicked",
            "Segmentation fault",
            "MyException",
            "KeyErr",
        ] {
            error_names(t.as_bytes(), |n| found.push(text(n)));
            assert_eq!(may_name_error(t), t != "KeyErr", "{t:?}");
        }
        assert_eq!(
            found,
            [
                "ValueError",
                "panicked",
                "Segmentation fault",
                "MyException"
            ]
        );
    }

    #[test]
    fn retention_words_lowered_a_word_at_a_time_are_the_lowered_texts() {
        for t in texts() {
            let mut whole = Vec::new();
            words(&t.to_lowercase(), |w| whole.push(w.to_string()));
            for stop in [0, 1, 3, usize::MAX] {
                let mut each = Vec::new();
                ascii_words_until(&t, |w| {
                    each.push(w.to_string());
                    each.len() < stop
                });
                let mut lowered = Vec::new();
                words_until(&t.to_lowercase(), |w| {
                    lowered.push(w.to_string());
                    lowered.len() < stop
                });
                let n = whole.len().min(stop.max(1));
                assert_eq!(each, whole[..n], "{t:?} until {stop}");
                assert_eq!(lowered, whole[..n], "{t:?} until {stop}");
            }
        }
    }

    #[test]
    fn retention_squeeze_head_is_the_squeezed_texts_head() {
        let mut all = texts();
        all.extend([
            "  a\u{2028}b\u{3000}\u{e9}t\u{e9}  c ".into(),
            String::new(),
            " \t ".into(),
        ]);
        for t in all {
            let squeezed = split(&t).join(" ");
            for n in [0, 1, 2, 5, 60, 160] {
                let head: String = squeezed.chars().take(n).collect();
                assert_eq!(squeeze_head(&t, n), head, "{t:?} {n}");
            }
        }
    }
}
