//! The user's references, read-only: what `HEAD` is ([`read_head`]) and which branches, tags
//! and remote-tracking branches exist ([`read_refs`]), from the files git keeps them in
//! (`HEAD`, loose `refs/…` files and `packed-refs`).
//!
//! A sandbox's private repository ([`crate::git::private`]) starts from these: its `HEAD`
//! builds on the user's `HEAD` commit, and it carries a copy of the user's refs so that
//! `git log origin/main..` works inside a sandbox.
//!
//! Only the files backend is read. A repository using reftable (`HEAD` holds
//! `ref: refs/heads/.invalid`) reads as an unborn `HEAD` with no refs: a sandbox of it gets
//! a root snapshot commit instead of one on top of the user's history. Nothing here writes.
//!
//! ```
//! use patchbox::git::oid::ObjectId;
//! use patchbox::git::refs::{read_head, Head};
//! let dir = tempfile::tempdir().unwrap();
//! let git = dir.path();
//! std::fs::create_dir_all(git.join("refs/heads")).unwrap();
//! std::fs::write(git.join("HEAD"), "ref: refs/heads/main\n").unwrap();
//! assert_eq!(read_head(git, git).unwrap(), Head::Branch { name: "refs/heads/main".into(), commit: None });
//! std::fs::write(git.join("refs/heads/main"), format!("{}\n", "ab".repeat(20))).unwrap();
//! assert_eq!(read_head(git, git).unwrap(), Head::Branch { name: "refs/heads/main".into(), commit: Some(ObjectId::from_bytes([0xab; 20])) });
//! ```

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::Path;

use crate::error::{Error, Result};
use crate::git::oid::ObjectId;

/// What `HEAD` is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Head {
    /// On a branch (`ref: refs/heads/<name>`); `commit` is `None` while the branch is unborn.
    Branch {
        /// The full ref name, e.g. `refs/heads/main`.
        name: String,
        /// The commit the branch points at.
        commit: Option<ObjectId>,
    },
    /// Detached at a commit.
    Detached(ObjectId),
}

impl Head {
    /// The commit `HEAD` points at, `None` on an unborn branch.
    pub fn commit(&self) -> Option<ObjectId> {
        match self {
            Head::Branch { commit, .. } => *commit,
            Head::Detached(c) => Some(*c),
        }
    }
}

/// Reads `HEAD` of the work tree whose git directory is `git_dir` (its common directory
/// `common_dir` holds the branches). A symbolic ref is followed through loose and packed
/// refs, at most five levels deep; a branch that cannot be resolved is unborn.
///
/// Errors: `HEAD` missing or unreadable, or neither a symbolic ref nor an object id.
pub fn read_head(git_dir: &Path, common_dir: &Path) -> Result<Head> {
    let path = git_dir.join("HEAD");
    let data = fs::read(&path).map_err(|e| Error::io("read HEAD", &path, e))?;
    let text = trim(&data);
    if let Some(target) = text.strip_prefix(b"ref:") {
        let name = String::from_utf8_lossy(trim(target)).into_owned();
        let packed = read_packed(common_dir)?;
        let commit = resolve(&name, git_dir, common_dir, &packed, 0)?;
        return Ok(Head::Branch { name, commit });
    }
    parse_oid(text)
        .map(Head::Detached)
        .ok_or_else(|| Error::Git {
            path,
            reason: "HEAD is neither a symbolic ref nor an object id".into(),
        })
}

/// Every ref under `refs/heads/`, `refs/tags/`, `refs/remotes/` and `refs/notes/` with the
/// object it names, loose refs taking precedence over `packed-refs` (as git reads them).
/// Symbolic refs (`refs/remotes/origin/HEAD`) and malformed files are left out.
pub fn read_refs(common_dir: &Path) -> Result<BTreeMap<String, ObjectId>> {
    let mut out: BTreeMap<String, ObjectId> = read_packed(common_dir)?
        .into_iter()
        .filter(|(n, _)| wanted(n))
        .collect();
    for top in ["refs/heads", "refs/tags", "refs/remotes", "refs/notes"] {
        collect_loose(&common_dir.join(top), top, 0, &mut out)?;
    }
    Ok(out)
}

fn wanted(name: &str) -> bool {
    ["refs/heads/", "refs/tags/", "refs/remotes/", "refs/notes/"]
        .iter()
        .any(|p| name.starts_with(p))
}

/// Reads the loose refs below `dir` (whose ref name is `prefix`) into `out`.
fn collect_loose(
    dir: &Path,
    prefix: &str,
    depth: usize,
    out: &mut BTreeMap<String, ObjectId>,
) -> Result<()> {
    if depth > 32 {
        return Ok(());
    }
    let rd = match fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
            ) =>
        {
            return Ok(())
        }
        Err(e) => return Err(Error::io("read refs directory", dir, e)),
    };
    for entry in rd {
        let entry = entry.map_err(|e| Error::io("read refs directory", dir, e))?;
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        let full = format!("{prefix}/{name}");
        let ft = entry
            .file_type()
            .map_err(|e| Error::io("stat", entry.path(), e))?;
        if ft.is_dir() {
            collect_loose(&entry.path(), &full, depth + 1, out)?;
        } else if ft.is_file() && !name.ends_with(".lock") {
            if let Some(oid) = read_loose_oid(&entry.path())? {
                out.insert(full, oid);
            }
        }
    }
    Ok(())
}

