//! One durability point for all the applies of a `commit_all`.
//!
//! A lone apply syncs its project's filesystem twice: after its journal's intent (the new
//! contents and the intent durable before any original moves) and after its renames (the
//! change durable before it returns). In a `commit_all` of several sandboxes the second
//! sync of each apply is redundant with the next apply's first one, and with the last
//! apply's second one: a [`CommitBatch`] keeps each apply, its change in place and its
//! journal still at INTENT (a crash is recovered by completing it, which then finds
//! everything placed), and [`CommitBatch::finish`] syncs each filesystem involved once,
//! then marks every apply done and removes its staging directory. `commit_all` returns
//! only after that, so a commit reported done is durable, as before.
//!
//! While an apply is kept its project stays locked; a commit to the same project, or to one
//! nested in it or around it, finishes the batch first (`CommitBatch::make_room`), so no
//! apply waits for a lock its own batch holds.

use std::path::{Path, PathBuf};

use crate::apply::{Deferred, IntentHook};

/// Applies of one `commit_all` waiting for their common sync (see the module docs).
/// Dropped unfinished, each apply syncs and finishes on its own.
#[derive(Default)]
pub struct CommitBatch {
    pending: Vec<Deferred>,
    /// For a member of a [`CommitGroup`](crate::plan::group::CommitGroup): makes its
    /// apply's intent durable with the group's shared sync.
    intent: Option<IntentHook>,
}

impl CommitBatch {
    /// The batch of one member of a commit group, whose apply's intent `intent` makes
    /// durable (see `plan::group`).
    pub(crate) fn member(intent: IntentHook) -> CommitBatch {
        CommitBatch {
            pending: Vec::new(),
            intent: Some(intent),
        }
    }

    /// The shared intent sync of this batch's applies, if any.
    pub(crate) fn intent(&self) -> Option<IntentHook> {
        self.intent.clone()
    }

    /// This member's change is in place: the next member of its commit group may move its
    /// originals while this one finishes its bookkeeping (see `plan::group`).
    pub(crate) fn placed(&self) {
        if let Some(h) = &self.intent {
            h.0.placed();
        }
    }

    /// Takes over the applies `other` kept, after this batch's (their order is kept).
    pub(crate) fn absorb(&mut self, mut other: CommitBatch) {
        self.pending.append(&mut other.pending);
    }

    /// Keeps `d` until [`CommitBatch::finish`].
    pub(crate) fn keep(&mut self, d: Deferred) {
        self.pending.push(d);
    }

    /// Finishes the batch now if one of its applies is to `original`, or to a project
    /// inside it or around it (their locks and staging directories would meet). Returns
    /// the warnings of what it finished.
    pub(crate) fn make_room(&mut self, original: &Path) -> crate::Result<Vec<String>> {
        let canon: PathBuf = std::fs::canonicalize(original)
            .map_err(|e| crate::Error::io("resolve", original, e))?;
        let meets = self
            .pending
            .iter()
            .any(|d| d.root().starts_with(&canon) || canon.starts_with(d.root()));
        if meets {
            self.finish()
        } else {
            Ok(Vec::new())
        }
    }

    /// Syncs each filesystem of the kept applies once, then marks each done and cleans it
    /// up. Returns the cleanups' warnings, or the first error (a failed sync: those applies
    /// stay in place at INTENT, for the next recovery of their project to complete).
    pub fn finish(&mut self) -> crate::Result<Vec<String>> {
        Deferred::finish_all(std::mem::take(&mut self.pending))
    }

    /// Whether no apply is waiting.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }
}
