//! A sandbox's listing kept current from a change record instead of a walk.
//!
//! [`Listing::walk`] reads the whole tree once ([`list_tree_and_dirs`]). After that,
//! [`Listing::update`] takes what a change record reports (the directories whose entries
//! changed, the other nodes written) and re-reads only those: one `lstat` per written node,
//! one `readdir` per changed directory, and a walk only of directories that appeared or were
//! replaced. The result equals what a fresh walk would list, provided the record is complete:
//! every node written and every directory whose entries changed, since the listing was made
//! (Btrfs's transaction ids give exactly that: [`crate::fs::btrfs`]).
//!
//! Why a changed directory is re-read one level only: a directory that stayed at its path
//! (same inode) kept every subdirectory it did not report as replaced, and what changed
//! inside those is reported by their own entries. One that moved or is new is walked whole,
//! because its files were not written by the move.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::DirEntryExt;
use std::path::Path;

use crate::error::{Error, IoContext, Result};
use crate::fs::relpath::RelPath;
use crate::tree::snapshot::{list_tree_and_dirs, Node, NodeKind, StatKey};

/// What changed under a listed tree since its listing was made.
#[derive(Clone, Debug, Default)]
pub struct Changes {
    /// Directories whose entries may have changed: their path and inode number now.
    pub dirs: Vec<(Vec<u8>, u64)>,
    /// Other nodes written (content, mode, links): their paths now.
    pub nodes: Vec<Vec<u8>>,
}

/// Every file and symlink of a tree with its stat data, sorted by path bytes (what
/// [`crate::tree::snapshot::list_tree`] returns), and every directory with its inode number.
#[derive(Clone, Debug, Default)]
pub struct Listing {
    files: Vec<(Node, StatKey)>,
    dirs: HashMap<Vec<u8>, u64>,
}

impl Listing {
    /// Lists the tree at `root` (whose own inode number is recorded as the empty path's).
    pub fn walk(root: &Path) -> Result<Listing> {
        let (files, dirs) = list_tree_and_dirs(root)?;
        let mut map: HashMap<Vec<u8>, u64> = dirs.into_iter().collect();
        let st = std::fs::symlink_metadata(root).ctx("stat", root)?;
        map.insert(Vec::new(), std::os::unix::fs::MetadataExt::ino(&st));
        Ok(Listing { files, dirs: map })
    }

    /// The files and symlinks, sorted by path bytes.
    pub fn files(&self) -> &[(Node, StatKey)] {
        &self.files
    }

    /// Brings the listing of `root` up to date with `changes` (see the module's docs).
    pub fn update(&mut self, root: &Path, changes: &Changes) -> Result<()> {
        let mut upserts: BTreeMap<Vec<u8>, Option<(Node, StatKey)>> = BTreeMap::new();
        // Directories whose whole listed subtree goes (they vanished, or were replaced and
        // are walked again into `upserts` and `new_dirs`).
        let mut dropped: HashSet<Vec<u8>> = HashSet::new();
        let mut new_dirs: Vec<(Vec<u8>, u64)> = Vec::new();
        for p in &changes.nodes {
            if in_git_dir(p) {
                continue;
            }
            upserts.insert(p.clone(), stat_node(root, p)?);
        }
        for (dir, ino) in &changes.dirs {
            // Moved or new: the directory holding it now changed too, and walks it whole.
            if self.dirs.get(dir) != Some(ino) {
                continue;
            }
            let abs = root.join(OsStr::from_bytes(dir));
            let rd = match std::fs::read_dir(&abs) {
                Ok(rd) => rd,
                Err(e) if gone(&e) => continue,
                Err(e) => return Err(Error::io("read directory", &abs, e)),
            };
            let mut present: HashSet<Vec<u8>> = HashSet::new();
            for entry in rd {
                let entry = entry.ctx("read directory", &abs)?;
                let name = entry.file_name();
                let child = join(dir, name.as_bytes());
                present.insert(name.as_bytes().to_vec());
                let ft = entry.file_type().ctx("stat", &entry.path())?;
                if ft.is_dir() {
                    upserts.insert(child.clone(), None);
                    if name == ".git" {
                        continue;
                    }
                    if self.dirs.get(&child) != Some(&entry.ino()) {
                        dropped.insert(child.clone());
                        walk_into(root, &child, entry.ino(), &mut upserts, &mut new_dirs)?;
                    }
                } else {
                    if self.dirs.contains_key(&child) {
                        dropped.insert(child.clone());
                    }
                    upserts.insert(child.clone(), stat_node(root, &child)?);
                }
            }
            // What the listing held directly in `dir` and is not there any more.
            for (node, _) in children(&self.files, dir) {
                let name = &node.rel.as_bytes()[prefix_len(dir)..];
                if !present.contains(name) {
                    upserts.insert(node.rel.as_bytes().to_vec(), None);
                }
            }
            for d in self.dirs.keys() {
                if let Some(name) = child_name(dir, d) {
                    if !present.contains(name) {
                        dropped.insert(d.clone());
                    }
                }
            }
        }
        if upserts.is_empty() && dropped.is_empty() {
            return Ok(());
        }
        let old = std::mem::take(&mut self.files);
        let mut out = Vec::with_capacity(old.len() + upserts.len());
        let mut up = upserts.into_iter().peekable();
        for (node, key) in old {
            let path = node.rel.as_bytes();
            while let Some((p, _)) = up.peek() {
                if p.as_slice() >= path {
                    break;
                }
                if let Some((_, Some(e))) = up.next() {
                    out.push(e);
                }
            }
            if up.peek().is_some_and(|(p, _)| p.as_slice() == path) {
                if let Some((_, Some(e))) = up.next() {
                    out.push(e);
                }
                continue;
            }
            if !under_any(path, &dropped) {
                out.push((node, key));
            }
        }
        out.extend(up.filter_map(|(_, e)| e));
        self.files = out;
        if !dropped.is_empty() {
            self.dirs
                .retain(|d, _| !dropped.contains(d) && !under_any(d, &dropped));
        }
        self.dirs.extend(new_dirs);
        Ok(())
    }
}