/// A loose ref's object id; `None` for a symbolic or malformed ref, or a vanished file.
fn read_loose_oid(p: &Path) -> Result<Option<ObjectId>> {
    match fs::read(p) {
        Ok(d) => Ok(parse_oid(trim(&d))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io("read ref", p, e)),
    }
}

/// Follows `name` to an object id: a loose ref (in `git_dir` for per-worktree refs, else in
/// `common_dir`), possibly symbolic, else `packed-refs`.
fn resolve(
    name: &str,
    git_dir: &Path,
    common_dir: &Path,
    packed: &BTreeMap<String, ObjectId>,
    depth: usize,
) -> Result<Option<ObjectId>> {
    if depth > 5
        || name
            .split('/')
            .any(|c| c.is_empty() || c == "." || c == "..")
    {
        return Ok(None);
    }
    for dir in [git_dir, common_dir] {
        let p = dir.join(name);
        match fs::read(&p) {
            Ok(d) => {
                let t = trim(&d);
                if let Some(target) = t.strip_prefix(b"ref:") {
                    let next = String::from_utf8_lossy(trim(target)).into_owned();
                    return resolve(&next, git_dir, common_dir, packed, depth + 1);
                }
                if let Some(oid) = parse_oid(t) {
                    return Ok(Some(oid));
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
                ) || e.raw_os_error() == Some(libc::EISDIR) => {}
            Err(e) => return Err(Error::io("read ref", &p, e)),
        }
    }
    Ok(packed.get(name).copied())
}

/// `packed-refs`: ref name → object id (peeled `^` lines and comments skipped).
fn read_packed(common_dir: &Path) -> Result<BTreeMap<String, ObjectId>> {
    let p = common_dir.join("packed-refs");
    let data = match fs::read(&p) {
        Ok(d) => d,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(e) => return Err(Error::io("read packed-refs", &p, e)),
    };
    let mut out = BTreeMap::new();
    for line in data.split(|&b| b == b'\n') {
        if line.len() < 42 || line[0] == b'#' || line[0] == b'^' || line[40] != b' ' {
            continue;
        }
        if let (Some(oid), Ok(name)) = (parse_oid(&line[..40]), std::str::from_utf8(&line[41..])) {
            out.insert(name.trim_end_matches('\r').to_string(), oid);
        }
    }
    Ok(out)
}

/// The object id a ref file or `packed-refs` line holds as 40 hex digits.
fn parse_oid(t: &[u8]) -> Option<ObjectId> {
    if t.len() != 40 {
        return None;
    }
    ObjectId::from_hex(std::str::from_utf8(t).ok()?)
}

fn trim(b: &[u8]) -> &[u8] {
    b.trim_ascii()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loose_refs_win_over_packed_and_symbolic_refs_are_followed() {
        let d = tempfile::tempdir().unwrap();
        let g = d.path();
        fs::create_dir_all(g.join("refs/heads/feature")).unwrap();
        fs::create_dir_all(g.join("refs/remotes/origin")).unwrap();
        let a = "aa".repeat(20);
        let b = "bb".repeat(20);
        fs::write(
            g.join("packed-refs"),
            format!("# pack-refs with: peeled\n{a} refs/heads/main\n{a} refs/tags/v1\n^{b}\n{a} refs/stash\n"),
        )
        .unwrap();
        fs::write(g.join("refs/heads/main"), format!("{b}\n")).unwrap();
        fs::write(g.join("refs/heads/feature/x"), format!("{a}\n")).unwrap();
        fs::write(
            g.join("refs/remotes/origin/HEAD"),
            "ref: refs/remotes/origin/main\n",
        )
        .unwrap();
        fs::write(g.join("HEAD"), "ref: refs/heads/alias\n").unwrap();
        fs::write(g.join("refs/heads/alias"), "ref: refs/heads/main\n").unwrap();
        let refs = read_refs(g).unwrap();
        let names: Vec<_> = refs.keys().cloned().collect();
        assert_eq!(
            names,
            ["refs/heads/feature/x", "refs/heads/main", "refs/tags/v1"]
        );
        let bb = ObjectId::from_bytes([0xbb; 20]);
        assert_eq!(refs["refs/heads/main"], bb);
        assert_eq!(read_head(g, g).unwrap().commit(), Some(bb));
    }

    #[test]
    fn detached_unborn_and_garbage_heads() {
        let d = tempfile::tempdir().unwrap();
        let g = d.path();
        fs::write(g.join("HEAD"), format!("{}\n", "cd".repeat(20))).unwrap();
        assert_eq!(
            read_head(g, g).unwrap(),
            Head::Detached(ObjectId::from_bytes([0xcd; 20]))
        );
        fs::write(g.join("HEAD"), "ref: refs/heads/.invalid\n").unwrap();
        assert_eq!(read_head(g, g).unwrap().commit(), None);
        fs::write(g.join("HEAD"), "ref: refs/heads/../../etc\n").unwrap();
        assert_eq!(read_head(g, g).unwrap().commit(), None);
        fs::write(g.join("HEAD"), "junk").unwrap();
        assert!(read_head(g, g).is_err());
    }
}
