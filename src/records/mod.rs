//! The JSON records: what `patchbox … --json` prints, and what the C++ and Python faces hand
//! back as the same documents, so a consumer (a TUI, an IDE plugin) reads one schema
//! whichever way it reaches the library.
//!
//! Every record is a plain serde struct built from the library's own types; the schema is
//! documented in `docs/json.md`. Stability: field names and their meanings do not change
//! within a [`SCHEMA_VERSION`]; new fields may be added, so readers ignore fields they do
//! not know. Paths are strings (lossily UTF-8); times are integers, milliseconds since the
//! Unix epoch (UTC), in fields named `*_ms`; an unknown value is `null`.
//!
//! - [`pending`]: pending patches, sessions and runs ([`PendingRecord`], [`SessionRecord`],
//!   [`PruneRecord`], [`RunRecord`]);
//! - [`apply`]: apply, partial apply and undo reports ([`ApplyRecord`], [`UndoRecord`],
//!   [`UndoEntryRecord`]);
//! - [`plan`]: plan sandboxes and their diffs ([`PlanRecord`], [`PlanDiffRecord`], built by
//!   [`plan_records`] and [`plan_diff_records`]); a plan's commit is reported by the
//!   library's own [`crate::plan::CommitResult`]s;
//! - [`checkpoint`]: plan checkpoints kept in an object store ([`CheckpointRecord`]).

pub mod apply;
pub mod checkpoint;
pub mod pending;
pub mod plan;

pub use apply::{ApplyRecord, ConflictRecord, FileResultRecord, UndoEntryRecord, UndoRecord};
pub use checkpoint::CheckpointRecord;
pub use pending::{pending_records, PendingRecord, PruneRecord, RunRecord, SessionRecord};
pub use plan::{plan_diff_records, plan_records, PlanDiffRecord, PlanRecord, PlanSandboxRecord};

/// The version of the JSON schema documented in `docs/json.md`. It changes only when a field
/// is removed or changes meaning; adding a field does not change it.
pub const SCHEMA_VERSION: u32 = 1;

/// A path as a JSON string: lossily UTF-8 (a name that is not UTF-8 gets U+FFFD).
pub(crate) fn path_str(p: &std::path::Path) -> String {
    p.to_string_lossy().into_owned()
}

/// Any record as pretty JSON text (two-space indent, a newline at the end), as the CLI
/// prints it.
///
/// ```
/// let text = patchbox::records::to_json(&vec![1, 2]);
/// assert_eq!(text, "[\n  1,\n  2\n]\n");
/// ```
pub fn to_json<T: serde::Serialize + ?Sized>(record: &T) -> String {
    // The records hold only strings, numbers, booleans and maps with string keys: they
    // always serialize.
    let mut s = serde_json::to_string_pretty(record).unwrap_or_else(|_| "null".into());
    s.push('\n');
    s
}
