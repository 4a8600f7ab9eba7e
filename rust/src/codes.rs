//! The small per-row codes of the part-row schema (docs/schema.md): roles,
//! part types, tool statuses, and the bits of the per-row flags byte.

pub mod role {
    pub const USER: u8 = 0;
    pub const ASSISTANT: u8 = 1;
    pub const SYSTEM: u8 = 2;
    pub const TOOL: u8 = 3;

    pub fn parse(s: &str) -> Option<u8> {
        Some(match s {
            "user" => USER,
            "assistant" => ASSISTANT,
            "system" => SYSTEM,
            "tool" => TOOL,
            _ => return None,
        })
    }
}

pub mod part_type {
    pub const TEXT: u8 = 0;
    pub const TOOL: u8 = 1;
    pub const COMPACTION: u8 = 2;
    pub const REASONING: u8 = 4;
    /// A part type this version does not know (kept so newer exports load).
    pub const OTHER: u8 = 127;

    pub const NAMES: [&str; 12] = [
        "text",
        "tool",
        "compaction",
        "file",
        "reasoning",
        "step-start",
        "step-finish",
        "subtask",
        "snapshot",
        "patch",
        "agent",
        "retry",
    ];

    pub fn parse(s: &str) -> Option<u8> {
        Some(
            NAMES
                .iter()
                .position(|n| *n == s)
                .map_or(OTHER, |i| i as u8),
        )
    }

    pub fn from_int(v: i8) -> Option<u8> {
        ((0..NAMES.len() as i8).contains(&v) || v == OTHER as i8).then_some(v as u8)
    }
}

pub mod status {
    pub const PENDING: u8 = 0;
    pub const RUNNING: u8 = 1;
    pub const COMPLETED: u8 = 2;
    pub const ERROR: u8 = 3;

    pub fn parse(s: &str) -> Option<u8> {
        Some(match s {
            "pending" => PENDING,
            "running" => RUNNING,
            "completed" => COMPLETED,
            "error" => ERROR,
            _ => return None,
        })
    }
}

pub(crate) fn small_int(max: i8) -> impl Fn(i8) -> Option<u8> {
    move |v| (0..=max).contains(&v).then_some(v as u8)
}

/// Bits of the per-row `flags` byte.
pub mod flag {
    pub const SUMMARY: u8 = 1;
    pub const FINISHED: u8 = 2;
    pub const ERROR: u8 = 4;
    pub const COMPACTED: u8 = 8;
}
