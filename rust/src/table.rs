//! The part-row transcript (docs/schema.md) as the scans see it: string
//! columns borrowed from Arrow, small per-row codes decoded once, and the
//! row ranges of every session.

use std::collections::HashSet;
use std::ops::Range;

use crate::bigram::Family;
use crate::codes::{flag, part_type, role, small_int, status};
use crate::columns::{
    decode_codes, decode_lengths, or_bool_flags, or_nonzero_flags, same_str, str_le, Lengths,
    StrCol, NO_LENGTH, NULL_CODE,
};
use crate::error::{CoreError, Location, Result};
use crate::estimate::{estimate_units, text_units, Method};
use crate::schema::Columns;

/// The tool status column as codes (`status::*`), when the scan gathered it.
fn decode_status(columns: &Columns) -> Result<Option<Vec<u8>>> {
    columns
        .get("status")
        .map(|a| decode_codes("status", a, status::parse, small_int(3), "tool status"))
        .transpose()
}

/// The message and part flags (docs/schema.md), one byte per row.
fn decode_flags(columns: &Columns, rows: usize) -> Result<Vec<u8>> {
    let mut flags = vec![0u8; rows];
    for (name, bit) in [
        ("summary", flag::SUMMARY),
        ("finished", flag::FINISHED),
        ("error", flag::ERROR),
    ] {
        if let Some(arrays) = columns.get(name) {
            or_bool_flags(name, arrays, bit, &mut flags)?;
        }
    }
    if let Some(arrays) = columns.get("compacted_at") {
        or_nonzero_flags("compacted_at", arrays, flag::COMPACTED, &mut flags)?;
    }
    Ok(flags)
}

/// The flags every row of a message must agree on.
const MESSAGE_FLAGS: u8 = flag::SUMMARY | flag::FINISHED | flag::ERROR;

/// One message of a session: its rows and role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub rows: Range<usize>,
    pub role: u8,
}

