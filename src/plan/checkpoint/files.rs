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
    let root = sb.get_path(Path::new(""))?;
    restore_at(sb, store, target, &root)
}

/// [`restore`] into `root`, a tree holding what the sandbox holds now (the sandbox itself, or
/// a copy of it: [`materialize`]).
fn restore_at(
    sb: &dyn Sandbox,
    store: &Store,
    target: &BTreeMap<String, PathState>,
    root: &Path,
) -> Result<usize, SandboxError> {
    let root = root.to_path_buf();
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
        // Not `get_path`: it refuses a path whose symlink leads out of the sandbox, and such
        // a symlink is exactly what a restore may have to remove. The path is checked to be
        // plain here, and nothing is ever done through a symlinked parent (`real_parents`).
        let rel = crate::fs::RelPath::new(p)
            .map_err(|e| SandboxError::from_lower(Some(sb.sandbox_id()), "checkpoint path", e))?;
        let full = root.join(rel.as_path());
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
        // Below a symlink the path does not exist in the sandbox: the symlink itself is
        // among the removals.
        if real_parents(&root, p).is_ok() {
            remove_node(p)?;
        }
    }
    for p in removals.iter().filter(|p| real_parents(&root, p).is_ok()) {
        let mut dir = p
            .parent()
            .filter(|d| d.starts_with(&root) && *d != root.as_path());
        while let Some(d) = dir {
            if std::fs::remove_dir(d).is_err() {
                break;
            }
            dir = d.parent().filter(|d| *d != root.as_path());
        }
    }
    for (p, data, mode) in writes {
        real_parents(&root, &p)?;
        write_node(&p, &data, mode)?;
    }
    Ok(n)
}

/// Writes into `dest` (a directory that must not exist yet; made private, 0700) the whole tree
/// the sandbox whose directory is `tree` had at the checkpoint whose changes are `target`: a
/// copy of the sandbox now (files, modes, symlinks as links), then the paths where it and
/// the checkpoint differ. On failure nothing of `dest` is left.
pub fn materialize(
    sb: &dyn Sandbox,
    store: &Store,
    target: &BTreeMap<String, PathState>,
    tree: &Path,
    dest: &Path,
) -> Result<(), SandboxError> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(dest)
        .map_err(|e| io("create directory", dest, e))?;
    let made = copy_dir(tree, dest).and_then(|()| restore_at(sb, store, target, dest));
    if let Err(e) = made {
        let _ = std::fs::remove_dir_all(dest);
        return Err(e);
    }
    Ok(())
}

/// Copies the tree `from` into the existing directory `to`: files with their permissions,
/// symlinks as links (never followed), directories recursively.
fn copy_dir(from: &Path, to: &Path) -> Result<(), SandboxError> {
    let entries = std::fs::read_dir(from).map_err(|e| io("read directory", from, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| io("read directory", from, e))?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type().map_err(|e| io("inspect", &src, e))?;
        if kind.is_symlink() {
            let target = std::fs::read_link(&src).map_err(|e| io("read symlink", &src, e))?;
            std::os::unix::fs::symlink(&target, &dst).map_err(|e| io("create symlink", &dst, e))?;
        } else if kind.is_dir() {
            std::fs::create_dir(&dst).map_err(|e| io("create directory", &dst, e))?;
            copy_dir(&src, &dst)?;
        } else if kind.is_file() {
            std::fs::copy(&src, &dst).map_err(|e| io("copy", &src, e))?;
        }
    }
    Ok(())
}

/// Refuses to write `p` through a symlink: every existing directory between the sandbox
/// root and `p` must be a real directory (a symlink there would send the write elsewhere,
/// possibly out of the sandbox).
fn real_parents(root: &Path, p: &Path) -> Result<(), SandboxError> {
    let Ok(rel) = p.strip_prefix(root) else {
        return Err(SandboxError::sandbox(
            None,
            format!("restore checkpoint: {} is outside the sandbox", p.display()),
        ));
    };
    let mut cur = root.to_path_buf();
    let parts: Vec<_> = rel.components().collect();
    for c in parts.iter().take(parts.len().saturating_sub(1)) {
        cur.push(c);
        match std::fs::symlink_metadata(&cur) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(SandboxError::sandbox(
                    None,
                    format!(
                        "restore checkpoint: refusing to write through the symlink {}",
                        cur.display()
                    ),
                ))
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
            Err(e) => return Err(io("inspect", &cur, e)),
        }
    }
    Ok(())
}

fn io(op: &'static str, p: &Path, e: std::io::Error) -> SandboxError {
    SandboxError::from_lower(None, "restore checkpoint", crate::Error::io(op, p, e))
}

fn remove_node(p: &Path) -> Result<(), SandboxError> {
    match std::fs::symlink_metadata(p) {
        // Gone, or a parent is no longer a directory (a file, or a symlink: it is removed
        // or replaced too, and nothing is ever done through it).
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
            ) || e.raw_os_error() == Some(libc::ELOOP) =>
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
