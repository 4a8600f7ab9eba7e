//! The fast paths against the serde_json paths (docs/architecture.md, "one
//! reader per format"): on every input where a fast path answers, its rows
//! and what it says of each line are the serde_json path's, byte for byte.
//! Inputs: the sample files of `../shared/data` beside the checkout (read
//! there, never copied; without it, the repository's fixture alone) and lines
//! generated from them and from a seeded generator, many of which the fast
//! paths must decline (the test checks that both outcomes happen).

use serde_json::{json, Map, Value};

use super::claude_code::{read_fast, read_slow};
use super::claude_file::{Carry, FileOut};
use super::lines::{emit, parse, split_from};
use super::rows::Rows;
use super::types::{Format, Source};
use super::{chat, fast, fast_chat, opencode};

/// `../shared/data` beside the checkout, if it is there.
fn shared_data() -> Option<std::path::PathBuf> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data");
    dir.is_dir().then_some(dir)
}

fn files(dir: &std::path::Path, suffix: &str, out: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            files(&path, suffix, out);
        } else if path.to_string_lossy().ends_with(suffix) {
            out.push(path);
        }
    }
}

/// A small seeded generator (xorshift), so a failure names its input.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }

    fn pick<'v, T>(&mut self, items: &'v [T]) -> &'v T {
        &items[self.below(items.len())]
    }
}

/// What both paths agree on, or the count of lines each outcome had.
#[derive(Default, Debug)]
struct Tally {
    fast: usize,
    declined: usize,
}

fn chat_line_agrees(text: &str, tally: &mut Tally) {
    let (mut rows, mut buf) = (Rows::default(), String::new());
    let Some(got) = fast_chat::chat_line(text, "file", 7, false, &mut rows, &mut buf) else {
        assert!(rows.is_empty(), "a declined line left rows: {text}");
        tally.declined += 1;
        return;
    };
    let mut want = Rows::default();
    let value = parse(text.as_bytes()).unwrap_or_else(|p| panic!("{p:?}: {text}"));
    let session = chat::line(value, "file:7").unwrap_or_else(|p| panic!("{p:?}: {text}"));
    let mapped = emit(&[session], &mut want);
    assert_eq!(vec![got], mapped.sessions, "{text}");
    assert_eq!(rows.finish(), want.finish(), "{text}");
    tally.fast += 1;
}

fn opencode_line_agrees(text: &str, tally: &mut Tally) {
    let (mut rows, mut buf) = (Rows::default(), String::new());
    let Some(got) = fast::opencode_line(text, &mut rows, &mut buf) else {
        assert!(rows.is_empty(), "a declined line left rows: {text}");
        tally.declined += 1;
        return;
    };
    let mut want = Rows::default();
    let value = parse(text.as_bytes()).unwrap_or_else(|p| panic!("{p:?}: {text}"));
    let session = opencode::session(value).unwrap_or_else(|p| panic!("{p:?}: {text}"));
    let mapped = emit(&[session], &mut want);
    assert_eq!(vec![got], mapped.sessions, "{text}");
    assert_eq!(rows.finish(), want.finish(), "{text}");
    tally.fast += 1;
}

type Outcome = (
    usize,
    std::ops::Range<usize>,
    Result<(String, std::ops::Range<usize>, bool), String>,
);

fn outcomes(out: &FileOut) -> Vec<Outcome> {
    let line = |l: &super::claude_file::Line| {
        let o = match &l.outcome {
            Ok(k) => Ok((k.session.clone(), k.rows.clone(), k.first)),
            Err(p) => Err(format!("{p:?}")),
        };
        (l.line, l.raw.clone(), o)
    };
    out.lines.iter().map(line).collect()
}

