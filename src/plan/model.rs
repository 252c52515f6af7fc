//! The values the plan layer hands out: the strategy names, a sandbox's context, a commit's
//! result and a sandbox's diff. Plain data, readable without the sandbox that made them.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use super::error::SandboxError;
use crate::id::PlanId;

/// How a resource is isolated. Chosen per resource; see the README's strategy table.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    /// Pass-through: writes go to the original at once. Bypasses isolation; cannot be
    /// rolled back.
    None,
    /// A copy made with the snapshot engine; committed through the atomic 3-way apply.
    CopyOnWrite,
    /// An OverlayFS view over a stable snapshot (kernel, else `fuse-overlayfs`, else
    /// `copy_on_write`); committed as `copy_on_write`.
    Overlay,
    /// A git worktree of the resource's repository on a branch of its own.
    GitWorktree,
    /// A strategy registered under this name in the manager's
    /// [`StrategyRegistry`](crate::plan::custom::StrategyRegistry) (see [`crate::plan::custom`]).
    Custom(String),
    /// An open transaction on a SQLite database file (the resource is the file): `commit`
    /// is `COMMIT`, `rollback` is `ROLLBACK`, `diff` lists the rows changed. Counted as not
    /// rollbackable (`commit_all` commits it after the others), though `rollback()` after
    /// commit undoes it when no other writer touched those rows since.
    TransactionRollback,
}

impl Strategy {
    /// Every built-in strategy.
    pub const ALL: [Strategy; 5] = [
        Strategy::None,
        Strategy::CopyOnWrite,
        Strategy::Overlay,
        Strategy::GitWorktree,
        Strategy::TransactionRollback,
    ];

    /// The users' name of the strategy (`none`, `copy_on_write`, `overlay`, `git_worktree`,
    /// `transaction_rollback`, or a custom strategy's registered name).
    pub fn name(&self) -> &str {
        match self {
            Strategy::None => "none",
            Strategy::CopyOnWrite => "copy_on_write",
            Strategy::Overlay => "overlay",
            Strategy::GitWorktree => "git_worktree",
            Strategy::Custom(name) => name,
            Strategy::TransactionRollback => "transaction_rollback",
        }
    }

    /// The built-in strategy named `name`, else [`Strategy::Custom`] of it: what a name from a
    /// user (C++, a configuration) means. Whether a custom name is registered is checked when
    /// a sandbox of it is made.
    pub fn parse(name: &str) -> Strategy {
        Strategy::from_name(name).unwrap_or_else(|_| Strategy::Custom(name.to_string()))
    }

    /// Whether this is a [`Strategy::Custom`].
    pub fn is_custom(&self) -> bool {
        matches!(self, Strategy::Custom(_))
    }

    /// The built-in strategy named `name`; [`SandboxError::Sandbox`] naming the known ones
    /// otherwise (custom strategies: [`Strategy::parse`]).
    pub fn from_name(name: &str) -> Result<Strategy, SandboxError> {
        Strategy::ALL
            .into_iter()
            .find(|s| s.name() == name)
            .ok_or_else(|| {
                SandboxError::sandbox(
                    None,
                    format!(
                        "unknown sandbox strategy {name:?} (known: none, copy_on_write, overlay, git_worktree, transaction_rollback)"
                    ),
                )
            })
    }

    /// Whether a commit of this strategy can be undone reliably (commit_all commits these
    /// first). `transaction_rollback` is not: its undo is refused when another writer
    /// touched the rows since, and its `COMMIT` can fail without any check foreseeing it, so
    /// it commits after the others (a failure then rolls those back). A custom strategy is,
    /// unless its protocol says otherwise (the sandbox asks it).
    pub fn is_rollbackable(&self) -> bool {
        !matches!(self, Strategy::None | Strategy::TransactionRollback)
    }