/// `dir/name`, or `name` at the root.
fn join(dir: &[u8], name: &[u8]) -> Vec<u8> {
    let mut p = Vec::with_capacity(dir.len() + 1 + name.len());
    if !dir.is_empty() {
        p.extend_from_slice(dir);
        p.push(b'/');
    }
    p.extend_from_slice(name);
    p
}

/// How many bytes a child's path of `dir` starts with before its name.
fn prefix_len(dir: &[u8]) -> usize {
    if dir.is_empty() {
        0
    } else {
        dir.len() + 1
    }
}

/// The name of `path` when it is directly in `dir`.
fn child_name<'a>(dir: &[u8], path: &'a [u8]) -> Option<&'a [u8]> {
    let rest = if dir.is_empty() {
        path
    } else {
        path.strip_prefix(dir)?.strip_prefix(b"/")?
    };
    (!rest.is_empty() && !rest.contains(&b'/')).then_some(rest)
}

/// The listed files directly in `dir` (a contiguous run of the sorted listing).
fn children<'a>(
    files: &'a [(Node, StatKey)],
    dir: &'a [u8],
) -> impl Iterator<Item = &'a (Node, StatKey)> + 'a {
    // `dir/` (empty at the root): every path below `dir` starts with it, and they sort
    // together from the first one not less than it.
    let prefix = if dir.is_empty() {
        Vec::new()
    } else {
        join(dir, b"")
    };
    let start = files.partition_point(|(n, _)| n.rel.as_bytes() < prefix.as_slice());
    files[start..]
        .iter()
        .take_while(move |(n, _)| n.rel.as_bytes().starts_with(&prefix))
        .filter(move |(n, _)| child_name(dir, n.rel.as_bytes()).is_some())
}

/// Whether `path` lies below one of `dirs`.
fn under_any(path: &[u8], dirs: &HashSet<Vec<u8>>) -> bool {
    path.iter()
        .enumerate()
        .filter(|(_, &b)| b == b'/')
        .any(|(i, _)| dirs.contains(&path[..i]))
}

/// Whether `path` lies inside a `.git` directory, which listings leave out.
fn in_git_dir(path: &[u8]) -> bool {
    let mut parts: Vec<&[u8]> = path.split(|&b| b == b'/').collect();
    parts.pop();
    parts.iter().any(|p| *p == b".git")
}

fn gone(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::ENOTDIR))
}

/// The listing's entry for `rel` as it is now: `None` when it is gone, a directory, or
/// neither a file nor a symlink.
fn stat_node(root: &Path, rel: &[u8]) -> Result<Option<(Node, StatKey)>> {
    let abs = root.join(OsStr::from_bytes(rel));
    let m = match std::fs::symlink_metadata(&abs) {
        Ok(m) => m,
        Err(e) if gone(&e) => return Ok(None),
        Err(e) => return Err(Error::io("stat", &abs, e)),
    };
    let Some(kind) = NodeKind::from_metadata(&m) else {
        return Ok(None);
    };
    Ok(Some((
        Node {
            rel: RelPath::from_bytes(rel)?,
            kind,
        },
        StatKey::from_metadata(&m),
    )))
}