/// A Claude Code file in `windows` windows (cut at line ends), each read by
/// both paths; where the fast one declines, it goes on as the reader does
/// (the serde_json path reads that window, on its carry).
fn claude_file_agrees(text: &str, windows: usize, tally: &mut Tally) {
    let ends: Vec<usize> = (text.match_indices('\n').map(|(i, _)| i + 1)).collect();
    let mut cuts = vec![0];
    for w in 1..windows {
        if let Some(&end) = ends.get(ends.len() * w / windows) {
            cuts.push(end);
        }
    }
    cuts.push(text.len());
    cuts.dedup();
    let (mut fast_carry, mut slow_carry) = (Carry::new("cc".into()), Carry::new("cc".into()));
    fast_carry.windowed = cuts.len() > 2;
    slow_carry.windowed = fast_carry.windowed;
    let mut first_line = 1;
    for cut in cuts.windows(2) {
        let data = &text.as_bytes()[cut[0]..cut[1]];
        let source = Source::new("dir/cc.jsonl", data, Format::ClaudeCode);
        let mut chunks = Vec::new();
        split_from(0, data, 97, first_line, &mut chunks);
        first_line += data.iter().filter(|&&b| b == b'\n').count();
        let slow = read_slow(&source, &chunks, &mut slow_carry);
        match read_fast(data, &chunks, &mut fast_carry) {
            Some(fast) => {
                assert_eq!(outcomes(&fast), outcomes(&slow), "{text}");
                assert_eq!(fast.rows.finish(), slow.rows.finish(), "{text}");
                tally.fast += 1;
            }
            None => {
                read_slow(&source, &chunks, &mut fast_carry);
                tally.declined += 1;
            }
        }
    }
    assert_eq!(fast_carry.current, slow_carry.current, "{text}");
    assert_eq!(fast_carry.started, slow_carry.started, "{text}");
}

/// Real chat messages: tau-bench trajectories, SWE-agent and mini-swe-agent
/// histories (their texts and shapes, tool calls and all).
fn real_chats(data: &std::path::Path) -> Vec<Vec<Value>> {
    let mut paths = Vec::new();
    for suffix in [".traj", ".traj.json", "airline.json"] {
        files(&data.join("transcripts"), suffix, &mut paths);
    }
    let mut chats = Vec::new();
    for path in paths {
        let Ok(value) = serde_json::from_slice::<Value>(&std::fs::read(&path).unwrap()) else {
            continue;
        };
        let mut push = |v: &Value| {
            if let Some(messages) = v.as_array().filter(|m| !m.is_empty()) {
                chats.push(messages.clone());
            }
        };
        match &value {
            Value::Array(tasks) => tasks.iter().take(40).for_each(|t| push(&t["traj"])),
            v => {
                push(&v["history"]);
                push(&v["messages"]);
            }
        }
    }
    chats
}

/// A chat message of a generated line, made of `texts`.
fn chat_message(rng: &mut Rng, texts: &[String], calls: &mut Vec<Value>) -> Value {
    let body = Value::String(rng.pick(texts).clone());
    match rng.below(6) {
        0 => json!({"role": rng.pick(&["system", "developer", "user"]), "content": body}),
        1 | 2 => {
            let n = rng.below(3);
            let tool_calls: Vec<Value> = (0..n)
                .map(|_| {
                    let id = format!("c{}", rng.below(5));
                    calls.push(Value::String(id.clone()));
                    let arguments = match rng.below(8) {
                        0 => json!({"k": body.clone()}),
                        1 => json!("{\"a\": 1.50, \"b\": [true, null]}"),
                        2 => Value::Null,
                        3 => json!("not json"),
                        _ => Value::String(json!({"cmd": body.clone(), "n": 2}).to_string()),
                    };
                    let mut call = json!({"id": id, "type": "function",
                        "function": {"name": rng.pick(&[json!("bash"), json!("é"), Value::Null]).clone(), "arguments": arguments}});
                    match rng.below(6) {
                        0 => drop(call.as_object_mut().unwrap().remove("type")),
                        1 => call["type"] = json!("custom"),
                        2 => call["id"] = Value::Null,
                        3 => drop(call["function"].as_object_mut().unwrap().remove("name")),
                        _ => {}
                    }
                    call
                })
                .collect();
            let content = match rng.below(3) {
                0 => Value::Null,
                _ => body,
            };
            let mut m = json!({"role": "assistant", "content": content, "tool_calls": tool_calls});
            if rng.below(4) == 0 {
                m.as_object_mut().unwrap().remove("tool_calls");
            }
            m
        }
        _ => match calls.pop() {
            Some(id) if rng.below(5) > 0 => {
                json!({"role": "tool", "tool_call_id": id, "content": body, "name": "x"})
            }
            _ => json!({"role": "user", "content": body, "id": rng.pick(&["", "m-own"])}),
        },
    }
}

