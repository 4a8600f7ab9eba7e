//! What a part's JSON (`part_json`) says of it beyond the columns: pinned
//! (never cleared or cut, kept past the pivot), ignored (not sent), a
//! text-protocol step's (sent as the agent sent it). Most parts never
//! mention the keys, so each question is one substring search first and a
//! parse only where the key is there.

use std::sync::LazyLock;

use memchr::memmem::Finder;

use crate::error::{CoreError, Location, Result};
use crate::table::PartTable;

/// The part's JSON (`part_json`), parsed; `None` when the column or value is absent.
pub fn part_json(
    table: &PartTable<'_>,
    row: usize,
) -> Result<Option<serde_json::Map<String, serde_json::Value>>> {
    let Some(text) = table.part_json.as_ref().and_then(|c| c.get(row)) else {
        return Ok(None);
    };
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(serde_json::Value::Object(map)) => Ok(Some(map)),
        Ok(_) => Err(bad_json(table, row, "is not a JSON object".into())),
        Err(e) => Err(bad_json(
            table,
            row,
            format!("is not valid JSON ({})", crate::jsontext::json_error(&e)),
        )),
    }
}

fn bad_json(table: &PartTable<'_>, row: usize, why: String) -> CoreError {
    let session = table.session_id.get(row);
    let message = table.message_id.get(row);
    CoreError::Format {
        what: format!(
            "part_json of row {row} (session {:?}, message {:?}) {why}",
            session.unwrap_or(""),
            message.unwrap_or("")
        ),
        at: Location::column("part_json")
            .row(row)
            .session(session)
            .message(message),
    }
}

/// A text part marked `ignored: true` is not sent.
pub fn ignored(table: &PartTable<'_>, row: usize) -> Result<bool> {
    json_flag(table, row, "ignored", &IGNORED)
}

static IGNORED: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new("\"ignored\""));

/// Whether the part at `row` may be `ignored` (its JSON mentions the key):
/// one substring search, no parse. A bound counts such a text in its upper
/// end only; any other text is sent.
pub fn may_be_ignored(table: &PartTable<'_>, row: usize) -> bool {
    mentions(table, row, &IGNORED)
}

/// Whether a part among `rows` may be `ignored`: `false` rules out every
/// one by one search over their JSON.
pub fn may_ignore(table: &PartTable<'_>, rows: std::ops::Range<usize>) -> bool {
    may_mention(table, rows, &IGNORED)
}

/// The part's JSON holds `quoted` (a key in quotes).
fn mentions(table: &PartTable<'_>, row: usize, quoted: &Finder<'_>) -> bool {
    table
        .part_json
        .as_ref()
        .and_then(|c| c.get(row))
        .is_some_and(|j| quoted.find(j.as_bytes()).is_some())
}

static PINNED: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new("\"pinned\""));

static OBSERVATION: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new("\"observation\""));

/// The tool part at `row` is a text-protocol step's (SWE-agent and
/// mini-swe-agent write the command in the reply and get its result back as
/// the next user turn): the readers keep that turn's record under the part's
/// `source.observation` (`is_observed` in formats/chat.py). Its call adds
/// nothing to the model input; its result is sent as a user message.
pub fn observed(table: &PartTable<'_>, row: usize) -> Result<bool> {
    if !mentions(table, row, &OBSERVATION) {
        return Ok(false);
    }
    let Some(part) = part_json(table, row)? else {
        return Ok(false);
    };
    // An OpenHands resolver record (`history` and `instruction`) is no
    // step's source (`source_of` in formats/source.py does not read it).
    Ok(match part.get("source") {
        Some(serde_json::Value::Object(source)) => {
            source.contains_key("observation")
                && !(source.contains_key("history") && source.contains_key("instruction"))
        }
        _ => false,
    })
}

/// Whether a tool part among `rows` may be a text-protocol step's
/// (`observed`): `false` rules out every one by one search over their JSON.
pub fn may_observe(table: &PartTable<'_>, rows: std::ops::Range<usize>) -> bool {
    may_mention(table, rows, &OBSERVATION)
}

static CALL_ID: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new("\"callID\""));

/// The provider's id of a tool call (`callID`), when its JSON gives a non-empty one.
pub fn call_id(table: &PartTable<'_>, row: usize) -> Result<Option<String>> {
    if !mentions(table, row, &CALL_ID) {
        return Ok(None);
    }
    Ok(part_json(table, row)?.and_then(|m| match m.get("callID") {
        Some(serde_json::Value::String(id)) if !id.is_empty() => Some(id.clone()),
        _ => None,
    }))
}

/// A part marked `pinned: true` is never cleared or cut by a policy.
#[inline]
pub fn pinned(table: &PartTable<'_>, row: usize) -> Result<bool> {
    // Asked of every counted output: without a part_json column, no call.
    if table.part_json.is_none() {
        return Ok(false);
    }
    json_flag(table, row, "pinned", &PINNED)
}

/// Whether a part among `rows` may be pinned: `false` rules out every one
/// by one search over their JSON bytes, so a scan asks `pinned` per row only
/// where this is `true` (pins are rare; a search per row cost a third of a
/// counted prune).
pub fn pins_possible(table: &PartTable<'_>, rows: std::ops::Range<usize>) -> bool {
    may_mention(table, rows, &PINNED)
}

/// Whether the JSON of a part among `rows` may hold `quoted` (`mentions`
/// for many rows at once: `false` is exact).
fn may_mention(table: &PartTable<'_>, rows: std::ops::Range<usize>, quoted: &Finder<'_>) -> bool {
    table
        .part_json
        .as_ref()
        .is_some_and(|c| c.may_hold(rows, quoted))
}

/// `key` is `true` in the part's JSON. Only a part_json that mentions the
/// key (`quoted`) is parsed, so most parts cost one substring search (a
/// searcher built once: `str::contains` set one up per call, per part).
fn json_flag(table: &PartTable<'_>, row: usize, key: &str, quoted: &Finder<'_>) -> Result<bool> {
    if !mentions(table, row, quoted) {
        return Ok(false);
    }
    Ok(part_json(table, row)?
        .and_then(|m| m.get(key).cloned())
        .is_some_and(|v| v == serde_json::Value::Bool(true)))
}