/// Lists the directory `dir` (inode `ino`) and everything below it into `upserts` and
/// `dirs`, as a walk would.
fn walk_into(
    root: &Path,
    dir: &[u8],
    ino: u64,
    upserts: &mut BTreeMap<Vec<u8>, Option<(Node, StatKey)>>,
    dirs: &mut Vec<(Vec<u8>, u64)>,
) -> Result<()> {
    let mut stack = vec![(dir.to_vec(), ino)];
    while let Some((d, ino)) = stack.pop() {
        let abs = root.join(OsStr::from_bytes(&d));
        let rd = match std::fs::read_dir(&abs) {
            Ok(rd) => rd,
            Err(e) if gone(&e) => continue,
            Err(e) => return Err(Error::io("read directory", &abs, e)),
        };
        dirs.push((d.clone(), ino));
        for entry in rd {
            let entry = entry.ctx("read directory", &abs)?;
            let name = entry.file_name();
            let child = join(&d, name.as_bytes());
            let ft = entry.file_type().ctx("stat", &entry.path())?;
            if ft.is_dir() {
                if name != ".git" {
                    stack.push((child, entry.ino()));
                }
            } else {
                upserts.insert(child.clone(), stat_node(root, &child)?);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn paths(l: &Listing) -> Vec<String> {
        l.files()
            .iter()
            .map(|(n, _)| String::from_utf8_lossy(n.rel.as_bytes()).into_owned())
            .collect()
    }

    fn ino(p: &Path) -> u64 {
        std::os::unix::fs::MetadataExt::ino(&fs::symlink_metadata(p).unwrap())
    }

    /// Every directory of the tree as a change: the update must then equal a fresh walk.
    fn all_dirs(root: &Path) -> Changes {
        let (_, dirs) = list_tree_and_dirs(root).unwrap();
        let mut c = Changes {
            dirs,
            nodes: Vec::new(),
        };
        c.dirs.push((Vec::new(), ino(root)));
        c
    }

    fn same_as_walk(l: &Listing, root: &Path) {
        let fresh = Listing::walk(root).unwrap();
        assert_eq!(paths(l), paths(&fresh));
        for (a, b) in l.files().iter().zip(fresh.files()) {
            assert_eq!(a.1, b.1, "{:?}", a.0.rel);
        }
        let mut d1: Vec<_> = l.dirs.iter().collect();
        let mut d2: Vec<_> = fresh.dirs.iter().collect();
        d1.sort();
        d2.sort();
        assert_eq!(d1, d2);
    }

    #[test]
    fn an_update_from_the_changed_directories_equals_a_fresh_walk() {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        for d in ["a/sub", "b/sub", "c", "gone/deep"] {
            fs::create_dir_all(r.join(d)).unwrap();
        }
        for f in [
            "a/x",
            "a/sub/f",
            "b/sub/f",
            "b/y",
            "c/z",
            "gone/deep/q",
            "top",
        ] {
            fs::write(r.join(f), f).unwrap();
        }
        let mut l = Listing::walk(r).unwrap();
        // Swap two directories, remove a tree, replace a file by a directory and back.
        fs::rename(r.join("a"), r.join("tmp")).unwrap();
        fs::rename(r.join("b"), r.join("a")).unwrap();
        fs::rename(r.join("tmp"), r.join("b")).unwrap();
        fs::remove_dir_all(r.join("gone")).unwrap();
        fs::remove_file(r.join("c/z")).unwrap();
        fs::create_dir(r.join("c/z")).unwrap();
        fs::write(r.join("c/z/inner"), "i").unwrap();
        fs::remove_file(r.join("top")).unwrap();
        fs::create_dir_all(r.join("top/new")).unwrap();
        fs::write(r.join("top/new/n"), "n").unwrap();
        fs::create_dir(r.join(".git")).unwrap();
        fs::write(r.join(".git/HEAD"), "h").unwrap();
        l.update(r, &all_dirs(r)).unwrap();
        same_as_walk(&l, r);
        assert!(paths(&l).contains(&"a/sub/f".to_string()));
        assert!(!paths(&l).iter().any(|p| p.starts_with("gone")));
        // And a directory back to a file.
        fs::remove_dir_all(r.join("top")).unwrap();
        fs::write(r.join("top"), "again").unwrap();
        l.update(r, &all_dirs(r)).unwrap();
        same_as_walk(&l, r);
    }

    #[test]
    fn written_files_are_read_again_and_unreported_ones_are_trusted() {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        fs::create_dir(r.join("d")).unwrap();
        fs::write(r.join("d/a"), "1").unwrap();
        fs::write(r.join("d/b"), "1").unwrap();
        let mut l = Listing::walk(r).unwrap();
        fs::write(r.join("d/a"), "22").unwrap();
        fs::write(r.join("d/b"), "22").unwrap();
        let c = Changes {
            dirs: Vec::new(),
            nodes: vec![b"d/a".to_vec(), b"d/.git/x".to_vec()],
        };
        l.update(r, &c).unwrap();
        let sizes: Vec<u64> = l.files().iter().map(|(_, k)| k.size).collect();
        // Only what the record reported was read again.
        assert_eq!(sizes, vec![2, 1]);
        assert!(l
            .files()
            .iter()
            .all(|(n, _)| !n.rel.as_bytes().contains(&b'.')));
    }

    #[test]
    fn path_helpers() {
        assert_eq!(child_name(b"", b"a"), Some(&b"a"[..]));
        assert_eq!(child_name(b"", b"a/b"), None);
        assert_eq!(child_name(b"a", b"a/b"), Some(&b"b"[..]));
        assert_eq!(child_name(b"a", b"ab/c"), None);
        assert_eq!(child_name(b"a", b"a"), None);
        let set: HashSet<Vec<u8>> = [b"a/b".to_vec()].into_iter().collect();
        assert!(under_any(b"a/b/c", &set));
        assert!(!under_any(b"a/bc", &set));
        assert!(!under_any(b"a/b", &set));
        assert!(in_git_dir(b"x/.git/y"));
        assert!(!in_git_dir(b"x/.git"));
    }
}
