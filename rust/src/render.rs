//! How a policy renders tool parts in the model input, without changing what
//! is stored: a cleared output's placeholder (OpenCode's constant, or one that
//! names the tool, its target, the size and the part id so the agent can run
//! the call again or recall it), a cleared call's arguments, and an oversized
//! output cut to its head and tail.
//!
//! The model input (`view.rs`) and the estimates (`messages.rs`) call these
//! same functions, so what is sent and what is estimated cannot drift apart.

use crate::target::Target;

/// Protocol strings other runtimes read; they are not prose.
pub const CLEARED_TOOL_OUTPUT: &str = "[Old tool result content cleared]";
pub const INTERRUPTED_TOOL: &str = "[Tool execution was interrupted]";
pub const COMPACTION_QUESTION: &str = "What did we do so far?";

/// Arguments a cleared call is sent with when `clear_inputs` is set.
pub const CLEARED_INPUT: &str = "{}";

/// A cleared call's target is cut to this many characters in its placeholder.
const TARGET_CHARS: usize = 80;

/// The rendering options of a policy. The default is OpenCode's view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Render {
    /// Send a cleared call's arguments as `{}` (Anthropic's `clear_tool_inputs`).
    pub clear_inputs: bool,
    /// Send an output of more than 4 x N characters as its first and last
    /// 2 x N characters around a marker (N = a token budget, ~N tokens sent).
    pub truncate_output: Option<u64>,
    /// A cleared output's placeholder says what it was (`describe`).
    pub describe: bool,
    /// The newest N assistant messages send their reasoning
    /// (`reasoning_content`); older reasoning is cleared. 0: never sent.
    pub keep_thinking: u32,
}

impl Render {
    /// Per message (`assistant`: is it an assistant message, oldest first),
    /// whether it sends its reasoning: the newest `keep_thinking` assistant
    /// messages do.
    pub fn thinking(&self, assistant: &[bool]) -> Vec<bool> {
        let mut newer = assistant.iter().filter(|&&a| a).count();
        assistant
            .iter()
            .map(|&a| {
                newer -= usize::from(a);
                a && (newer as u64) < u64::from(self.keep_thinking)
            })
            .collect()
    }
}

/// The target as a placeholder shows it: its first line, at most 80 characters.
fn short(target: &str) -> String {
    let line = target.split('\n').next().unwrap_or("");
    let line = line.strip_suffix('\r').unwrap_or(line);
    let mut out: String = line.chars().take(TARGET_CHARS).collect();
    if out != target {
        out.push_str("...");
    }
    out
}

/// The placeholder of a cleared output. OpenCode's constant unless `describe`:
/// then it names the tool, its target, the output's size in characters and
/// the part id (`recall` in the stores gives the text back).
pub fn cleared(
    describe: bool,
    tool: &str,
    input: Option<&str>,
    output: &str,
    part_id: &str,
) -> String {
    if !describe {
        return CLEARED_TOOL_OUTPUT.to_owned();
    }
    // A text-protocol action's target is its command line, which starts with
    // the tool's name ("create x.py"): shown once, not "create create x.py".
    let call = match Target::of(input).map(|t| short(t.text())) {
        Some(line) if line.strip_prefix(tool).is_some_and(|r| r.starts_with(' ')) => line,
        Some(line) => format!("{tool} {line}"),
        None => tool.to_owned(),
    };
    let size = output.chars().count();
    format!(
        "[Old tool result content cleared: {call} returned {size} characters; \
         call the tool again, or recall part {part_id}, to see it]"
    )
}

/// An output cut to its head and tail, or `None` when it is within the budget
/// or the cut would not be longer than its marker: (head, marker, tail).
pub fn truncated(output: &str, budget: u64) -> Option<(&str, String, &str)> {
    let keep = usize::try_from(budget.saturating_mul(2)).unwrap_or(usize::MAX);
    let chars = output.chars().count();
    if chars <= keep.saturating_mul(2) {
        return None;
    }
    let cut = chars - 2 * keep;
    let marker = marker(cut);
    if cut <= marker.len() {
        return None; // the marker would cost as much as what it replaces
    }
    let head_end = output
        .char_indices()
        .nth(keep)
        .map_or(output.len(), |(i, _)| i);
    let tail_start = output[head_end..]
        .char_indices()
        .nth(cut)
        .map_or(output.len(), |(i, _)| head_end + i);
    Some((&output[..head_end], marker, &output[tail_start..]))
}

/// What stands where an output was cut.
pub fn marker(cut: usize) -> String {
    format!("\n\n[... {cut} characters cut ...]\n\n")
}

/// `truncated` joined into one string (the Python view's call).
pub fn truncate(output: &str, budget: u64) -> String {
    match truncated(output, budget) {
        Some((head, marker, tail)) => format!("{head}{marker}{tail}"),
        None => output.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_placeholder_is_opencodes() {
        assert_eq!(cleared(false, "read", None, "x", "p"), CLEARED_TOOL_OUTPUT);
    }

    #[test]
    fn a_described_placeholder_names_tool_target_size_and_part() {
        let got = cleared(
            true,
            "read",
            Some(r#"{"filePath":"src/a.py"}"#),
            "héllo",
            "prt_1",
        );
        assert_eq!(
            got,
            "[Old tool result content cleared: read src/a.py returned 5 characters; \
             call the tool again, or recall part prt_1, to see it]"
        );
        let long = format!("{{\"command\":\"{}\\nsecond line\"}}", "x".repeat(100));
        let got = cleared(true, "bash", Some(&long), "", "p");
        assert!(got.contains(&format!(" {}... returned 0", "x".repeat(80))));
        let got = cleared(true, "bash", Some("not json"), "", "p");
        assert!(got.starts_with("[Old tool result content cleared: bash returned 0"));
        // a text-protocol action's command line names its tool: said once
        let action = r#"{"command":"create reproduce_bug.py"}"#;
        let got = cleared(true, "create", Some(action), "", "p");
        assert!(
            got.starts_with("[Old tool result content cleared: create reproduce_bug.py returned")
        );
        let got = cleared(true, "creates", Some(action), "", "p");
        assert!(got.contains(": creates create reproduce_bug.py returned"));
    }

    #[test]
    fn truncation_keeps_head_and_tail_and_counts_the_cut() {
        // budget 2 tokens: 4 chars each side
        assert_eq!(truncate("abcdefgh", 2), "abcdefgh");
        let long = format!("abcd{}ghij", "é".repeat(40));
        assert_eq!(
            truncate(&long, 2),
            "abcd\n\n[... 40 characters cut ...]\n\nghij"
        );
        assert_eq!(truncate("", 0), "");
        // a cut no longer than its marker (31 characters here) is not made
        let short = "x".repeat(31);
        assert_eq!(truncate(&short, 0), short);
        assert_eq!(
            truncate(&"x".repeat(32), 0),
            "\n\n[... 32 characters cut ...]\n\n"
        );
    }
}
