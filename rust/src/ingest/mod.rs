//! JSONL ingest: session files parsed straight into the part-row table.
//!
//! Files are cut into chunks on line boundaries; chunks are parsed and
//! mapped in parallel (one Arrow batch each), then one cheap pass in line
//! order checks what spans lines (a session's lines must be contiguous, a
//! session or message id read twice) and applies `on_error`. Every bad line
//! is either the error of the run or a `Rejected` entry with its file, line
//! and raw bytes: nothing is dropped silently.

mod anthropic;
pub(crate) mod chat;
mod claude_code;
mod claude_file;
mod claude_plan;
#[cfg(test)]
mod differential;
mod export;
mod fast;
mod fast_chat;
mod fast_claude;
mod lines;
mod observations;
mod opencode;
mod openhands;
pub mod pyjson;
mod responses;
pub mod rows;
mod sessions;
mod settle;
mod spill;
mod types;
mod usage;

use rayon::prelude::*;

use crate::error::{CoreError, Result};
use claude_file::Carry;
use lines::{open_input, read_chunk, split, split_from, ChunkOut};
pub use sessions::exports_to_rows;
use settle::{Carried, Settle};
pub use types::{Format, Ingested, OnError, Options, Problem, Rejected, Source};

/// Read `files` (one format and optional id base each) and ingest them as
/// one result: streamed window by window (`Stream`), so a file is never held
/// whole (but a Claude Code file), and the window's buffer is reused.
pub fn ingest_files(files: Vec<StreamFile>, options: Options) -> Result<Ingested> {
    Ok(Stream::new(files, options, FILES_WINDOW).read_all()?.0)
}

/// `ingest_files`' window: a few chunks per thread at the default 1 MiB chunk.
const FILES_WINDOW: usize = 16 << 20;

/// JSONL files read one after another, window by window: each `next_window`
/// reads about `window_bytes` of whole lines of the current file, maps them
/// (chunks in parallel), settles them in line order with the checks that
/// span windows and files (a session read twice, a session's lines
/// contiguous), and returns that window's rows. Peak memory is about a
/// window and its rows, whatever the files' sizes. A Claude Code file (a
/// session's events span the file) larger than a window is scanned first
/// (`claude_plan`) and cut only where no session or call spans the cut; one
/// that the scan cannot vouch for is read whole.
pub struct Stream {
    files: Vec<StreamFile>,
    options: Options,
    window_bytes: usize,
    /// The file being read, and its reader.
    at: usize,
    reader: Option<std::io::BufReader<std::io::Take<std::fs::File>>>,
    /// The window's bytes, kept from window to window: a fresh buffer per
    /// window cost more in page faults than the read itself. Its first
    /// `carry` bytes are those read past the previous window's last line.
    buffer: Vec<u8>,
    carry: usize,
    /// Number of the next window's first line in the current file.
    next_line: usize,
    /// File offset of the buffer's first byte.
    offset: u64,
    /// A Claude Code file read in windows: where it can be cut, and what
    /// its next window continues.
    plan: Option<claude_plan::Plan>,
    claude: Option<claude_file::Carry>,
    carried: Option<Carried>,
    failed: bool,
}

/// A file to read (`ingest_files`, `Stream`): its path, format and id base.
pub struct StreamFile {
    pub path: String,
    pub format: Format,
    pub id_base: Option<String>,
}

impl Stream {
    pub fn new(files: Vec<StreamFile>, options: Options, window_bytes: usize) -> Stream {
        Stream {
            files,
            options,
            window_bytes: window_bytes.max(1),
            at: 0,
            reader: None,
            buffer: Vec::new(),
            carry: 0,
            next_line: 1,
            offset: 0,
            plan: None,
            claude: None,
            carried: Some(Carried::default()),
            failed: false,
        }
    }

    /// The next window's rows, or `None` after the last file. `lines` and
    /// `sessions` of what it returns count everything read so far. After an
    /// error (`on_error="raise"`, an unreadable file) the stream is finished.
    pub fn next_window(&mut self) -> Result<Option<Ingested>> {
        if self.failed {
            return Ok(None);
        }
        let result = self.read_window();
        if result.is_err() {
            self.failed = true;
        }
        result
    }