/// Cloned, it shares the columns and copies the decoded codes and flags (a
/// scan that marks rows as it goes, `replay`, marks its own copy).
#[derive(Clone)]
pub struct PartTable<'a> {
    pub session_id: StrCol<'a>,
    pub message_id: StrCol<'a>,
    pub parent_id: Option<StrCol<'a>>,
    pub tool: Option<StrCol<'a>>,
    pub input: Option<StrCol<'a>>,
    /// Each tool call's supersession target worked out once
    /// (`target::TOOL_TARGET`), read by supersession when present.
    pub tool_target: Option<StrCol<'a>>,
    pub output: Option<StrCol<'a>>,
    /// Read by the estimate scan only (`None` for the others or when absent).
    pub part_json: Option<StrCol<'a>>,
    /// Read by the estimate scan when present (a described placeholder names it).
    pub part_id: Option<StrCol<'a>>,
    /// Each output's UTF-16 length counted once (`output_utf16`), when present:
    /// the opencode estimate of an output is read from it, not from the text.
    pub output_utf16: Option<Lengths<'a>>,
    /// Each output's units under a family's table, counted once
    /// (`output_units_<family>`), for the families whose counts are present.
    pub output_bigram: Vec<(Family, Lengths<'a>)>,
    /// Each output's exact tokens under a family, counted once
    /// (`output_tokens_<family>`), for the families whose counts are present.
    pub output_exact: Vec<(Family, Lengths<'a>)>,
    /// Each output's `tokens::text_hash` when it was counted exactly
    /// (`output_hash`): an exact count is read only where the text still has it.
    pub output_hash: Option<Lengths<'a>>,
    /// Each tool call's arguments counted exactly under a family, once
    /// (`input_tokens_<family>`), for the families whose counts are present.
    pub input_exact: Vec<(Family, Lengths<'a>)>,
    /// Each input's `tokens::text_hash` when it was counted (`input_hash`).
    pub input_hash: Option<Lengths<'a>>,
    pub role: Vec<u8>,
    pub part_type: Vec<u8>,
    pub status: Option<Vec<u8>>,
    pub flags: Vec<u8>,
    /// Row range of every session, in table order.
    pub sessions: Vec<Range<usize>>,
}

impl<'a> PartTable<'a> {
    pub fn new(columns: &'a Columns) -> Result<Self> {
        let base = |name| columns.get(name).expect("base columns are always gathered");
        let opt_str = |name| columns.get(name).map(|a| StrCol::new(name, a)).transpose();
        let session_id = StrCol::new("session_id", base("session_id"))?;
        let message_id = StrCol::new("message_id", base("message_id"))?;
        let rows = session_id.rows();
        // The decodes are independent passes over a million rows each: run
        // them side by side on the pool.
        let ((sessions, output_utf16), ((role, part_type), (status, flags))) = rayon::join(
            || {
                rayon::join(
                    || session_ranges(&session_id),
                    || {
                        columns
                            .get("output_utf16")
                            .map(|a| decode_lengths("output_utf16", a, rows))
                            .transpose()
                    },
                )
            },
            || {
                rayon::join(
                    || {
                        rayon::join(
                            || {
                                decode_codes(
                                    "role",
                                    base("role"),
                                    role::parse,
                                    small_int(3),
                                    "role",
                                )
                            },
                            || {
                                decode_codes(
                                    "part_type",
                                    base("part_type"),
                                    part_type::parse,
                                    part_type::from_int,
                                    "part type",
                                )
                            },
                        )
                    },
                    || rayon::join(|| decode_status(columns), || decode_flags(columns, rows)),
                )
            },
        );
        // Errors in the order a sequential decode meets them.
        let (role, part_type) = (role?, part_type?);
        let (status, flags) = (status?, flags?);
        let (sessions, output_utf16) = (sessions?, output_utf16?);
        let mut output_bigram = Vec::new();
        for family in Family::ALL {
            let name = family.counted_column();
            if let Some(arrays) = columns.get(name) {
                output_bigram.push((family, decode_lengths(name, arrays, rows)?));
            }
        }
        let mut output_exact = Vec::new();
        for family in Family::ALL {
            let name = crate::tokens::exact_column(family);
            if let Some(arrays) = columns.get(name) {
                output_exact.push((family, decode_lengths(name, arrays, rows)?));
            }
        }
        let output_hash = match columns.get(crate::tokens::OUTPUT_HASH) {
            Some(arrays) => Some(decode_lengths(crate::tokens::OUTPUT_HASH, arrays, rows)?),
            None => None,
        };
        let mut input_exact = Vec::new();
        for family in Family::ALL {
            let name = crate::tokens::input_exact_column(family);
            if let Some(arrays) = columns.get(name) {
                input_exact.push((family, decode_lengths(name, arrays, rows)?));
            }
        }
        let input_hash = match columns.get(crate::tokens::INPUT_HASH) {
            Some(arrays) => Some(decode_lengths(crate::tokens::INPUT_HASH, arrays, rows)?),
            None => None,
        };
        let table = PartTable {
            input_exact,
            input_hash,
            output_utf16,
            output_bigram,
            output_exact,
            output_hash,
            parent_id: opt_str("parent_id")?,
            tool: opt_str("tool")?,
            input: opt_str("input")?,
            tool_target: opt_str(crate::target::TOOL_TARGET)?,
            output: opt_str("output")?,
            part_json: opt_str("part_json")?,
            part_id: opt_str("part_id")?,
            session_id,
            message_id,
            role,
            part_type,
            status,
            flags,
            sessions,
        };
        table.check_untyped_parts()?;
        Ok(table)
    }

    /// A row without a part type is an empty message (docs/schema.md): the
    /// message's only row, without a part id. Any other is a part whose type
    /// was lost, which the scans would otherwise skip silently.
    fn check_untyped_parts(&self) -> Result<()> {
        let rows = self.rows();
        let same_message = |a: usize, b: usize| {
            self.session_id.get(a) == self.session_id.get(b)
                && self.message_id.get(a) == self.message_id.get(b)
        };
        for row in memchr::memchr_iter(NULL_CODE, &self.part_type) {
            let alone = (row == 0 || !same_message(row - 1, row))
                && (row + 1 == rows || !same_message(row + 1, row));
            let has_id = self.part_id.as_ref().is_some_and(|c| c.get(row).is_some());
            if !alone || has_id {
                return Err(CoreError::NullValue {
                    what: match alone {
                        false => "part type of a row in a message with parts",
                        true => "part type of a row with a part id",
                    },
                    at: Location::column("part_type")
                        .row(row)
                        .session(self.session_id.get(row))
                        .message(self.message_id.get(row)),
                });
            }
        }
        Ok(())
    }

    pub fn rows(&self) -> usize {
        self.role.len()
    }

    /// The outputs' length units under `method`, counted once, when the
    /// table has them.
    #[inline]
    pub fn counted(&self, method: Method) -> Option<&Lengths<'a>> {
        match method {
            Method::Opencode => self.output_utf16.as_ref(),
            Method::CeilBytes => None,
            Method::Bigram { family, .. } => self
                .output_bigram
                .iter()
                .find(|(f, _)| *f == family)
                .map(|(_, lengths)| lengths),
            Method::Exact { family } => self
                .output_exact
                .iter()
                .find(|(f, _)| *f == family)
                .map(|(_, lengths)| lengths),
        }
    }

    /// Whether a count of the output at `row` still stands for its text: an
    /// exact count only where the text hashes as it did when counted (a
    /// table of counts without its texts has nothing to be stale against).
    #[inline]
    fn fresh(&self, row: usize, method: Method) -> bool {
        if !matches!(method, Method::Exact { .. }) {
            return true;
        }
        let Some(output) = self.output.as_ref() else {
            return true;
        };
        match self.output_hash.as_ref().map(|h| h.get(row)) {
            Some(hash) if hash != NO_LENGTH => {
                hash == crate::tokens::text_hash(output.get(row).unwrap_or("").as_bytes())
            }
            _ => false,
        }
    }

    /// The length units of the output at `row` under `method` (see
    /// `text_units`): from its counted column when that has the row, else
    /// measured from the text (0 when null).
    #[inline]
    pub fn output_units(&self, row: usize, method: Method) -> u64 {
        if let Some(len) = self.counted(method).map(|l| l.get(row)) {
            if len != NO_LENGTH && self.fresh(row, method) {
                return len;
            }
        }
        let text = self.output.as_ref().and_then(|c| c.get(row)).unwrap_or("");
        text_units(text.as_bytes(), method)
    }

    /// The exact tokens of the call arguments at `row` under `method`, when
    /// the table counted them (`input_tokens_<family>`) and the input still
    /// hashes as it did then; `None`: count the text.
    #[inline]
    pub fn input_counted(&self, row: usize, method: Method) -> Option<u64> {
        let Method::Exact { family } = method else {
            return None;
        };
        let counts = self.input_exact.iter().find(|(f, _)| *f == family)?;
        let (n, hash) = (counts.1.get(row), self.input_hash.as_ref()?.get(row));
        let text = self.input.as_ref()?.get(row)?;
        let fresh = n != NO_LENGTH
            && hash != NO_LENGTH
            && hash == crate::tokens::text_hash(text.as_bytes());
        fresh.then_some(n)
    }

    /// The output column's text at `row` ("" when null or not read).
    #[inline]
    pub fn output_text(&self, row: usize) -> &'a str {
        self.output.as_ref().and_then(|c| c.get(row)).unwrap_or("")
    }

    /// An error unless every output's length under `method` can be known:
    /// read without its outputs, a table has only the lengths it counted.
    /// `whole_messages`: the scan estimates messages, whose texts a method
    /// that is not additive (a family's table) reads joined, so it needs them.
    pub fn check_lengths(&self, method: Method, whole_messages: bool) -> Result<()> {
        if self.output.is_some() {
            return Ok(());
        }
        if self.counted(method).is_none() {
            return Err(CoreError::MissingColumn {
                column: "output",
                needed_by: "this estimate method: the table holds no counts made with it \
                            (a family's counts must come from the same table version)",
            });
        }
        if whole_messages && !method.additive() {
            return Err(CoreError::MissingColumn {
                column: "output",
                needed_by: "message estimates under a tokenizer family, which read the texts \
                            of a message joined (its counts serve prune only)",
            });
        }
        Ok(())
    }

    /// The estimate of the output at `row` alone (`output_units`, rounded).
    #[inline]
    pub fn output_tokens(&self, row: usize, method: Method) -> u64 {
        estimate_units(self.output_units(row, method), method)
    }

    fn at(&self, row: usize) -> Location {
        Location::default()
            .session(self.session_id.get(row))
            .row(row)
    }

    /// The messages of session `s`, validated: message rows contiguous, ids
    /// present, role and flags consistent within a message (and the parent
    /// within a summary message).
    pub fn messages(&self, s: usize) -> Result<Vec<Message>> {
        let mut out = Vec::new();
        self.messages_into(s, &mut out)?;
        Ok(out)
    }

    /// `messages` into `out` (cleared first): a scan over many sessions
    /// reuses one list per thread.
    pub fn messages_into<'t>(&'t self, s: usize, out: &mut Vec<Message>) -> Result<()> {
        out.clear();
        let range = self.sessions[s].clone();
        if range.len() == 1 && self.message_id.get(range.start).is_none() {
            return Ok(()); // a session without messages
        }
        // A few parts per message: a guess that spares most regrowth.
        out.reserve(range.len() / 4 + 1);
        // Message ids usually ascend (OpenCode's ids do), and then no id can
        // reappear: the set of seen ids is built only once they stop ascending.
        let mut seen: Option<HashSet<&'t str>> = None;
        let mut current: Option<&'t str> = None;
        // One call per run of rows with the same id, which is one message
        // unless a chunk boundary splits it.
        self.message_id.runs_in(range, |rows, id| {
            let row = rows.start;
            let id = id.ok_or_else(|| CoreError::NullValue {
                what: "message_id",
                at: self.at(row).with_column("message_id"),
            })?;
            let role = self.role[row];
            if role == NULL_CODE {
                return Err(CoreError::NullValue {
                    what: "role",
                    at: self.at(row).message(Some(id)).with_column("role"),
                });
            }
            let continues = current.is_some_and(|c| same_str(c, id));
            if !continues {
                let reappears = match (&mut seen, current) {
                    (Some(set), _) => !set.insert(id),
                    (None, Some(prev)) if str_le(id, prev) => {
                        let mut set: HashSet<&str> = out
                            .iter()
                            .filter_map(|m| self.message_id.get(m.rows.start))
                            .collect();
                        let dup = !set.insert(id);
                        seen = Some(set);
                        dup
                    }
                    (None, _) => false,
                };
                if reappears {
                    return Err(CoreError::NonContiguous {
                        what: "rows of a message are not contiguous: it reappears after another message"
                            .into(),
                        at: self.at(row).message(Some(id)).with_column("message_id"),
                    });
                }
                current = Some(id);
                out.push(Message {
                    rows: row..row,
                    role,
                });
            }
            let msg = out.last_mut().expect("current message exists");
            let first = msg.rows.start;
            // What `check_same_message` checks, over the whole run without a
            // branch per row: the same role and flags, in no summary message.
            let (role0, flags0) = (self.role[first], self.flags[first]);
            let odd = self.role[rows.clone()]
                .iter()
                .zip(&self.flags[rows.clone()])
                .fold(false, |odd, (&r, &f)| {
                    odd | (r != role0) | ((f ^ flags0) & MESSAGE_FLAGS != 0)
                });
            if odd || flags0 & flag::SUMMARY != 0 {
                for r in rows.clone().filter(|&r| r != first) {
                    if self.role[r] == NULL_CODE {
                        return Err(CoreError::NullValue {
                            what: "role",
                            at: self.at(r).message(Some(id)).with_column("role"),
                        });
                    }
                    self.check_same_message(first, r, role0, id)?;
                }
            }
            msg.rows.end = rows.end;
            Ok(())
        })
    }

    /// Row `row` continues the message that starts at `first`: message-level
    /// values must agree, or a scan would read whichever row it met first.
    fn check_same_message(&self, first: usize, row: usize, role: u8, id: &str) -> Result<()> {
        let inconsistent = |what: &str, column: &'static str| CoreError::InconsistentMessage {
            what: format!("rows of one message have different {what}"),
            at: self.at(row).message(Some(id)).with_column(column),
        };
        if self.role[row] != role {
            return Err(inconsistent("roles", "role"));
        }
        let diff = (self.flags[row] ^ self.flags[first]) & MESSAGE_FLAGS;
        for (bit, column) in [
            (flag::SUMMARY, "summary"),
            (flag::FINISHED, "finished"),
            (flag::ERROR, "error"),
        ] {
            if diff & bit != 0 {
                return Err(inconsistent(&format!("{column} values"), column));
            }
        }
        // The parent matters only on a summary (it names the pivot's marker);
        // checking it there keeps the per-row cost of this check to one byte.
        if let Some(parent) = self
            .parent_id
            .as_ref()
            .filter(|_| self.flags[first] & flag::SUMMARY != 0)
        {
            if parent.get(row) != parent.get(first) {
                return Err(inconsistent("parent ids", "parent_id"));
            }
        }
        Ok(())
    }
}