/// One of the shapes a chat line comes in: the bare list, or an object with
/// an id, a session id, or neither, and other keys.
fn chat_line(rng: &mut Rng, messages: Vec<Value>) -> String {
    let messages = Value::Array(messages);
    let line = match rng.below(5) {
        0 => messages,
        1 => json!({"id": "s1", "messages": messages, "meta": {"n": 1e5}}),
        2 => json!({"id": "", "session_id": "s2", "messages": messages}),
        3 => json!({"session_id": "s3", "messages": messages, "model": "m"}),
        _ => json!({"messages": messages}),
    };
    line.to_string()
}

/// A chat line changed in one place: content as parts, a numeric id, an
/// unknown role, a result dropped, repeated or orphaned, a `system` key, a
/// logged reply's `usage`.
fn mutate_chat(rng: &mut Rng, mut messages: Vec<Value>) -> Vec<Value> {
    if messages.is_empty() {
        return messages;
    }
    let i = rng.below(messages.len());
    match rng.below(8) {
        0 => messages[i]["content"] = json!([{"type": "text", "text": "parts"}]),
        1 => messages[i]["id"] = json!(3),
        2 => messages[i]["role"] = json!("robot"),
        3 => drop(messages.remove(i)),
        4 => messages.push(messages[i].clone()),
        5 => messages[i]["tool_call_id"] = json!("nope"),
        6 => messages[i]["usage"] = json!({"prompt_tokens": 12, "completion_tokens": 3}),
        _ => messages[i]["content"] = Value::Null,
    }
    messages
}

#[test]
fn chat_lines_read_alike_on_both_paths() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut tally = Tally::default();
    let real = shared_data().map_or_else(Vec::new, |d| real_chats(&d));
    let mut texts: Vec<String> = vec![
        "a\nb 数据".into(),
        "be \"brief\" \u{e9}😀".into(),
        "".into(),
    ];
    for chat in &real {
        chat_line_agrees(&chat_line(&mut rng, chat.clone()), &mut tally);
        let mutated = mutate_chat(&mut rng, chat.clone());
        chat_line_agrees(&chat_line(&mut rng, mutated), &mut tally);
        // a text of each (shortened at a char boundary) for the generated lines
        let text = chat
            .iter()
            .find_map(|m| m["content"].as_str())
            .unwrap_or("");
        texts.push(text.chars().take(200).collect());
    }
    for _ in 0..3000 {
        let mut calls = Vec::new();
        let n = rng.below(8);
        let messages = (0..n)
            .map(|_| chat_message(&mut rng, &texts, &mut calls))
            .collect();
        let messages = match rng.below(3) {
            0 => mutate_chat(&mut rng, messages),
            _ => messages,
        };
        chat_line_agrees(&chat_line(&mut rng, messages), &mut tally);
    }
    assert!(tally.fast > 1000 && tally.declined > 300, "{tally:?}");
}

