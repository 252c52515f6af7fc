//! What the resolver knows of a path and of one file's new contents.
//!
//! [`VState`] is a path's state in the planner's virtual view of the project (as the
//! project holds it, or as earlier file patches of the same patch left it); a file
//! patch's resolution is a [`Res`]: a new state and [`How`] it was obtained, a conflict
//! (with the contents carrying conflict markers when they can be written), or a refusal.

use crate::apply::report::HunkConflict;
use crate::fs::project::{Data, Entry};

/// The planned state of a path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum VState {
    Absent,
    File { data: Data, perm: u32 },
    Symlink(Vec<u8>),
    Dir,
    Other,
}

impl VState {
    pub(super) fn of(e: &Entry) -> VState {
        match e {
            Entry::Absent => VState::Absent,
            Entry::File { data, perm, .. } => VState::File {
                data: data.clone(),
                perm: *perm,
            },
            Entry::Symlink { target, .. } => VState::Symlink(target.clone()),
            Entry::Dir { .. } => VState::Dir,
            Entry::Other { .. } => VState::Other,
        }
    }

    pub(super) fn exists(&self) -> bool {
        !matches!(self, VState::Absent)
    }

    /// Same type, contents and execute bit.
    pub(super) fn same_as(&self, other: &VState) -> bool {
        match (self, other) {
            (VState::File { data: a, perm: p }, VState::File { data: b, perm: q }) => {
                a == b && (p & 0o111 != 0) == (q & 0o111 != 0)
            }
            _ => self == other,
        }
    }
}

/// How a file's new contents were obtained.
pub(super) enum How {
    Applied(String),
    Merged(String),
    Already(String),
}

/// Resolution of one file's contents.
pub(super) enum Res {
    Done(VState, How),
    Conflict {
        detail: String,
        conflicts: Vec<HunkConflict>,
        /// The contents with conflict markers, when they can be written.
        marked: Option<VState>,
    },
    Refuse(String),
}

/// A conflict without hunks to name and without markers.
pub(super) fn conflict(detail: impl Into<String>) -> Res {
    Res::Conflict {
        detail: detail.into(),
        conflicts: Vec::new(),
        marked: None,
    }
}