    /// Whether the resource is a file (the database of `transaction_rollback`) rather than
    /// a directory.
    pub fn resource_is_file(&self) -> bool {
        matches!(self, Strategy::TransactionRollback)
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a created sandbox is: where its files are and what they stand for. `None` before
/// `create`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxContext {
    /// The sandbox's ULID.
    pub sandbox_id: String,
    /// Where the sandboxed files are (for `none`, the original itself).
    pub sandbox_path: PathBuf,
    /// The original resource.
    pub original_path: PathBuf,
    /// The resource's id.
    pub resource_id: String,
    /// The plan that owns the sandbox.
    pub plan_id: String,
    /// When it was created.
    #[serde(with = "unix_millis")]
    pub created_at: SystemTime,
    /// Strategy-specific facts (`overlay.mode`, `git.branch`, …).
    pub metadata: BTreeMap<String, String>,
}

/// The outcome of one commit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitResult {
    /// The sandbox committed.
    pub sandbox_id: String,
    /// Whether the original now holds the sandbox's changes.
    pub success: bool,
    /// What names the commit: the undo record (`copy_on_write`, `overlay`), the commit id
    /// (`git_worktree`); none for `none`.
    pub commit_ref: Option<String>,
    /// Files modified in the original, relative to it.
    pub changed_files: Vec<String>,
    /// Files created.
    pub added_files: Vec<String>,
    /// Files removed.
    pub deleted_files: Vec<String>,
    /// The error when `success` is false.
    pub error: Option<String>,
    /// When the commit happened.
    #[serde(with = "unix_millis")]
    pub timestamp: SystemTime,
    /// Strategy-specific facts.
    pub metadata: BTreeMap<String, String>,
}

impl CommitResult {
    /// The one failed result [`PlanManager::commit_all`](crate::plan::PlanManager::commit_all)
    /// returns for a sandbox-level failure of `sandbox_id`, after the sandboxes in
    /// `rolled_back` were undone: `success == false`, `error` the reason, `metadata` holding
    /// `plan_id` and `rolled_back_ids` (comma-separated, in the order they were undone).
    pub fn failed(
        plan_id: &PlanId,
        sandbox_id: &str,
        reason: String,
        rolled_back: &[String],
    ) -> CommitResult {
        let mut metadata = BTreeMap::new();
        metadata.insert("plan_id".to_string(), plan_id.to_string());
        metadata.insert("rolled_back_ids".to_string(), rolled_back.join(","));
        CommitResult {
            sandbox_id: sandbox_id.to_string(),
            success: false,
            commit_ref: None,
            changed_files: Vec::new(),
            added_files: Vec::new(),
            deleted_files: Vec::new(),
            error: Some(reason),
            timestamp: SystemTime::now(),
            metadata,
        }
    }
}

/// What happened to one path in a sandbox's diff.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DiffOp {
    /// Not in the original, in the sandbox.
    Added,
    /// In both, different (content, mode or type).
    Modified,
    /// In the original, not in the sandbox.
    Deleted,
}

impl DiffOp {
    /// The operation named `name` (see [`DiffOp::name`]).
    pub fn from_name(name: &str) -> Option<DiffOp> {
        [DiffOp::Added, DiffOp::Modified, DiffOp::Deleted]
            .into_iter()
            .find(|op| op.name() == name)
    }

    /// `added`, `modified` or `deleted`.
    pub fn name(self) -> &'static str {
        match self {
            DiffOp::Added => "added",
            DiffOp::Modified => "modified",
            DiffOp::Deleted => "deleted",
        }
    }
}

/// One path of a diff, with its content on both sides (a symlink's content is its target).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiffEntry {
    /// Path relative to the resource.
    pub path: String,
    /// What happened to it.
    pub operation: DiffOp,
    /// The content before (none when added).
    pub before: Option<Vec<u8>>,
    /// The content after (none when deleted).
    pub after: Option<Vec<u8>>,
    /// git's mode before (`0o100644`, `0o100755` or `0o120000` for a symlink); none when added.
    pub before_mode: Option<u32>,
    /// git's mode after; none when deleted.
    pub after_mode: Option<u32>,
}

/// A sandbox's changes against what it was created from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SandboxDiff {
    /// One entry per changed path, sorted by path.
    pub entries: Vec<DiffEntry>,
    /// The same changes as a patch `git apply` accepts (binary-safe).
    pub patch: Vec<u8>,
}

impl SandboxDiff {
    /// The paths with the given operation.
    pub fn paths(&self, op: DiffOp) -> Vec<String> {
        self.entries
            .iter()
            .filter(|e| e.operation == op)
            .map(|e| e.path.clone())
            .collect()
    }
}

/// Serializes a `SystemTime` as milliseconds since the epoch (what the state files hold).
pub(crate) use crate::fs::unix_millis;