/// A generated OpenCode session export: every part type, tool states of
/// every status, the fields the fast path checks with right and wrong types.
fn opencode_session(rng: &mut Rng, n: usize) -> Value {
    let texts = [
        json!("hi"),
        json!("é \"q\"\n数据"),
        json!(""),
        Value::Null,
        json!(5),
    ];
    let messages: Vec<Value> = (0..rng.below(5))
        .map(|i| {
            let mut info = Map::new();
            info.insert("id".into(), json!(format!("m{i}")));
            info.insert("role".into(), rng.pick(&[json!("user"), json!("assistant"), json!("system"), json!("tool")]).clone());
            for (key, values) in [
                ("parentID", vec![json!("m0"), Value::Null, json!(1)]),
                ("summary", vec![json!(true), json!(false), json!({"title": "t"})]),
                ("finish", vec![json!("stop"), Value::Null]),
                ("error", vec![json!({"name": "E"}), Value::Null]),
                ("time", vec![json!({"created": 1731000000000_u64})]),
            ] {
                if rng.below(3) == 0 {
                    info.insert(key.into(), rng.pick(&values).clone());
                }
            }
            let parts: Vec<Value> = (0..rng.below(4))
                .map(|j| {
                    let kind = *rng.pick(&["text", "reasoning", "tool", "compaction", "step-finish", "file"]);
                    let mut part = json!({"id": format!("p{i}{j}"), "type": kind});
                    match kind {
                        "tool" => {
                            let status = *rng.pick(&["pending", "running", "completed", "error", "odd"]);
                            let mut state = json!({"status": status,
                                "input": rng.pick(&[json!({"path": "a.py", "n": 1.0e-5}), Value::Null, json!("x")]).clone(),
                                "output": rng.pick(&texts).clone(), "error": rng.pick(&texts).clone()});
                            if rng.below(2) == 0 {
                                state["time"] = rng.pick(&[json!({"start": 1, "compacted": 7}), json!({"compacted": 1.5}), json!({"compacted": "x"}), json!({"end": 2})]).clone();
                            }
                            part["tool"] = rng.pick(&[json!("bash"), Value::Null, json!(2)]).clone();
                            part["callID"] = json!("c");
                            part["state"] = if rng.below(8) == 0 { json!("done") } else { state };
                        }
                        "compaction" => part["auto"] = rng.pick(&[json!(true), json!(false), json!("x"), Value::Null]).clone(),
                        _ => part["text"] = rng.pick(&texts).clone(),
                    }
                    if rng.below(6) == 0 {
                        part.as_object_mut().unwrap().remove("id");
                    }
                    part
                })
                .collect();
            let mut message = json!({"info": info, "parts": parts});
            if rng.below(10) == 0 {
                message.as_object_mut().unwrap().remove("parts");
            }
            message
        })
        .collect();
    json!({"info": {"id": format!("s{n}"), "title": "t", "n": [1, 2.50]}, "messages": messages})
}

#[test]
fn opencode_lines_read_alike_on_both_paths() {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut tally = Tally::default();
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/opencode_session.json"
    );
    let fixture: Value = serde_json::from_slice(&std::fs::read(fixture).unwrap()).unwrap();
    opencode_line_agrees(&fixture.to_string(), &mut tally);
    for n in 0..3000 {
        opencode_line_agrees(&opencode_session(&mut rng, n).to_string(), &mut tally);
    }
    assert!(tally.fast > 300 && tally.declined > 300, "{tally:?}");
}

/// A Claude Code file changed in one line: its session id dropped or made
/// empty, a uuid given again, a line repeated, dropped or not JSON.
fn mutate_claude(rng: &mut Rng, lines: &[&str]) -> String {
    let mut out: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    let i = rng.below(out.len());
    match (rng.below(6), serde_json::from_str::<Value>(&out[i])) {
        (0, Ok(mut v)) if v.is_object() => {
            v.as_object_mut().unwrap().remove("sessionId");
            out[i] = v.to_string();
        }
        (1, Ok(mut v)) if v.is_object() => {
            v["sessionId"] = json!(rng.pick(&["", "other"]));
            out[i] = v.to_string();
        }
        (2, Ok(mut v)) if v.is_object() => {
            v["uuid"] = json!("u-again");
            out[i] = v.to_string();
        }
        (3, _) => out.insert(i, out[i].clone()),
        (4, _) => drop(out.remove(i)),
        _ => out[i] = "{\"type\": \"user\", not json".into(),
    }
    out.join("\n") + "\n"
}

