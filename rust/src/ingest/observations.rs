//! Text-protocol agents (SWE-agent without function calling, mini-swe-agent):
//! a command written in the assistant's reply, its result sent back as the
//! next user turn. `pair` folds each such (step, observation) pair into one
//! completed tool part, as `pair_observations` in formats/chat.py does, so
//! prune can clear old observations and the writers put them back unchanged.

use serde_json::{Map, Value};

use super::export::{complete, object, str, tool_part};

/// Where a SWE-agent message keeps its keys that are not chat keys (its
/// `action`, `thought`, ...): `chat.rs` nests them there as it reads.
pub const SWE_AGENT_KEY: &str = "swe_agent";

/// ASCII whitespace, as both implementations split a SWE-agent action.
const WS: &[char] = &[' ', '\t', '\n', '\r', '\u{b}', '\u{c}'];

/// What a step ran: `(tool, command)`.
pub type Command = fn(&Value) -> Option<(String, String)>;

/// A SWE-agent step: its `action` field; the tool is the action's first word.
pub fn swe_agent_command(message: &Value) -> Option<(String, String)> {
    let action = message["info"]["source"][SWE_AGENT_KEY]["action"].as_str()?;
    let words = action.trim_matches(WS);
    let tool = words.split(WS).next().filter(|t| !t.is_empty())?;
    Some((tool.to_owned(), action.to_owned()))
}

/// A mini-swe-agent step: the first ```` ```mswea_bash_command ```` (or
/// ```` ```bash ````) block of its first text part that has one.
pub fn mini_swe_agent_command(message: &Value) -> Option<(String, String)> {
    let parts = message["parts"].as_array()?;
    parts
        .iter()
        .filter(|p| p["type"] == "text")
        .filter_map(|p| p["text"].as_str().filter(|t| !t.is_empty()))
        .find_map(command_block)
        .map(|c| ("bash".to_owned(), c.to_owned()))
}

/// The body of the first fenced command block of `text`.
fn command_block(text: &str) -> Option<&str> {
    let mut from = 0;
    while let Some(at) = text[from..].find("```") {
        let open = from + at + 3;
        from = open;
        let rest = &text[open..];
        let Some(name) = ["mswea_bash_command", "bash"]
            .iter()
            .find(|n| rest.starts_with(**n))
        else {
            continue;
        };
        let after = rest[name.len()..].trim_start_matches([' ', '\t']);
        let Some(body) = after.strip_prefix('\n') else {
            continue;
        };
        let end = body.find("```")?;
        let command = &body[..end];
        return Some(command.strip_suffix('\n').unwrap_or(command));
    }
    None
}

/// The text of a user turn that can be a step's observation: one plain text
/// part, and not an orphaned tool result.
fn observation(message: &Value) -> Option<&str> {
    let info = &message["info"];
    if info["role"] != "user" || info["source"].get("role").is_some() {
        return None;
    }
    let [part] = message["parts"].as_array()?.as_slice() else {
        return None;
    };
    let plain = part
        .as_object()?
        .keys()
        .all(|k| matches!(k.as_str(), "id" | "type" | "text"));
    if part["type"] != "text" || !plain {
        return None;
    }
    Some(part["text"].as_str().unwrap_or(""))
}

/// Fold every answered text-protocol step of `session` (`{"info",
/// "messages"}`) into a completed tool part.
pub fn pair(session: &mut Value, command: Command) {
    let Some(Value::Array(messages)) = session.get_mut("messages") else {
        return;
    };
    let mut out: Vec<Value> = Vec::with_capacity(messages.len());
    let mut rest = std::mem::take(messages).into_iter().peekable();
    while let Some(mut message) = rest.next() {
        let step = message["info"]["role"] == "assistant"
            && message["parts"]
                .as_array()
                .is_some_and(|ps| ps.iter().all(|p| p["type"] != "tool"));
        let found = if step { command(&message) } else { None };
        let answer = rest.peek().and_then(observation).map(str::to_owned);
        let (Some((tool, line)), Some(output)) = (found, answer) else {
            out.push(message);
            continue;
        };
        let answered = rest.next().expect("peeked above");
        let kept = match &answered["info"]["source"] {
            Value::Object(source) => source.clone(),
            _ => Map::new(),
        };
        let mid = message["info"]["id"].as_str().unwrap_or("").to_owned();
        let mut part = tool_part(
            format!("{mid}-t00"),
            str(format!("{mid}-action")),
            str(tool),
            object([("command", str(line))]),
            Some(object([("observation", Value::Object(kept))])),
        );
        complete(&mut part, false, output);
        if let Some(Value::Array(parts)) = message.get_mut("parts") {
            parts.push(part);
        } else {
            message["parts"] = Value::Array(vec![part]);
        }
        out.push(message);
    }
    *messages = out;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_blocks_like_the_python_pattern() {
        assert_eq!(command_block("a\n```bash\nls -la\n```"), Some("ls -la"));
        assert_eq!(
            command_block("```mswea_bash_command \t\necho 1\n```"),
            Some("echo 1")
        );
        assert_eq!(command_block("```bash\n```"), Some(""));
        assert_eq!(command_block("```bash\nx```"), Some("x"));
        // no newline after the name: that fence is skipped, the next one counts
        assert_eq!(command_block("```bashx\n``` ```bash\nok\n```"), Some("ok"));
        assert_eq!(command_block("```python\nx\n```"), None);
        assert_eq!(command_block("```bash\nnever closed"), None);
    }

    #[test]
    fn swe_agent_tool_is_the_first_word() {
        let m = serde_json::json!({"info": {"source": {"swe_agent": {"action": "  open a.py\n"}}}});
        assert_eq!(
            swe_agent_command(&m),
            Some(("open".into(), "  open a.py\n".into()))
        );
        let blank = serde_json::json!({"info": {"source": {"swe_agent": {"action": " \n"}}}});
        assert_eq!(swe_agent_command(&blank), None);
    }
}
