//! The lifecycle of a plan sandbox, and the one table that says which step may follow which.
//!
//! ```
//! use patchbox::plan::Status;
//! assert!(Status::can_transition(Status::Active, Status::Committed));
//! assert!(!Status::can_transition(Status::CleanedUp, Status::Active));
//! ```
//!
//! The table as an error, `Status::assert_transition`, is with the errors
//! (`plan/error.rs`): this file is below them.
//!
//! ```text
//! Pending ──► Created ──► Active ──► Committed ──► CleanedUp
//!                │           │            │
//!                │           │            └──► RolledBack   (commit_all's compensation, or
//!                │           │                               rollback() after commit: undo)
//!                │           └──► RolledBack ──► Active     (re-use)
//!                │                           └──► CleanedUp
//!                └──► Errored ◄── Active
//!                        └──► CleanedUp
//! ```

use std::fmt;

use serde::{Deserialize, Serialize};

/// Where a sandbox is in its lifecycle. Every operation of a [`crate::plan::Sandbox`] checks
/// its step against [`Status::can_transition`] before doing anything, so an operation refused
/// for its status has changed nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// The sandbox object exists; nothing is on disk yet.
    Pending,
    /// The sandbox environment exists; no write has been routed to it yet.
    Created,
    /// Writes are routed here (the first [`get_path`](crate::plan::Sandbox::get_path) makes
    /// a created sandbox active).
    Active,
    /// Its changes are in the original resource.
    Committed,
    /// Its changes were discarded (from `Active`), or its commit was undone (from
    /// `Committed`). It may become `Active` again.
    RolledBack,
    /// Every artefact is removed. Terminal.
    CleanedUp,
    /// An unrecoverable error occurred; only cleanup remains.
    Errored,
}

impl Status {
    /// Every status, in lifecycle order.
    pub const ALL: [Status; 7] = [
        Status::Pending,
        Status::Created,
        Status::Active,
        Status::Committed,
        Status::RolledBack,
        Status::CleanedUp,
        Status::Errored,
    ];

    /// Whether a sandbox in `from` may move to `to`. This table is the whole lifecycle.
    pub fn can_transition(from: Status, to: Status) -> bool {
        use Status::*;
        matches!(
            (from, to),
            (Pending, Created)
                | (Created, Active)
                | (Created, Errored)
                | (Active, Committed)
                | (Active, RolledBack)
                | (Active, Errored)
                | (Committed, CleanedUp)
                | (Committed, RolledBack)
                | (RolledBack, Active)
                | (RolledBack, CleanedUp)
                | (Errored, CleanedUp)
        )
    }

    /// Whether nothing can follow (only [`Status::CleanedUp`]).
    pub fn is_terminal(self) -> bool {
        self == Status::CleanedUp
    }

    /// The snake_case name used on disk, in the CLI and across the C++ bridge.
    pub fn name(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Created => "created",
            Status::Active => "active",
            Status::Committed => "committed",
            Status::RolledBack => "rolled_back",
            Status::CleanedUp => "cleaned_up",
            Status::Errored => "errored",
        }
    }

    /// The status named `name` (see [`Status::name`]).
    pub fn from_name(name: &str) -> Option<Status> {
        Status::ALL.into_iter().find(|s| s.name() == name)
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for s in Status::ALL {
            assert_eq!(Status::from_name(s.name()), Some(s));
        }
    }

    #[test]
    fn nothing_leaves_cleaned_up() {
        for to in Status::ALL {
            assert!(!Status::can_transition(Status::CleanedUp, to));
        }
    }
}