#[test]
fn claude_code_files_read_alike_on_both_paths() {
    let mut rng = Rng(0x5851_f42d_4c95_7f2d);
    let mut tally = Tally::default();
    let mut paths = Vec::new();
    if let Some(data) = shared_data() {
        files(&data.join("formats/claude-code"), ".jsonl", &mut paths);
    }
    let mut texts: Vec<String> = paths
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    texts.push(concat!(
        "{\"type\":\"summary\",\"summary\":\"t\"}\n",
        "{\"type\":\"user\",\"uuid\":\"u1\",\"sessionId\":\"s\",\"message\":{\"role\":\"user\",\"content\":\"ls\"}}\n",
        "{\"type\":\"assistant\",\"uuid\":\"a1\",\"sessionId\":\"s\",\"message\":{\"id\":\"msg\",\"role\":\"assistant\",",
        "\"content\":[{\"type\":\"tool_use\",\"id\":\"t1\",\"name\":\"Bash\",\"input\":{}}]}}\n",
        "{\"type\":\"user\",\"uuid\":\"r1\",\"sessionId\":\"s\",\"message\":{\"role\":\"user\",",
        "\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"t1\",\"content\":\"a\"}]}}\n",
        "{\"type\":\"system\",\"content\":\"compacted\",\"level\":\"info\"}\n",
    ).to_owned());
    for text in &texts {
        for windows in [1, 2, 3] {
            claude_file_agrees(text, windows, &mut tally);
        }
        let lines: Vec<&str> = text.lines().collect();
        for _ in 0..60 {
            claude_file_agrees(
                &mutate_claude(&mut rng, &lines),
                1 + rng.below(3),
                &mut tally,
            );
        }
    }
    assert!(tally.fast > 50 && tally.declined > 20, "{tally:?}");
}

/// `chat_line_agrees` for a chat list (`chat::chat_list`, Anthropic blocks read).
fn chat_list_agrees(text: &str, tally: &mut Tally) {
    let (mut rows, mut buf) = (Rows::default(), String::new());
    let Some(got) = fast_chat::chat_line(text, "file", 7, true, &mut rows, &mut buf) else {
        assert!(rows.is_empty(), "a declined line left rows: {text}");
        tally.declined += 1;
        return;
    };
    let mut want = Rows::default();
    let value = parse(text.as_bytes()).unwrap_or_else(|p| panic!("{p:?}: {text}"));
    let session = chat::chat_list(value, "file:7").unwrap_or_else(|p| panic!("{p:?}: {text}"));
    let mapped = emit(&[session], &mut want);
    assert_eq!(vec![got], mapped.sessions, "{text}");
    assert_eq!(rows.finish(), want.finish(), "{text}");
    tally.fast += 1;
}

/// A block of an Anthropic turn of `role`: every block type, with the
/// fields the fast path reads of the right types and, now and then, wrong.
fn anthropic_block(rng: &mut Rng, texts: &[String], role: &str, calls: &mut Vec<String>) -> Value {
    let text = Value::String(rng.pick(texts).clone());
    let odd = |rng: &mut Rng| {
        rng.pick(&[
            Value::Null,
            json!(5),
            json!(true),
            json!([]),
            json!({}),
            json!(""),
        ])
        .clone()
    };
    let mut block = match (role, rng.below(7)) {
        ("assistant", 0) => json!({"type": "thinking", "thinking": text, "signature": "sig"}),
        ("assistant", 1) => json!({"type": "redacted_thinking", "data": "opaque"}),
        ("assistant", 2 | 3) => {
            let id = format!("t{}", rng.below(6));
            calls.push(id.clone());
            let input = rng
                .pick(&[
                    json!({"path": text.clone(), "n": 1.50}),
                    json!({}),
                    Value::Null,
                ])
                .clone();
            json!({"type": "tool_use", "id": id, "name": rng.pick(&["read", "é"]), "input": input})
        }
        ("user", 0..=2) if !calls.is_empty() => {
            let id = if rng.below(6) == 0 {
                calls[rng.below(calls.len())].clone()
            } else {
                calls.remove(rng.below(calls.len()))
            };
            let content = match rng.below(4) {
                0 => Value::Null,
                1 => {
                    json!([{"type": "text", "text": text.clone()}, {"type": "text", "text": "b"}, {"type": "image"}])
                }
                _ => text.clone(),
            };
            let mut b = json!({"type": "tool_result", "tool_use_id": id, "content": content});
            if rng.below(3) == 0 {
                b["is_error"] = json!(rng.below(2) == 0);
            }
            b
        }
        (_, 4) => {
            let source = rng
                .pick(&[
                    json!({"type": "base64", "media_type": "image/png", "data": "iVBOR"}),
                    json!({"type": "base64", "data": "iVBOR"}),
                    json!({"type": "url", "url": "https://x/a.png"}),
                    json!({"type": "url", "media_type": ""}),
                    Value::Null,
                ])
                .clone();
            json!({"type": "image", "source": source})
        }
        (_, 5) => {
            json!({"type": "document", "source": {"type": "text", "data": text}, "title": "t"})
        }
        _ => json!({"type": "text", "text": text}),
    };
    match rng.below(14) {
        0 => block["cache_control"] = json!({"type": "ephemeral"}),
        1 => block["text"] = odd(rng),
        2 => block["input"] = odd(rng),
        3 => block["is_error"] = odd(rng),
        4 => block["thinking"] = odd(rng),
        5 => {
            block["type"] = rng
                .pick(&[
                    json!("tool_use"),
                    json!("tool_result"),
                    json!("image_url"),
                    json!(3),
                ])
                .clone()
        }
        6 => {
            block["source"] = rng
                .pick(&[
                    json!({"media_type": 3}),
                    json!("x"),
                    json!({"type": "base64", "data": 1}),
                ])
                .clone()
        }
        7 => block["tool_use_id"] = rng.pick(&[json!("nope"), json!(""), json!(1)]).clone(),
        8 => {
            block["content"] = rng
                .pick(&[json!([1]), json!([{"text": 2}]), json!({"a": 1}), json!(7)])
                .clone()
        }
        9 => block["id"] = odd(rng),
        _ => {}
    }
    block
}

