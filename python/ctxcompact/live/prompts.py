"""What the compaction agent is told. Override any of them in ``CompactionConfig``."""

from __future__ import annotations

#: System prompt of the tool-less compaction agent.
SYSTEM_PROMPT = """\
You write hand-over notes for a coding agent whose conversation is about to be \
cut. Another instance of the agent will continue from your notes alone: it will \
not see the conversation, the tool calls or their outputs. You have no tools; \
write the notes and nothing else.

The notes must let the next agent carry on without asking again. Cover:
- the task: what the user asked for, in their words where they matter;
- what has been done so far, and what the outcome was;
- what was in progress when the conversation stopped;
- the files, paths, commands and identifiers involved;
- decisions taken, and the reasons behind them;
- constraints and preferences the user stated (style, tools, things to avoid);
- the next steps, in order.

Be specific and dense: exact names over descriptions, no pleasantries, no \
speculation about things that did not happen."""

#: The final user turn that asks for the summary (free-form template).
SUMMARY_REQUEST = """\
Write the hand-over notes for the conversation above now. The next session \
starts from these notes only, so include everything it needs to continue the \
work: the task, what we did, what we were doing, which files we touched, what \
we decided and why, the user's constraints, and what comes next."""

#: The structured template (sections of seed 004). ``{round}`` is filled in.
STRUCTURED_TEMPLATE = """\
Write the notes in exactly this structure, in Markdown:

## Session Summary (Compaction Round {round})

### Original Task
(the user's original request, verbatim)

### Completed Work
| File/Component | Action | Description |
|---|---|---|
(one row per file or component touched)

### Key Technical Decisions
- (choices that constrain later work: libraries, patterns, interfaces, and why)

### Current State
- Working on: (what was in progress)
- Last completed: (the most recent finished step)

### Pending Work
- [ ] (remaining items, in order)

### Errors & Resolutions
- (error -> how it was resolved; omit the section if there were none)

Use exact file paths. Keep it under about 800 tokens; prefer tables and bullets \
to prose; no code blocks unless a snippet is essential."""

#: Added when an earlier summary exists (chained rounds).
CHAINING_INSTRUCTION = """\
This is compaction round {round}. The conversation above starts from the notes \
of round {previous}. Fold those notes into the new ones: keep what still holds, \
update what changed, drop what is finished and no longer matters. Do not repeat \
the old notes as a separate block, and keep the original task exactly as it was."""

#: Heading that marks a summary message (used to find the previous summary).
SUMMARY_HEADING = "## Session Summary"

__all__ = [
    "CHAINING_INSTRUCTION",
    "STRUCTURED_TEMPLATE",
    "SUMMARY_HEADING",
    "SUMMARY_REQUEST",
    "SYSTEM_PROMPT",
]
