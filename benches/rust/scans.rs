//! Criterion benchmarks of the pure-Rust scans on a generated transcript
//! (run: `cargo bench`). The Python-side comparison with the reference
//! implementation lives in benches/test_scans.py.

use std::sync::Arc;

use arrow_array::{ArrayRef, BooleanArray, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use ctxcompact::estimate::{estimate_array, Method};
use ctxcompact::pivot::pivot_starts;
use ctxcompact::prune::{prune, PruneConfig, TurnUnit};
use ctxcompact::target::{tool_target_array, TOOL_TARGET};
use ctxcompact::{Columns, PartTable, Scan};

/// `sessions` sessions of 50 turns: user text, assistant with 3 tool parts.
fn transcript(sessions: usize) -> RecordBatch {
    let mut cols: [Vec<Option<String>>; 9] = Default::default();
    let (mut summary, mut compacted) = (Vec::new(), Vec::new());
    for s in 0..sessions {
        for t in 0..50 {
            let user = format!("m{t:04}u");
            let push = |cols: &mut [Vec<Option<String>>; 9], vals: [Option<String>; 9]| {
                for (c, v) in cols.iter_mut().zip(vals) {
                    c.push(v);
                }
            };
            let sid = Some(format!("s{s}"));
            push(
                &mut cols,
                [
                    sid.clone(),
                    Some(user.clone()),
                    Some("user".into()),
                    None,
                    Some("text".into()),
                    None,
                    None,
                    Some("please continue".into()),
                    None,
                ],
            );
            summary.push(false);
            compacted.push(None);
            for p in 0..3 {
                push(
                    &mut cols,
                    [
                        sid.clone(),
                        Some(format!("m{t:04}a")),
                        Some("assistant".into()),
                        Some(user.clone()),
                        Some("tool".into()),
                        Some("read".into()),
                        Some("completed".into()),
                        Some("x".repeat(2000 + 97 * p)),
                        // a file read again every few turns: supersession has work to do
                        Some(format!(
                            "{{\"filePath\":\"src/mod_{}.rs\"}}",
                            (t * 3 + p) % 40
                        )),
                    ],
                );
                summary.push(false);
                compacted.push(None);
            }
        }
    }
    let names = [
        "session_id",
        "message_id",
        "role",
        "parent_id",
        "part_type",
        "tool",
        "status",
        "output",
        "input",
    ];
    let mut fields: Vec<(&str, ArrayRef)> = names
        .iter()
        .zip(cols)
        .map(|(n, c)| (*n, Arc::new(StringArray::from(c)) as ArrayRef))
        .collect();
    let n = summary.len();
    fields.push(("summary", Arc::new(BooleanArray::from(summary))));
    fields.push(("finished", Arc::new(BooleanArray::from(vec![true; n]))));
    fields.push(("error", Arc::new(BooleanArray::from(vec![false; n]))));
    fields.push(("compacted_at", Arc::new(Int64Array::from(compacted))));
    RecordBatch::try_from_iter(fields).unwrap()
}

fn bench(c: &mut Criterion) {
    let batch = transcript(1_000); // 200k parts, ~300 MB of output text
    let rows = batch.num_rows() as u64;
    let mut group = c.benchmark_group("scans");
    group.sample_size(10).throughput(Throughput::Elements(rows));
    let batches = [batch];
    group.bench_function("prune", |b| {
        b.iter(|| {
            let cols = Columns::from_batches(&batches, Scan::Prune).unwrap();
            let t = PartTable::new(&cols).unwrap();
            black_box(prune(&t, &PruneConfig::default()).unwrap())
        })
    });
    // The policy options against OpenCode's rule (issue 12, part 7).
    let policies = [
        (
            "prune_swe_agent",
            PruneConfig {
                turn: TurnUnit::Step,
                protect_turns: 0,
                protect: 0,
                minimum: 0,
                keep_recent: Some(5),
                protected_tools: vec![],
                ..PruneConfig::default()
            },
        ),
        (
            "prune_supersede_only",
            PruneConfig {
                supersede: true,
                ..PruneConfig::default()
            },
        ),
        (
            "prune_per_tool_only",
            PruneConfig {
                turn: TurnUnit::Step,
                protect_turns: 3,
                protect: 0,
                minimum: 0,
                keep_recent: Some(2),
                keep_recent_per_tool: true,
                min_output_tokens: 16,
                ..PruneConfig::default()
            },
        ),
        // Every session here holds about 80k tokens: below 100k none is
        // walked (the decision alone), above 50k every one is (the worst case).
        (
            "prune_trigger",
            PruneConfig {
                trigger: 100_000,
                ..PruneConfig::default()
            },
        ),
        (
            "prune_trigger_all_above",
            PruneConfig {
                trigger: 50_000,
                ..PruneConfig::default()
            },
        ),
        (
            "prune_supersede_per_tool",
            PruneConfig {
                turn: TurnUnit::Step,
                protect_turns: 3,
                protect: 0,
                minimum: 0,
                keep_recent: Some(2),
                keep_recent_per_tool: true,
                supersede: true,
                min_output_tokens: 16,
                ..PruneConfig::default()
            },
        ),
    ];
    for (name, config) in &policies {
        group.bench_function(*name, |b| {
            b.iter(|| {
                let cols = Columns::from_batches(&batches, config.scan()).unwrap();
                let t = PartTable::new(&cols).unwrap();
                black_box(prune(&t, config).unwrap())
            })
        });
    }
    // The two supersession policies again with each call's target worked
    // out once (`tool_target`, as the library's tables carry it).
    let targeted = {
        let b = &batches[0];
        let column = |name| b.column_by_name(name).unwrap().clone();
        let targets = tool_target_array(&column("tool"), &column("input")).unwrap();
        let mut fields: Vec<_> = b.schema().fields().iter().cloned().collect();
        fields.push(Arc::new(Field::new(TOOL_TARGET, DataType::LargeUtf8, true)));
        let mut columns = b.columns().to_vec();
        columns.push(Arc::new(targets));
        [RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap()]
    };
    for (name, config) in policies.iter().filter(|(_, c)| c.supersede) {
        group.bench_function(format!("{name}_targets"), |b| {
            b.iter(|| {
                let cols = Columns::from_batches(&targeted, config.scan()).unwrap();
                let t = PartTable::new(&cols).unwrap();
                black_box(prune(&t, config).unwrap())
            })
        });
    }
    group.bench_function("pivot", |b| {
        b.iter(|| {
            let cols = Columns::from_batches(&batches, Scan::Pivot).unwrap();
            let t = PartTable::new(&cols).unwrap();
            black_box(pivot_starts(&t).unwrap())
        })
    });
    let output = batches[0].column_by_name("output").unwrap().clone();
    group.bench_function("estimate_output", |b| {
        b.iter(|| black_box(estimate_array(&output, Method::Opencode).unwrap()))
    });
    group.finish();
}

/// Real text of this repository (Rust, Markdown, prose) in messages of about
/// 700 bytes, repeated to ~20 MB: what the estimates read in a transcript.
fn repository_texts() -> ArrayRef {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut text = String::new();
    for dir in ["rust/src", "rust/src/ingest", "docs"] {
        let mut files: Vec<_> = std::fs::read_dir(root.join(dir))
            .unwrap()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_file())
            .collect();
        files.sort();
        for file in files {
            text += &std::fs::read_to_string(file).unwrap_or_default();
        }
    }
    text += &std::fs::read_to_string(root.join("README.md")).unwrap();
    let mut messages = Vec::new();
    let mut current = String::new();
    for line in text.split_inclusive('\n') {
        current.push_str(line);
        if current.len() >= 700 {
            messages.push(std::mem::take(&mut current));
        }
    }
    let repeat = 20_000_000 / messages.iter().map(String::len).sum::<usize>() + 1;
    let all: Vec<&str> = (0..repeat)
        .flat_map(|_| messages.iter().map(String::as_str))
        .collect();
    Arc::new(StringArray::from(all))
}

/// The byte-level estimates per byte of text: chars / 4 against a family's
/// fitted table (issue 16: >= 1.5 GB/s per core).
fn bench_estimates(c: &mut Criterion) {
    let texts = repository_texts();
    let bytes: usize = texts
        .as_any()
        .downcast_ref::<StringArray>()
        .unwrap()
        .value_data()
        .len();
    let mut group = c.benchmark_group("estimate");
    group
        .sample_size(20)
        .throughput(Throughput::Bytes(bytes as u64));
    for name in ["opencode", "o200k", "o200k-conservative", "deepseek"] {
        let method: Method = name.parse().unwrap();
        group.bench_function(name, |b| {
            b.iter(|| black_box(estimate_array(&texts, method).unwrap()))
        });
    }
    group.finish();
}

criterion_group!(benches, bench, bench_estimates);
criterion_main!(benches);