/// A message of a chat list that may hold Anthropic blocks.
fn anthropic_message(rng: &mut Rng, texts: &[String], calls: &mut Vec<String>) -> Value {
    let role = *rng.pick(&[
        "user",
        "user",
        "assistant",
        "assistant",
        "system",
        "developer",
    ]);
    let text = Value::String(rng.pick(texts).clone());
    let content = match rng.below(6) {
        0 => text,
        1 if role != "user" => Value::Null,
        _ => {
            let n = 1 + rng.below(4);
            let blocks: Vec<Value> = (0..n)
                .map(|_| anthropic_block(rng, texts, role, calls))
                .collect();
            Value::Array(blocks)
        }
    };
    let mut m = json!({"role": role, "content": content});
    if role == "assistant" && rng.below(8) == 0 {
        let id = format!("t{}", rng.below(6));
        calls.push(id.clone());
        let kind = rng.pick(&["function", "custom"]);
        m["tool_calls"] = json!([{"id": id, "type": kind,
            "function": {"name": "bash", "arguments": "{\"cmd\": \"ls\"}"}}]);
    }
    if role == "user" && rng.below(8) == 0 && !calls.is_empty() {
        // an OpenAI tool message answering a call, as a list may mix them
        let id = calls.remove(rng.below(calls.len()));
        return json!({"role": "tool", "tool_call_id": id, "content": "out", "ctxcompact_at": 3});
    }
    if rng.below(20) == 0 {
        m["role"] = json!(rng.pick(&["tool", "robot"]));
    }
    m
}

#[test]
fn chat_lists_with_anthropic_blocks_read_alike_on_both_paths() {
    let mut rng = Rng(0x1405_7b7e_f767_814f);
    let mut tally = Tally::default();
    let mut texts: Vec<String> = vec![
        "a\nb 数据".into(),
        "be \"brief\" \u{e9}😀".into(),
        "".into(),
        "x".repeat(300),
    ];
    if let Some(data) = shared_data() {
        for chat in real_chats(&data).iter().take(50) {
            let text = chat.iter().find_map(|m| m["content"].as_str());
            texts.push(text.unwrap_or("").chars().take(200).collect());
        }
    }
    let mut fast_blocks = 0;
    for _ in 0..4000 {
        let mut calls = Vec::new();
        let n = rng.below(9);
        let messages: Vec<Value> = (0..n)
            .map(|_| anthropic_message(&mut rng, &texts, &mut calls))
            .collect();
        let blocks = messages.iter().any(|m| m["content"].is_array());
        let before = tally.fast;
        chat_list_agrees(&chat_line(&mut rng, messages), &mut tally);
        fast_blocks += usize::from(blocks && tally.fast > before);
    }
    assert!(
        fast_blocks > 500 && tally.declined > 500,
        "{tally:?}, {fast_blocks} with blocks"
    );
}
