//! The file set of a project: which files belong to it, the snapshot copy, the base, and the
//! diff of two trees.

pub mod base;
pub mod diff;
pub mod select;
pub mod snapshot;
pub mod walk;
