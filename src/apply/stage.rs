//! A transaction's staging directory, and the project chokepoint of the write phase.
//!
//! Every transaction works in a private directory `.patchbox-txn-<ulid>.<s>.<ns>` in the
//! project root (on the project's file system, so moving an entry in or out is one rename).
//! Its name carries the root's mtime before the change, which creating the directory alters
//! before the journal can record it. What it holds (the staged entries `s<i>`, the originals
//! moved aside `b<i>`, the journal's `begin`, `intent`, `abort` and `done`) is reached
//! through [`in_stage`]; every project path of the write phase goes through [`checked`]
//! right before it is written, so nothing planned earlier is trusted at write time.

use super::journal::STAGE_PREFIX;
use crate::error::{Error, Result};
use crate::fs::project::{self, ProjectPath};
use crate::fs::relpath::RelPath;
use crate::fs::Timestamp;
use std::path::Path;

/// `.patchbox-txn-<ulid>.<root mtime s>.<ns>`.
pub(super) fn stage_name(root_mtime: Timestamp) -> String {
    format!(
        "{STAGE_PREFIX}{}.{}.{}",
        crate::id::next(),
        root_mtime.secs,
        root_mtime.nanos
    )
}

/// The root's mtime from a staging directory's name.
pub(super) fn root_mtime_from_name(name: &str) -> Option<Timestamp> {
    let mut it = name.rsplitn(3, '.');
    let ns = it.next()?.parse().ok()?;
    let s = it.next()?.parse().ok()?;
    Some(Timestamp::new(s, ns))
}

pub(super) fn is_dir_mode(mode: u32) -> bool {
    mode & 0o170000 == 0o040000
}

/// The project chokepoint for a path of the write phase: no symlink the patch plans, none
/// it replaces (`check_sets` without sets costs one pass over the path; the predicate form
/// would also build every ancestor to ask about it).
pub(super) fn checked(root: &Path, rel: &RelPath) -> Result<ProjectPath> {
    project::check_sets(root, rel, None, None)
}

pub(super) fn sub(stage: &RelPath, name: String) -> Result<RelPath> {
    Ok(stage.join(&RelPath::new(name)?))
}

pub(super) fn in_stage(root: &Path, stage: &RelPath, name: &str) -> Result<ProjectPath> {
    checked(root, &sub(stage, name.to_string())?)
}

pub(super) fn ignore_missing(r: Result<()>) -> Result<()> {
    match r {
        Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => Ok(()),
        r => r,
    }
}