    fn read_window(&mut self) -> Result<Option<Ingested>> {
        use std::io::Read;
        loop {
            let Some(file) = self.files.get(self.at) else {
                return Ok(None);
            };
            let name = file.path.clone();
            // a file that cannot be read is no fault of its lines: Python's
            // OSError naming it, whatever `on_error` says
            let io = |e: std::io::Error| CoreError::unreadable(&e, &name);
            if self.reader.is_none() {
                let (opened, size) = open_input(&file.path)?;
                if file.format == Format::ClaudeCode {
                    let mut carry = Carry::of(&file.path, file.id_base.as_deref());
                    self.plan = match size > self.window_bytes as u64 {
                        true => claude_plan::Plan::scan(
                            &file.path,
                            size,
                            &carry.current,
                            self.window_bytes,
                            self.options.chunk_bytes.max(1),
                        )?,
                        false => None,
                    };
                    carry.windowed = self.plan.is_some();
                    self.claude = Some(carry);
                }
                self.offset = 0;
                // A scanned file is read as far as it was scanned.
                let limit = self.plan.as_ref().map_or(u64::MAX, |p| p.len);
                let opened = opened.take(limit);
                self.reader = Some(std::io::BufReader::with_capacity(1 << 20, opened));
            }
            let reader = self.reader.as_mut().expect("opened above");
            let mut data = std::mem::take(&mut self.buffer);
            data.truncate(self.carry);
            let claude = file.format == Format::ClaudeCode;
            let whole_file = claude && self.plan.is_none();
            // Read until the window is full and holds a line break (or the file ends).
            let mut eof = whole_file;
            if whole_file {
                reader.read_to_end(&mut data).map_err(io)?;
            } else {
                loop {
                    let before = data.len();
                    // Fill the window, then go on in steps of up to 64 KiB until a line ends.
                    let step = self.window_bytes.min(1 << 16);
                    let want = self.window_bytes.saturating_sub(before).max(step) as u64;
                    let got = reader.take(want).read_to_end(&mut data).map_err(io)?;
                    if got == 0 {
                        eof = true;
                        if let Some(plan) = &self.plan {
                            let read = self.offset + data.len() as u64;
                            if read < plan.len {
                                return Err(CoreError::Format {
                                    what: format!(
                                        "{name}: the file changed while it was read: {} bytes \
                                         when scanned, {read} now",
                                        plan.len
                                    ),
                                    at: Default::default(),
                                });
                            }
                        }
                        break;
                    }
                    if data.len() >= self.window_bytes && data[before..].contains(&b'\n') {
                        break;
                    }
                }
            }
            // The bytes after the last line break wait for the next window.
            let mut cut = match eof {
                true => data.len(),
                false => data.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1),
            };
            if let (Some(plan), false) = (&self.plan, eof) {
                // on to the first line end no session or call spans (a line
                // end by the scan's making, within the bytes it scanned)
                let at = plan.cut(self.offset + cut as u64);
                let short = at.saturating_sub(self.offset + data.len() as u64);
                if short > 0 {
                    let got = reader.take(short).read_to_end(&mut data).map_err(io)?;
                    if (got as u64) < short {
                        return Err(CoreError::Format {
                            what: format!(
                                "{name}: the file changed while it was read: it \
                                           is shorter than when scanned"
                            ),
                            at: Default::default(),
                        });
                    }
                }
                cut = (at - self.offset) as usize;
            }
            // (`settle_window` moves `next_line` past the window.)
            let window = match cut {
                0 => None, // the file ended at the last window's end
                _ => Some(self.settle_window(&data[..cut])),
            };
            data.copy_within(cut.., 0);
            self.carry = data.len() - cut;
            self.offset += cut as u64;
            self.buffer = data;
            // A window of blank lines holds nothing to return.
            let window = window
                .transpose()?
                .filter(|w| !(w.batches.is_empty() && w.rejected.is_empty()));
            if eof {
                // on to the next file
                self.at += 1;
                self.reader = None;
                self.next_line = 1;
                (self.plan, self.claude) = (None, None);
            }
            if window.is_some() {
                return Ok(window);
            }
        }
    }

    /// Every window left, concatenated into one result, and how many windows
    /// there were.
    pub fn read_all(&mut self) -> Result<(Ingested, usize)> {
        let mut all = Ingested {
            batches: Vec::new(),
            rejected: Vec::new(),
            lines: 0,
            sessions: 0,
        };
        let mut windows = 0;
        while let Some(window) = self.next_window()? {
            windows += 1;
            all.batches.extend(window.batches);
            all.rejected.extend(window.rejected);
            // Each window counts everything read so far.
            (all.lines, all.sessions) = (window.lines, window.sessions);
        }
        Ok((all, windows))
    }

    /// Map and settle one window of the current file.
    fn settle_window(&mut self, data: &[u8]) -> Result<Ingested> {
        // The settle pass sees the current file alone (as source 0): what it
        // carries names the files of earlier sessions itself, so a window
        // costs the same whatever the number of files.
        let file = &self.files[self.at];
        let sources = [Source {
            name: &file.path,
            data,
            format: file.format,
            id_base: file.id_base.as_deref(),
        }];
        let carried = self.carried.take().unwrap_or_default();
        let mut settle = Settle::resume(&sources, &self.options, carried);
        let target = self.options.chunk_bytes.max(1);
        if let Some(carry) = self.claude.as_mut() {
            let continued = self.next_line > 1;
            let out = claude_code::read_file(&sources[0], target, self.next_line, carry);
            self.next_line += memchr::memchr_iter(b'\n', data).count();
            settle.file(0, out, continued)?;
            if let Some(plan) = &mut self.plan {
                // the sessions that end here need nothing more, nor the ids
                // no later line can ask for
                let at = self.offset + data.len() as u64;
                plan.advance(at).map_err(|e| {
                    let folder = std::env::temp_dir().display().to_string();
                    let what = format!(
                        "{}: the first pass's temporary files in {folder} cannot be read: {e}",
                        file.path
                    );
                    CoreError::os(&e, what, folder)
                })?;
                carry.sessions.retain(|s| plan.continues(&s.id, at));
                for session in &mut carry.sessions {
                    session.ids.retain(|key| plan.repeats(key));
                }
            }
        } else {
            let mut chunks = Vec::new();
            self.next_line = split_from(0, data, target, self.next_line, &mut chunks);
            let outs: Vec<ChunkOut> = chunks
                .par_iter()
                .map(|chunk| read_chunk(&sources[0], chunk))
                .collect();
            for (chunk, out) in chunks.iter().zip(outs) {
                settle.chunk(chunk, out)?;
            }
        }
        let (mut out, carried) = settle.suspend();
        self.carried = Some(carried);
        for r in &mut out.rejected {
            r.source = self.at; // the file's index among the stream's files
        }
        Ok(out)
    }
}

