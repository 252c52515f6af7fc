//! Checkpoints of a sandbox's files, for every strategy whose sandbox is a directory
//! (`copy_on_write`, `overlay`, `git_worktree`, custom file strategies): capture records the
//! sandbox's diff against its base; restore makes the sandbox's files equal to a checkpoint
//! by writing only the paths where the two differ.
//!
//! Both cost what changed: the diff is the strategy's own (a stat walk against a manifest, a
//! walk of the overlay's upper layer, git's index), and restore touches the union of the
//! paths changed now and the paths changed in the checkpoint, nothing else.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use super::store::{PathState, Store};
use crate::plan::error::SandboxError;
use crate::plan::sandbox::Sandbox;

const SYMLINK: u32 = 0o120000;

/// The sandbox's changes against its base, with their content stored in `store`.
pub fn capture(
    sb: &dyn Sandbox,
    store: &Store,
) -> Result<BTreeMap<String, PathState>, SandboxError> {
    let mut out = BTreeMap::new();
    for e in sb.changes()? {
        let state = match (e.after, e.after_mode) {
            (Some(data), Some(mode)) => PathState {
                oid: Some(store.put(&data)?),
                mode,
                base: false,
            },
            _ => PathState {
                oid: None,
                mode: 0,
                base: false,
            },
        };
        out.insert(e.path, state);
    }
    Ok(out)
}

/// What a path should hold: content and mode, or nothing.
#[derive(PartialEq, Eq)]
enum Want {
    Absent,
    Node(Vec<u8>, u32),
}

/// Makes the sandbox's files equal to the checkpoint whose changes are `target`; returns how
/// many paths were written or removed.
pub fn restore(
    sb: &dyn Sandbox,
    store: &Store,
    target: &BTreeMap<String, PathState>,
) -> Result<usize, SandboxError> {
    let current: BTreeMap<String, _> = sb
        .changes()?
        .into_iter()
        .map(|e| (e.path.clone(), e))
        .collect();
    let paths: BTreeSet<&String> = current.keys().chain(target.keys()).collect();
    let mut removals = Vec::new();
    let mut writes = Vec::new();
    for p in paths {
        let want = match target.get(p) {
            Some(PathState {
                oid: Some(oid),
                mode,
                ..
            }) => Want::Node(store.get(oid)?, *mode),
            Some(PathState { oid: None, .. }) => Want::Absent,
            // Not changed in the checkpoint: the base's state, which the current diff knows.
            None => match current.get(p) {
                Some(e) => match (&e.before, e.before_mode) {
                    (Some(b), Some(m)) => Want::Node(b.clone(), m),
                    _ => Want::Absent,
                },
                None => continue,
            },
        };
        let have = match current.get(p) {
            Some(e) => match (&e.after, e.after_mode) {
                (Some(a), Some(m)) => Want::Node(a.clone(), m),
                _ => Want::Absent,
            },
            // Unchanged now: it holds the base's state, which differs from `want` (the
            // checkpoint changed it), so it is written.
            None => Want::Absent,
        };
        if current.contains_key(p) && have == want {
            continue;
        }
        let full = sb.get_path(Path::new(p))?;
        removals.push(full.clone());
        if let Want::Node(data, mode) = want {
            writes.push((full, data, mode));
        }
    }
    let n = removals.len();
    // Removals deepest first, then empty directories they leave, so a directory that
    // replaced a file (or the other way round) is gone before the new node is made.
    removals.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    for p in &removals {
        remove_node(p)?;
    }
    for p in &removals {
        let mut dir = p.parent();
        while let Some(d) = dir {
            if std::fs::remove_dir(d).is_err() {
                break;
            }
            dir = d.parent();
        }
    }
    for (p, data, mode) in writes {
        write_node(&p, &data, mode)?;
    }
    Ok(n)
}

fn io(op: &'static str, p: &Path, e: std::io::Error) -> SandboxError {
    SandboxError::from_lower(None, "restore checkpoint", crate::Error::io(op, p, e))
}

fn remove_node(p: &Path) -> Result<(), SandboxError> {
    match std::fs::symlink_metadata(p) {
        // Gone, or a parent is no longer a directory (it is removed or replaced too).
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
            ) =>
        {
            Ok(())
        }
        Err(e) => Err(io("inspect", p, e)),
        Ok(m) if m.is_dir() => match std::fs::remove_dir(p) {
            // A directory that still holds files the restore keeps stays.
            Err(e) if e.kind() == std::io::ErrorKind::DirectoryNotEmpty => Ok(()),
            r => r.map_err(|e| io("remove directory", p, e)),
        },
        Ok(_) => std::fs::remove_file(p).map_err(|e| io("remove", p, e)),
    }
}

fn write_node(p: &Path, data: &[u8], mode: u32) -> Result<(), SandboxError> {
    if let Some(parent) = p.parent() {
        std::fs::create_dir_all(parent).map_err(|e| io("create directory", parent, e))?;
    }
    if mode == SYMLINK {
        use std::os::unix::ffi::OsStrExt;
        let target = std::ffi::OsStr::from_bytes(data);
        std::os::unix::fs::symlink(target, p).map_err(|e| io("create symlink", p, e))
    } else {
        std::fs::write(p, data).map_err(|e| io("write", p, e))?;
        let perm = if mode & 0o111 != 0 { 0o755 } else { 0o644 };
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(perm))
            .map_err(|e| io("chmod", p, e))
    }
}