impl Location {
    fn with_column(mut self, column: &'static str) -> Self {
        self.column = Some(column);
        self
    }
}

/// Row ranges of the sessions, checking that each session's rows are contiguous.
fn session_ranges(session_id: &StrCol<'_>) -> Result<Vec<Range<usize>>> {
    let mut ranges: Vec<Range<usize>> = Vec::new();
    let mut seen: HashSet<&str> = HashSet::new();
    let mut prev: Option<(&str, Option<usize>)> = None;
    for (base, chunk) in session_id.chunks() {
        let mut prev_key_valid = false; // keys compare only within one chunk
        let mut i = 0;
        while i < chunk.len() {
            let row = base + i;
            let key = chunk.key(i);
            // Rows that share the row's dictionary key are the same session.
            let run = chunk.key_run_end(i);
            if let (true, Some((_, Some(pk))), Some(k)) = (prev_key_valid, prev, key) {
                if pk == k && k != usize::MAX {
                    ranges.last_mut().unwrap().end = base + run;
                    i = run;
                    continue;
                }
            }
            let id = chunk.value(i).ok_or_else(|| CoreError::NullValue {
                what: "session_id",
                at: Location::column("session_id").row(row),
            })?;
            prev_key_valid = true;
            i = run;
            if let Some((p, _)) = prev {
                if same_str(p, id) {
                    prev = Some((id, key));
                    ranges.last_mut().unwrap().end = base + run;
                    continue;
                }
            }
            if !seen.insert(id) {
                return Err(CoreError::NonContiguous {
                    what:
                        "rows of a session are not contiguous: it reappears after another session"
                            .into(),
                    at: Location::column("session_id").row(row).session(Some(id)),
                });
            }
            prev = Some((id, key));
            ranges.push(row..base + run);
        }
    }
    Ok(ranges)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::types::Int32Type;
    use arrow_array::{ArrayRef, DictionaryArray, Int8Array, RecordBatch, StringArray};

    use super::*;
    use crate::schema::Scan;
    use crate::testutil::*;

    fn table_err(batches: &[RecordBatch], scan: Scan) -> CoreError {
        match Columns::from_batches(batches, scan) {
            Err(e) => e,
            Ok(cols) => match PartTable::new(&cols) {
                Err(e) => e,
                Ok(t) => (0..t.sessions.len())
                    .find_map(|s| t.messages(s).err())
                    .expect("an error"),
            },
        }
    }

    fn replace(b: &RecordBatch, name: &str, col: ArrayRef) -> RecordBatch {
        let schema = b.schema();
        let cols: Vec<(&str, ArrayRef)> = schema
            .fields()
            .iter()
            .zip(b.columns())
            .map(|(f, c)| {
                (
                    f.name().as_str(),
                    if f.name() == name {
                        col.clone()
                    } else {
                        c.clone()
                    },
                )
            })
            .collect();
        RecordBatch::try_from_iter(cols).unwrap()
    }

    fn two_sessions() -> RecordBatch {
        batch(&[
            (
                "s1",
                vec![
                    user("u1", vec![text("a"), text("b")]),
                    assistant("a1", "u1", vec![]),
                ],
            ),
            ("s2", vec![user("u1", vec![text("c")])]),
        ])
    }

    #[test]
    fn sessions_and_messages_are_grouped() {
        let b = [two_sessions()];
        let cols = Columns::from_batches(&b, Scan::Pivot).unwrap();
        let t = PartTable::new(&cols).unwrap();
        assert_eq!(t.sessions, vec![0..3, 3..4]);
        let msgs = t.messages(0).unwrap();
        assert_eq!(
            msgs.iter().map(|m| m.rows.clone()).collect::<Vec<_>>(),
            vec![0..2, 2..3]
        );
        assert_eq!(t.part_type[2], NULL_CODE); // the empty assistant message
    }

    #[test]
    fn sessions_may_span_batches_and_use_dictionaries() {
        let b = two_sessions();
        let (first, second) = (b.slice(0, 2), b.slice(2, 2));
        let keys = Int32Array_from(&[0, 0]);
        let dict: ArrayRef = Arc::new(
            DictionaryArray::<Int32Type>::try_new(keys, Arc::new(StringArray::from(vec!["s1"])))
                .unwrap(),
        );
        let first = replace(&first, "session_id", dict);
        let cols_batches = [first, second];
        let cols = Columns::from_batches(&cols_batches, Scan::Pivot).unwrap();
        let t = PartTable::new(&cols).unwrap();
        assert_eq!(t.sessions, vec![0..3, 3..4]);
    }

    #[allow(non_snake_case)]
    fn Int32Array_from(v: &[i32]) -> arrow_array::Int32Array {
        arrow_array::Int32Array::from(v.to_vec())
    }

    #[test]
    fn non_contiguous_session_is_reported_with_its_row() {
        let b = batch(&[
            ("s1", vec![user("u", vec![])]),
            ("s2", vec![user("u", vec![])]),
            ("s1", vec![user("v", vec![])]),
        ]);
        let err = table_err(&[b], Scan::Pivot);
        assert!(
            matches!(&err, CoreError::NonContiguous { at, .. } if at.row == Some(2) && at.session_id.as_deref() == Some("s1")),
            "{err}"
        );
    }

    #[test]
    fn non_contiguous_message_is_reported() {
        let b = batch(&[(
            "s",
            vec![user("u", vec![]), user("v", vec![]), user("u", vec![])],
        )]);
        let err = table_err(&[b], Scan::Pivot);
        assert!(
            matches!(&err, CoreError::NonContiguous { at, .. } if at.message_id.as_deref() == Some("u") && at.row == Some(2)),
            "{err}"
        );
    }

    #[test]
    fn missing_and_mistyped_columns() {
        let b = two_sessions();
        let without = b.project(&[0, 1, 2, 4]).unwrap();
        assert_eq!(
            table_err(&[without], Scan::Pivot),
            CoreError::MissingColumn {
                column: "parent_id",
                needed_by: "filter_pivot"
            }
        );
        let bad = replace(
            &b,
            "role",
            Arc::new(arrow_array::Int64Array::from(vec![0i64; 4])),
        );
        assert!(matches!(
            table_err(&[bad], Scan::Pivot),
            CoreError::ColumnType { column: "role", .. }
        ));
    }

    #[test]
    fn sessions_need_the_base_columns_only_and_check_every_other_present() {
        let b = batch(&[("s", vec![user("u", vec![tool("read", 4)])])]);
        let names: Vec<String> = b
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        let base: Vec<usize> = ["session_id", "message_id", "role", "part_type"]
            .iter()
            .map(|n| names.iter().position(|m| m == n).unwrap())
            .collect();
        let cols = Columns::from_batches(&[b.project(&base).unwrap()], Scan::Sessions).unwrap();
        assert!(PartTable::new(&cols).is_ok());
        let n = b.num_rows();
        let output = replace(
            &b,
            "output",
            Arc::new(arrow_array::Int32Array::from(vec![3; n])),
        );
        assert!(matches!(
            table_err(&[output], Scan::Sessions),
            CoreError::ColumnType {
                column: "output",
                ..
            }
        ));
        let status = replace(&b, "status", Arc::new(StringArray::from(vec!["weird"; n])));
        assert!(matches!(
            table_err(&[status], Scan::Sessions),
            CoreError::UnknownValue { what: "tool status", at, .. } if at.row == Some(0)
        ));
        let auto = RecordBatch::try_from_iter(
            b.schema()
                .fields()
                .iter()
                .map(|f| f.name().clone())
                .zip(b.columns().iter().cloned())
                .chain([(
                    "auto".to_string(),
                    Arc::new(StringArray::from(vec!["yes"; n])) as ArrayRef,
                )]),
        )
        .unwrap();
        assert!(matches!(
            table_err(&[auto], Scan::Sessions),
            CoreError::ColumnType { column: "auto", .. }
        ));
    }

    #[test]
    fn unknown_role_null_session_and_int_codes() {
        let b = two_sessions();
        let roles = replace(
            &b,
            "role",
            Arc::new(StringArray::from(vec!["user", "user", "robot", "user"])),
        );
        assert!(
            matches!(table_err(&[roles], Scan::Pivot), CoreError::UnknownValue { value, at, .. } if value == "robot" && at.row == Some(2))
        );
        let nulls = replace(
            &b,
            "session_id",
            Arc::new(StringArray::from(vec![
                Some("s1"),
                None,
                Some("s1"),
                Some("s2"),
            ])),
        );
        assert!(
            matches!(table_err(&[nulls], Scan::Pivot), CoreError::NullValue { what: "session_id", at } if at.row == Some(1))
        );
        let ints = replace(&b, "role", Arc::new(Int8Array::from(vec![0, 0, 1, 7])));
        assert!(matches!(
            table_err(&[ints], Scan::Pivot),
            CoreError::UnknownValue { what: "role", .. }
        ));
        let mixed = replace(&b, "role", Arc::new(Int8Array::from(vec![0, 1, 1, 0])));
        assert!(matches!(
            table_err(&[mixed], Scan::Pivot),
            CoreError::InconsistentMessage { .. }
        ));
    }

    #[test]
    fn rows_of_one_message_must_agree_on_message_fields() {
        let b = two_sessions(); // rows 0 and 1: both parts of message u1
        let flagged = replace(
            &b,
            "summary",
            Arc::new(arrow_array::BooleanArray::from(vec![
                false, true, false, false,
            ])),
        );
        assert!(matches!(
            table_err(&[flagged], Scan::Pivot),
            CoreError::InconsistentMessage { at, .. } if at.row == Some(1) && at.column == Some("summary")
        ));
        let summary_rows = replace(
            &b,
            "summary",
            Arc::new(arrow_array::BooleanArray::from(vec![
                true, true, false, false,
            ])),
        );
        let parents = replace(
            &summary_rows,
            "parent_id",
            Arc::new(StringArray::from(vec![None, Some("x"), Some("u1"), None])),
        );
        assert!(matches!(
            table_err(&[parents], Scan::Pivot),
            CoreError::InconsistentMessage { at, .. } if at.column == Some("parent_id")
        ));
    }

    #[test]
    fn descending_message_ids_still_catch_a_reappearing_message() {
        let ok = batch(&[(
            "s",
            vec![user("b", vec![]), user("a", vec![]), user("c", vec![])],
        )]);
        let cols = Columns::from_batches(std::slice::from_ref(&ok), Scan::Pivot).unwrap();
        assert_eq!(PartTable::new(&cols).unwrap().messages(0).unwrap().len(), 3);
        let bad = batch(&[(
            "s",
            vec![user("b", vec![]), user("a", vec![]), user("b", vec![])],
        )]);
        assert!(matches!(
            table_err(&[bad], Scan::Pivot),
            CoreError::NonContiguous { at, .. } if at.row == Some(2)
        ));
    }
}