/// Parse `sources` in parallel on the current rayon pool.
pub fn ingest(sources: &[Source<'_>], options: &Options) -> Result<Ingested> {
    let target = options.chunk_bytes.max(1);
    // Events of a Claude Code session span lines: those files are mapped
    // whole (see claude_code); the others chunk by chunk.
    let (whole, lined): (Vec<usize>, Vec<usize>) =
        (0..sources.len()).partition(|&i| sources[i].format == Format::ClaudeCode);
    let mut chunks = Vec::new();
    for &index in &lined {
        split(index, sources[index].data, target, &mut chunks);
    }
    let (outs, files) = rayon::join(
        || {
            chunks
                .par_iter()
                .map(|chunk| read_chunk(&sources[chunk.source], chunk))
                .collect::<Vec<ChunkOut>>()
        },
        || {
            whole
                .par_iter()
                .map(|&i| {
                    let mut carry = Carry::of(sources[i].name, sources[i].id_base);
                    claude_code::read_file(&sources[i], target, 1, &mut carry)
                })
                .collect::<Vec<_>>()
        },
    );
    // One pass in file and line order over every file, whatever its format.
    let mut settle = Settle::new(sources, options);
    let mut outs = chunks.iter().zip(outs).peekable();
    let mut files = files.into_iter();
    for (index, source) in sources.iter().enumerate() {
        if source.format == Format::ClaudeCode {
            let file = files.next().expect("one output per Claude Code file");
            settle.file(index, file, false)?;
        } else {
            while let Some((chunk, out)) = outs.next_if(|(c, _)| c.source == index) {
                settle.chunk(chunk, out)?;
            }
        }
    }
    Ok(settle.done())
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::cast::AsArray;
    use arrow_array::types::Int64Type;

    fn run(text: &str, format: Format, on_error: OnError, chunk_bytes: usize) -> Result<Ingested> {
        run_bytes(text.as_bytes(), format, on_error, chunk_bytes)
    }

    fn run_bytes(
        data: &[u8],
        format: Format,
        on_error: OnError,
        chunk_bytes: usize,
    ) -> Result<Ingested> {
        let source = Source::new("dir/file.jsonl", data, format);
        let options = Options {
            on_error,
            chunk_bytes,
        };
        ingest(&[source], &options)
    }

    pub(super) fn column(ingested: &Ingested, name: &str) -> Vec<Option<String>> {
        ingested
            .batches
            .iter()
            .flat_map(|b| {
                let col = b.column_by_name(name).unwrap();
                match col.data_type() {
                    arrow_schema::DataType::LargeUtf8 => col
                        .as_string::<i64>()
                        .iter()
                        .map(|v| v.map(str::to_owned))
                        .collect::<Vec<_>>(),
                    _ => col
                        .as_string::<i32>()
                        .iter()
                        .map(|v| v.map(str::to_owned))
                        .collect(),
                }
            })
            .collect()
    }

    const SESSION: &str = r#"{"info":{"id":"s1","title":"t"},"messages":[{"info":{"id":"m1","role":"user"},"parts":[{"id":"p1","type":"text","text":"hi"}]},{"info":{"id":"m2","role":"assistant","parentID":"m1","finish":"stop"},"parts":[{"id":"p2","type":"tool","tool":"read","callID":"c","state":{"status":"completed","input":{"path":"a.py","n":1.0e-5},"output":"body","time":{"start":1,"compacted":7}}},{"id":"p3","type":"step-finish"}]},{"info":{"id":"m3","role":"user"}}]}"#;

    #[test]
    fn an_opencode_session_becomes_part_rows() {
        let out = run(SESSION, Format::OpenCode, OnError::Raise, 1 << 20).unwrap();
        assert_eq!(out.lines, 1);
        assert_eq!(out.sessions, 1);
        let ids = column(&out, "part_id");
        assert_eq!(
            ids,
            [
                Some("p1".into()),
                Some("p2".into()),
                Some("p3".into()),
                None
            ]
        );
        let input = column(&out, "input");
        assert_eq!(input[1].as_deref(), Some(r#"{"path":"a.py","n":1e-05}"#));
        let output = column(&out, "output");
        assert_eq!(output[..2], [Some("hi".into()), Some("body".into())]);
        let json = column(&out, "part_json");
        let tool_json = r#"{"callID":"c","state":{"time":{"start":1}}}"#;
        assert_eq!(json[1].as_deref(), Some(tool_json));
        let compacted = out.batches[0].column_by_name("compacted_at").unwrap();
        assert_eq!(compacted.as_primitive::<Int64Type>().value(1), 7);
        let session_json = column(&out, "session_json");
        assert_eq!(
            session_json[0].as_deref(),
            Some(r#"{"id":"s1","title":"t"}"#)
        );
        assert!(session_json[1..].iter().all(Option::is_none));
        let message_json = column(&out, "message_json");
        assert_eq!(message_json.iter().filter(|m| m.is_some()).count(), 3);
    }

    #[test]
    fn chunk_size_does_not_change_the_table() {
        let mut text = String::new();
        for i in 0..40 {
            text.push_str(&SESSION.replace("\"s1\"", &format!("\"s{i}\"")));
            text.push_str(if i % 3 == 0 { "\r\n\n" } else { "\n" });
        }
        let whole = run(&text, Format::OpenCode, OnError::Raise, 1 << 20).unwrap();
        let small = run(&text, Format::OpenCode, OnError::Raise, 10).unwrap();
        assert!(small.batches.len() > 1);
        for name in [
            "session_id",
            "part_id",
            "input",
            "session_json",
            "message_json",
            "part_json",
        ] {
            assert_eq!(column(&whole, name), column(&small, name), "{name}");
        }
        assert_eq!((whole.lines, whole.sessions), (40, 40));
    }

    /// Every window of a stream, concatenated.
    pub(super) fn streamed(
        path: &str,
        format: Format,
        on_error: OnError,
        window: usize,
    ) -> Result<Ingested> {
        let options = Options {
            on_error,
            chunk_bytes: 64,
        };
        let file = StreamFile {
            path: path.to_owned(),
            format,
            id_base: Some("base".into()),
        };
        let mut stream = Stream::new(vec![file], options, window);
        let (all, windows) = stream.read_all()?;
        assert!(stream.next_window()?.is_none());
        assert!(windows >= 1);
        Ok(all)
    }

    pub(super) fn temp_file(name: &str, data: &[u8]) -> String {
        let path =
            std::env::temp_dir().join(format!("ctxcompact-stream-{}-{name}", std::process::id()));
        std::fs::write(&path, data).unwrap();
        path.to_string_lossy().into_owned()
    }

    #[test]
    fn a_streamed_file_reads_as_the_whole_file_for_any_window() {
        let mut text = String::from("\u{feff}");
        for i in 0..30 {
            let line = match i % 3 {
                0 => SESSION.replace("\"s1\"", &format!("\"s{i}\"")),
                // chat lines have no id: named by the id base and their line number
                _ => String::from(
                    r#"[{"role":"user","content":"hi"},{"role":"assistant","content":"yo"}]"#,
                ),
            };
            text.push_str(&line);
            text.push_str(if i % 4 == 0 { "\r\n\n" } else { "\n" });
        }
        for (format, keep) in [(Format::OpenCode, 0), (Format::OpenAiChat, 1)] {
            let lines: String = text
                .split_inclusive('\n')
                .filter(|l| l.trim().is_empty() || (l.starts_with('[') as usize == keep))
                .collect();
            let path = temp_file(&format!("{keep}.jsonl"), lines.as_bytes());
            let source = Source {
                name: &path,
                data: lines.as_bytes(),
                format,
                id_base: Some("base"),
            };
            let options = Options {
                on_error: OnError::Raise,
                chunk_bytes: 64,
            };
            let whole = ingest(&[source], &options).unwrap();
            for window in [1, 100, 700, 5_000, 1 << 20] {
                let streamed = streamed(&path, format, OnError::Raise, window).unwrap();
                for name in [
                    "session_id",
                    "message_id",
                    "part_id",
                    "output",
                    "session_json",
                ] {
                    assert_eq!(
                        column(&whole, name),
                        column(&streamed, name),
                        "{name} {window}"
                    );
                }
                assert_eq!(
                    (whole.lines, whole.sessions),
                    (streamed.lines, streamed.sessions)
                );
            }
            std::fs::remove_file(path).unwrap();
        }
    }

    #[test]
    fn checks_span_windows_and_bad_lines_keep_their_file_line() {
        let text = format!("{SESSION}\n{{not json\n{SESSION}\n");
        let path = temp_file("dup.jsonl", text.as_bytes());
        // the second s1 is two windows after the first: still a repeat
        let err = streamed(&path, Format::OpenCode, OnError::Raise, 1).unwrap_err();
        assert!(err.to_string().contains(":2:"), "{err}");
        let skipped = streamed(&path, Format::OpenCode, OnError::Skip, 1).unwrap();
        let lines: Vec<usize> = skipped.rejected.iter().map(|r| r.line).collect();
        assert_eq!(lines, [2, 3]);
        assert!(
            skipped.rejected[1].error.contains("already read"),
            "{}",
            skipped.rejected[1].error
        );
        assert_eq!(skipped.sessions, 1);
        std::fs::remove_file(path).unwrap();
        let missing = StreamFile {
            path: "/nonexistent/x.jsonl".into(),
            format: Format::OpenCode,
            id_base: None,
        };
        let mut stream = Stream::new(vec![missing], Options::new(OnError::Raise), 10);
        assert!(stream.next_window().is_err());
        assert!(stream.next_window().unwrap().is_none()); // finished after an error
    }

    #[test]
    fn a_session_repeated_in_a_later_file_is_caught_across_the_stream() {
        let a = temp_file("a.jsonl", format!("{SESSION}\n").as_bytes());
        let b = temp_file("b.jsonl", format!("\n{SESSION}\n").as_bytes());
        let files = [&a, &b].map(|p| StreamFile {
            path: p.clone(),
            format: Format::OpenCode,
            id_base: None,
        });
        let mut stream = Stream::new(files.into(), Options::new(OnError::Skip), 1);
        let first = stream.next_window().unwrap().unwrap();
        assert_eq!(
            (first.lines, first.sessions, first.rejected.len()),
            (1, 1, 0)
        );
        let second = stream.next_window().unwrap().unwrap();
        assert_eq!(second.rejected.len(), 1);
        assert_eq!(second.rejected[0].line, 2);
        assert!(
            second.rejected[0].error.contains(&a),
            "{}",
            second.rejected[0].error
        );
        assert!(stream.next_window().unwrap().is_none());
        for p in [a, b] {
            std::fs::remove_file(p).unwrap();
        }
    }

    /// The `(errno, path)` of the `Os` error that reading `path` (in
    /// `format`, under `on_error`) gives, with its message.
    fn os_error(path: &str, format: Format, on_error: OnError) -> (i32, String, String) {
        match streamed(path, format, on_error, 1) {
            Err(CoreError::Os { errno, what, path }) => (errno, what, path),
            other => panic!("{path}: not an Os error: {other:?}"),
        }
    }

    #[test]
    fn an_input_that_cannot_be_read_is_an_os_error_naming_it_under_either_on_error() {
        let folder = std::env::temp_dir().join(format!(
            "ctxcompact-stream-{}-folder.jsonl",
            std::process::id()
        ));
        std::fs::create_dir_all(&folder).unwrap();
        let folder = folder.to_string_lossy().into_owned();
        let missing = format!("{folder}/missing.jsonl");
        // (a Claude Code file is first looked at for its size, then scanned)
        for format in [Format::OpenCode, Format::ClaudeCode] {
            for on_error in [OnError::Raise, OnError::Skip] {
                let (errno, what, path) = os_error(&missing, format, on_error);
                assert_eq!((errno, path.as_str()), (2, missing.as_str()), "{what}");
                assert_eq!(what, "No such file or directory");
                let (errno, what, path) = os_error(&folder, format, on_error);
                assert_eq!((errno, path.as_str()), (21, folder.as_str()), "{what}");
                assert_eq!(what, "Is a directory");
            }
        }
        #[cfg(unix)]
        {
            // never opened: opening a named pipe waits for a writer
            let fifo = format!("{folder}/pipe.jsonl");
            let made = std::process::Command::new("mkfifo").arg(&fifo).status();
            if made.is_ok_and(|s| s.success()) {
                let (errno, what, path) = os_error(&fifo, Format::OpenCode, OnError::Skip);
                assert_eq!((errno, path.as_str()), (22, fifo.as_str()), "{what}");
                assert_eq!(what, "not a regular file (a named pipe)");
                std::fs::remove_file(&fifo).unwrap();
            }
        }
        std::fs::remove_dir(&folder).unwrap();
    }

    #[test]
    fn an_io_error_keeps_the_words_python_gives_it() {
        // an error without an OS code (a file cut short) keeps std's words, EIO
        let e = std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "cut short");
        let err = CoreError::unreadable(&e, "f.jsonl");
        assert_eq!(
            err,
            CoreError::Os {
                errno: 5,
                what: "cut short".into(),
                path: "f.jsonl".into()
            }
        );
        let e = std::io::Error::from_raw_os_error(13);
        let CoreError::Os { errno, what, .. } = CoreError::unreadable(&e, "f.jsonl") else {
            unreachable!()
        };
        assert_eq!(errno, 13);
        assert!(!what.contains("os error"), "{what}");
    }

    #[test]
    fn bad_lines_name_file_and_line_or_are_rejected_with_their_bytes() {
        let text = format!(
            "\u{feff}{SESSION}\n\n{{not json\n{}\n\u{0}\n",
            SESSION.replace("s1", "s2")
        );
        let mut bytes = text.into_bytes();
        let last = bytes.len() - 2;
        bytes[last] = 0xff; // invalid UTF-8 on line 5
        let err = run_bytes(&bytes, Format::OpenCode, OnError::Raise, 1 << 20)
            .err()
            .unwrap();
        assert_eq!(err.class_name(), "FormatError");
        assert!(
            err.to_string()
                .starts_with("dir/file.jsonl:3: not valid JSON"),
            "{err}"
        );
        assert_eq!(err.location().row, Some(3));
        let out = run_bytes(&bytes, Format::OpenCode, OnError::Skip, 7).unwrap();
        assert_eq!(out.sessions, 2);
        let lines: Vec<_> = out
            .rejected
            .iter()
            .map(|r| (r.line, r.raw.clone()))
            .collect();
        assert_eq!(lines, [(3, b"{not json".to_vec()), (5, vec![0xff])]);
        assert!(out.rejected[1].error.contains("UTF-8"));
    }

    #[test]
    fn a_session_read_twice_is_an_error_at_its_second_line() {
        let text = format!("{SESSION}\n{SESSION}\n");
        let err = run(&text, Format::OpenCode, OnError::Raise, 1)
            .err()
            .unwrap();
        assert!(
            err.to_string()
                .contains("file.jsonl:2: session \"s1\" was already read at dir/file.jsonl:1"),
            "{err}"
        );
        let out = run(&text, Format::OpenCode, OnError::Skip, 1).unwrap();
        assert_eq!(out.rejected.len(), 1);
        assert_eq!(column(&out, "session_id").len(), 4);
    }

    #[test]
    fn message_lines_group_into_contiguous_sessions() {
        let line = |s: &str, m: &str| {
            format!(
                r#"{{"info":{{"id":"{m}","sessionID":"{s}","role":"user"}},"parts":[{{"id":"{m}p","type":"text","text":"x"}}]}}"#
            )
        };
        let text = [
            line("a", "1"),
            line("a", "2"),
            line("b", "3"),
            line("a", "4"),
            line("b", "3"),
        ]
        .join("\n");
        let out = run(&text, Format::OpenCodeMessages, OnError::Skip, 1).unwrap();
        assert_eq!(out.sessions, 2);
        let rejected: Vec<_> = out.rejected.iter().map(|r| r.line).collect();
        assert_eq!(rejected, [4, 5]);
        assert!(out.rejected[0].error.contains("consecutive"));
        assert!(out.rejected[1]
            .error
            .contains("already read in this session"));
        let json = column(&out, "session_json");
        assert_eq!(
            json,
            [
                Some(r#"{"id":"a"}"#.into()),
                None,
                Some(r#"{"id":"b"}"#.into())
            ]
        );
    }

    #[test]
    fn chat_sessions_map_tool_calls_and_results() {
        let text = r#"{"id":"c1","messages":[{"role":"user","content":"go"},{"role":"assistant","content":null,"tool_calls":[{"id":"t1","type":"function","function":{"name":"ls","arguments":"{\"path\": \".\"}"}}]},{"role":"tool","tool_call_id":"t1","content":"a b"}]}
[{"role":"user","content":"bare"}]"#;
        let out = run(text, Format::OpenAiChat, OnError::Raise, 1 << 20).unwrap();
        assert_eq!(
            column(&out, "session_id"),
            [Some("c1".into()), Some("c1".into()), Some("file:2".into())]
        );
        assert_eq!(column(&out, "status")[1].as_deref(), Some("completed"));
        assert_eq!(column(&out, "input")[1].as_deref(), Some(r#"{"path":"."}"#));
        assert_eq!(column(&out, "output")[1].as_deref(), Some("a b"));
        assert_eq!(column(&out, "message_id")[1].as_deref(), Some("c1-m000001"));
    }

    #[test]
    fn a_claude_code_subagent_file_is_a_session_of_its_own_named_by_its_parent() {
        let parent = r#"{"type":"user","uuid":"u1","sessionId":"p","message":{"role":"user","content":"hi"}}"#;
        let agent = r#"{"type":"user","uuid":"u1","sessionId":"p","agentId":"acompact-7f","isSidechain":true,"message":{"role":"user","content":"sum up"}}
{"type":"assistant","uuid":"a1","sessionId":"p","agentId":"acompact-7f","isSidechain":true,"message":{"id":"m1","role":"assistant","content":[{"type":"text","text":"done"}]}}"#;
        let sources = [
            Source::new("proj/p.jsonl", parent.as_bytes(), Format::ClaudeCode),
            Source::new(
                "proj/p/subagents/agent-acompact-7f.jsonl",
                agent.as_bytes(),
                Format::ClaudeCode,
            ),
        ];
        let out = ingest(&sources, &Options::new(OnError::Raise)).unwrap();
        assert_eq!(out.sessions, 2);
        let ids = column(&out, "session_id");
        let ids: Vec<_> = ids.iter().flatten().map(String::as_str).collect();
        let agent_id = "p/subagents/agent-acompact-7f";
        assert_eq!(ids, ["p", agent_id, agent_id]);
        // anywhere else, the same lines are the parent's session, read twice
        let elsewhere = [
            Source::new("proj/p.jsonl", parent.as_bytes(), Format::ClaudeCode),
            Source::new(
                "proj/agent-acompact-7f.jsonl",
                agent.as_bytes(),
                Format::ClaudeCode,
            ),
        ];
        let err = ingest(&elsewhere, &Options::new(OnError::Raise))
            .err()
            .unwrap();
        assert!(
            err.to_string().contains("session \"p\" was already read"),
            "{err}"
        );
        for (name, suffix) in [
            ("a/s/subagents/agent-x1.jsonl", Some("/subagents/agent-x1")),
            ("subagents/agent-.jsonl", None),
            ("a/s/agents/agent-x1.jsonl", None),
            ("a/s/subagents/x1.jsonl", None),
        ] {
            assert_eq!(
                claude_file::subagent_suffix(name).as_deref(),
                suffix,
                "{name}"
            );
        }
    }

    #[test]
    fn each_file_is_read_in_its_own_format_in_one_run() {
        let chat = r#"{"id":"c1","messages":[{"role":"user","content":"go"}]}"#;
        let claude = r#"{"type":"user","uuid":"u1","sessionId":"k","message":{"role":"user","content":"hi"}}"#;
        let sources = [
            Source::new("a.jsonl", chat.as_bytes(), Format::OpenAiChat),
            Source::new("b.jsonl", claude.as_bytes(), Format::ClaudeCode),
            Source {
                id_base: Some("run2/a"),
                ..Source::new(
                    "run2/a.jsonl",
                    b"[{\"role\":\"user\",\"content\":\"x\"}]",
                    Format::OpenAiChat,
                )
            },
            Source::new("c.jsonl", SESSION.as_bytes(), Format::OpenCode),
        ];
        let out = ingest(&sources, &Options::new(OnError::Raise)).unwrap();
        assert_eq!((out.lines, out.sessions), (4, 4));
        let ids = column(&out, "session_id");
        let ids: Vec<_> = ids.iter().flatten().map(String::as_str).collect();
        assert_eq!(ids, ["c1", "k", "run2/a:1", "s1", "s1", "s1", "s1"]);
        // a session id read in a file of another format is still read twice
        let again = [
            Source::new("a.jsonl", SESSION.as_bytes(), Format::OpenCode),
            Source::new(
                "b.jsonl",
                r#"{"type":"user","uuid":"u","sessionId":"s1","message":{"role":"user","content":"x"}}"#.as_bytes(),
                Format::ClaudeCode,
            ),
        ];
        let err = ingest(&again, &Options::new(OnError::Raise)).err().unwrap();
        assert!(
            err.to_string()
                .contains("b.jsonl:1: session \"s1\" was already read at a.jsonl:1"),
            "{err}"
        );
    }

    #[test]
    fn a_line_that_is_not_a_claude_code_event_is_a_bad_line() {
        let text = r#"{"id":"c1","messages":[{"role":"user","content":"go"}]}
7
{"type":"user","uuid":"u1","message":{"role":"user","content":"hi"}}
"#;
        let err = run(text, Format::ClaudeCode, OnError::Raise, 1 << 20)
            .err()
            .unwrap();
        assert!(
            err.to_string()
                .starts_with("dir/file.jsonl:1: not a Claude Code event"),
            "{err}"
        );
        let out = run(text, Format::ClaudeCode, OnError::Skip, 1 << 20).unwrap();
        let lines: Vec<_> = out.rejected.iter().map(|r| r.line).collect();
        assert_eq!(lines, [1, 2]);
        assert_eq!(column(&out, "message_id"), [Some("u1".to_owned())]);
    }
}
