//! ctxcompact core: token estimates, overflow detection, pruning and pivot
//! filtering over columnar agent transcripts (docs/schema.md).
//!
//! Pure Rust; the Python bindings live in `python.rs` behind the `python`
//! feature so `cargo test` and `cargo bench` need no interpreter.

pub mod bigram;
pub mod billing;
pub mod cache_aware;
pub mod calibrate;
pub mod chatlist;
pub mod codes;
pub mod columns;
pub mod compact;
pub mod error;
pub mod estimate;
pub mod ingest;
pub mod jsontext;
pub mod mark;
pub mod messages;
pub mod overflow;
pub mod parallel;
pub mod part_json;
pub mod pivot;
pub mod plan;
pub mod prune;
pub mod render;
pub mod replay;
pub mod retention;
pub mod schema;
pub mod select;
pub mod shapes;
pub mod table;
pub mod target;
pub mod tokens;
pub mod view;

#[cfg(feature = "python")]
mod python;

pub use error::{CoreError, Location, Result};
pub use estimate::{estimate, Method};
pub use schema::{Columns, Scan};
pub use table::PartTable;

#[cfg(test)]
mod testutil;
