//! What a transaction is to make of the project: each path's target state, and which
//! directories it may remove once they are empty. The resolver produces them, the journal
//! records them, the write phase and the undo carry them out.

use crate::fs::project::Data;
use crate::fs::relpath::RelPath;
use crate::fs::Timestamp;

/// What the write phase must make of one path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Target {
    Absent,
    File {
        data: Data,
        perm: u32,
        mtime: Option<Timestamp>,
    },
    Symlink {
        target: Vec<u8>,
        mtime: Option<Timestamp>,
    },
}

/// Which directories to remove once they are empty.
#[derive(Clone, Debug)]
pub(crate) enum Prune {
    /// Parents emptied by removals (what `git apply` does).
    EmptiedParents,
    /// Only these (undo: the directories the apply created), in path order, each once
    /// ([`sorted_paths`]).
    Only(Vec<RelPath>),
}

/// `paths` in path order, each once. Paths read in that order already (a list from a
/// journal or a record) are sorted in one pass, and duplicates are found by their bytes,
/// not component by component.
pub(crate) fn sorted_paths(mut paths: Vec<RelPath>) -> Vec<RelPath> {
    paths.sort();
    paths.dedup_by(|a, b| a.as_bytes() == b.as_bytes());
    paths
}
