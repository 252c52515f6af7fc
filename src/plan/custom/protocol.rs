//! The strategy protocol: the nine operations a custom strategy implements, and the values
//! they exchange.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::SystemTime;

use crate::plan::model::{DiffEntry, DiffOp};

/// The names of the nine operations, in protocol order (what a
/// [`RegistryError::ProtocolMismatch`](super::RegistryError::ProtocolMismatch) names).
pub const OPERATIONS: [&str; 9] = [
    "create",
    "read",
    "write",
    "diff",
    "commit",
    "rollback",
    "checkpoint",
    "restore_checkpoint",
    "cleanup",
];

/// Which sandbox an operation is about: what the library tells the strategy.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SandboxRef {
    /// The sandbox's ULID (the library's; stable across restarts).
    pub sandbox_id: String,
    /// The plan that owns it.
    pub plan_id: String,
    /// The resource it isolates.
    pub resource_id: String,
    /// When it was created.
    #[serde(with = "crate::plan::model::unix_millis")]
    pub created_at: SystemTime,
    /// What the strategy's `create` returned, plus `original_path` (the resource) and
    /// `strategy` (the registered name), which the library sets.
    pub metadata: BTreeMap<String, String>,
}

/// A custom sandbox's changes, as its strategy reports them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DiffView {
    /// The sandbox.
    pub sandbox_id: String,
    /// One entry per changed path (the library sorts them by path).
    pub entries: Vec<DiffEntry>,
    /// A one-line summary (`2 added, 1 modified`, or the strategy's own words).
    pub summary: String,
}

impl DiffView {
    /// A view of `entries` with the summary counted from them.
    pub fn new(sandbox_id: &str, entries: Vec<DiffEntry>) -> DiffView {
        let summary = summarize(&entries);
        DiffView {
            sandbox_id: sandbox_id.to_string(),
            entries,
            summary,
        }
    }
}

/// `"<n> added, <n> modified, <n> deleted"` (only the non-zero counts; `no changes` when
/// empty).
pub fn summarize(entries: &[DiffEntry]) -> String {
    let parts: Vec<String> = [DiffOp::Added, DiffOp::Modified, DiffOp::Deleted]
        .into_iter()
        .filter_map(|op| {
            let n = entries.iter().filter(|e| e.operation == op).count();
            (n > 0).then(|| format!("{n} {}", op.name()))
        })
        .collect();
    if parts.is_empty() {
        "no changes".to_string()
    } else {
        parts.join(", ")
    }
}

/// What a strategy's operation reports when it fails: its own words. The library wraps it in
/// the plan error of the step (a failed `commit` is a
/// [`SandboxError::Commit`](crate::plan::SandboxError::Commit), …).
///
/// `unexpected` tells a failure the strategy anticipated (its own sandbox error: a conflict, a
/// refused lock) from one it did not (a bug, an exception of another kind): `commit_all`
/// returns a failed result for the first and raises
/// [`SandboxError::AtomicCommit`](crate::plan::SandboxError::AtomicCommit) for the second,
/// as the plan executors' documentation says.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct StrategyFailure {
    /// The strategy's words.
    pub message: String,
    /// Whether the failure is not a sandbox-level one (see the type's docs).
    pub unexpected: bool,
}

impl StrategyFailure {
    /// A sandbox-level failure: the strategy refused or could not do the operation.
    pub fn new(message: impl Into<String>) -> StrategyFailure {
        StrategyFailure {
            message: message.into(),
            unexpected: false,
        }
    }

    /// A failure that is not a sandbox-level one (an unanticipated exception).
    pub fn unexpected(message: impl Into<String>) -> StrategyFailure {
        StrategyFailure {
            message: message.into(),
            unexpected: true,
        }
    }
}

impl From<String> for StrategyFailure {
    fn from(s: String) -> Self {
        StrategyFailure::new(s)
    }
}

impl From<&str> for StrategyFailure {
    fn from(s: &str) -> Self {
        StrategyFailure::new(s)
    }
}

/// The result of one protocol operation.
pub type OpResult<T> = Result<T, StrategyFailure>;

/// A custom isolation strategy: the nine operations, each about one sandbox ([`SandboxRef`]).
///
/// The library runs the lifecycle (status checks, `state.json`, `commit_all`'s ordering and
/// compensation) and calls these only for steps the lifecycle allows, one operation of a
/// sandbox at a time. One instance may serve many sandboxes at once (from several threads):
/// tell them apart by [`SandboxRef::sandbox_id`]. Paths are resource-relative and
/// `/`-separated; the library has refused absolute paths and `..` before they arrive.
pub trait StrategyProtocol: Send + Sync {
    /// Makes the sandbox of `sandbox.resource_id` over `original` (Pending → Created).
    /// Returns metadata to keep with the sandbox (it comes back in every later
    /// [`SandboxRef::metadata`]).
    fn create(&self, sandbox: &SandboxRef, original: &Path) -> OpResult<BTreeMap<String, String>>;

    /// The content of `path` in the sandbox; `None` when it does not exist there.
    fn read(&self, sandbox: &SandboxRef, path: &str) -> OpResult<Option<Vec<u8>>>;

    /// Sets the content of `path` in the sandbox (never in the original).
    fn write(&self, sandbox: &SandboxRef, path: &str, data: &[u8]) -> OpResult<()>;

    /// The sandbox's changes against what it was made from.
    fn diff(&self, sandbox: &SandboxRef) -> OpResult<DiffView>;

    /// Brings the changes into the original; returns what names the commit (kept as the
    /// commit result's `commit_ref`), if anything does.
    fn commit(&self, sandbox: &SandboxRef, message: Option<&str>) -> OpResult<Option<String>>;

    /// `after_commit == false`: discards the sandbox's changes. `true`: undoes its commit in
    /// the original (`commit_all`'s compensation, or an explicit rollback after commit); the
    /// sandbox should keep its changes, so the plan may commit again.
    fn rollback(&self, sandbox: &SandboxRef, after_commit: bool) -> OpResult<()>;

    /// Records the sandbox's state now under `checkpoint_id`.
    fn checkpoint(&self, sandbox: &SandboxRef, checkpoint_id: &str) -> OpResult<()>;

    /// Makes the sandbox what it was at `checkpoint_id`.
    fn restore_checkpoint(&self, sandbox: &SandboxRef, checkpoint_id: &str) -> OpResult<()>;

    /// Removes everything the strategy made for the sandbox (its changes are discarded).
    fn cleanup(&self, sandbox: &SandboxRef) -> OpResult<()>;

    /// Whether [`StrategyProtocol::rollback`] after a commit works (`commit_all` commits the
    /// others last). Default: yes.
    fn is_rollbackable(&self) -> bool {
        true
    }
}
