//! Objects of a snapshot: hashing and writing loose objects ([`LooseWriter`]), the trees of a
//! sorted list of entries ([`write_trees`]) and the snapshot commit ([`commit_bytes`]).
//!
//! Objects are written only where the user's store does not already have them, so a clean
//! checkout costs hashing (its trees are all in the user's packs) and no writes; a dirty one
//! writes the blobs of its changed and untracked files and the trees on their paths.
//! Writes go to a directory of the session (never to the user's repository), each object to
//! a temporary name renamed into place, so two writers of one object are harmless.
//!
//! ```
//! use patchbox::git::private::objects::{tree_bytes, TreeItem};
//! // The empty tree has the id every git knows.
//! let (_, id) = tree_bytes(&mut Vec::<TreeItem>::new());
//! assert_eq!(id.to_hex(), "4b825dc642cb6eb9a060e54bf8d69288fbee4904");
//! ```

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

use flate2::write::ZlibEncoder;
use flate2::Compression;

use crate::error::{IoContext, Result};
use crate::fs::relpath::RelPath;
use crate::fs::state_dir::{self, StatePath};
use crate::git::odb::ObjectStore;
use crate::git::oid::{object_id, ObjectId, ObjectKind};
use crate::git::private::TreeEntry;

/// Writes loose objects into one objects directory, skipping those the user's store (or the
/// directory itself) already holds.
pub struct LooseWriter<'a> {
    dir: StatePath,
    user: Option<&'a ObjectStore>,
    wrote: AtomicBool,
}

impl<'a> LooseWriter<'a> {
    /// A writer into `dir` (an `objects` directory of the session; created on the first
    /// write), consulting `user` before writing.
    pub fn new(dir: StatePath, user: Option<&'a ObjectStore>) -> LooseWriter<'a> {
        LooseWriter {
            dir,
            user,
            wrote: AtomicBool::new(false),
        }
    }

    /// Whether any object was written (else the directory may not exist).
    pub fn wrote_any(&self) -> bool {
        self.wrote.load(Ordering::Relaxed)
    }

    /// The objects directory written to.
    pub fn dir(&self) -> &StatePath {
        &self.dir
    }

    /// Makes sure an object of `kind` with `data` exists and returns its id.
    pub fn write(&self, kind: ObjectKind, data: &[u8]) -> Result<ObjectId> {
        let oid = object_id(kind, data);
        if self.user.is_some_and(|u| u.contains_known(&oid)) {
            return Ok(oid);
        }
        let hex = oid.to_hex();
        let sub = self.dir.child(&RelPath::from_bytes(&hex.as_bytes()[..2])?);
        let file = sub.child(&RelPath::from_bytes(&hex.as_bytes()[2..])?);
        if state_dir::exists(&file)? {
            return Ok(oid);
        }
        state_dir::create_dir_all(&sub)?;
        let mut z = ZlibEncoder::new(Vec::with_capacity(data.len() / 2 + 64), Compression::fast());
        let shown = file.as_path();
        z.write_all(format!("{} {}\0", kind.as_str(), data.len()).as_bytes())
            .ctx("compress object", shown)?;
        z.write_all(data).ctx("compress object", shown)?;
        let packed = z.finish().ctx("compress object", shown)?;
        state_dir::write_file_replace(&file, &packed, 0o444)?;
        self.wrote.store(true, Ordering::Relaxed);
        Ok(oid)
    }
}

/// One entry of a tree object: name, git mode (`0o40000` for a tree) and id.
pub type TreeItem<'a> = (&'a [u8], u32, ObjectId);

/// The bytes and id of a tree holding `items`, which are sorted here the way git sorts a
/// tree (names compared as if a tree's name ended in `/`).
pub fn tree_bytes(items: &mut [TreeItem<'_>]) -> (Vec<u8>, ObjectId) {
    items.sort_by(tree_order);
    let mut out = Vec::with_capacity(items.len() * 40);
    for (name, mode, oid) in items.iter() {
        out.extend_from_slice(format!("{mode:o} ").as_bytes());
        out.extend_from_slice(name);
        out.push(0);
        out.extend_from_slice(oid.as_bytes());
    }
    let id = object_id(ObjectKind::Tree, &out);
    (out, id)
}

/// Git's order of tree entries (`base_name_compare`): bytes, a tree's name followed by `/`.
fn tree_order(a: &TreeItem<'_>, b: &TreeItem<'_>) -> std::cmp::Ordering {
    let n = a.0.len().min(b.0.len());
    a.0[..n].cmp(&b.0[..n]).then_with(|| {
        let next = |i: &TreeItem<'_>| match i.0.get(n) {
            Some(&c) => c,
            None if i.1 == 0o40000 => b'/',
            None => 0,
        };
        next(a).cmp(&next(b))
    })
}

/// Writes the trees of `entries` (sorted by path bytes, no path both a file and a directory)
/// and returns the root tree's id.
pub fn write_trees(entries: &[TreeEntry], w: &LooseWriter<'_>) -> Result<ObjectId> {
    subtree(entries, 0, w)
}

/// The tree of `entries`, all of whose paths share their first `at` bytes (a directory
/// prefix ending in `/`).
fn subtree(entries: &[TreeEntry], at: usize, w: &LooseWriter<'_>) -> Result<ObjectId> {
    let mut items: Vec<TreeItem<'_>> = Vec::new();
    let mut i = 0;
    while i < entries.len() {
        let rest = &entries[i].path.as_bytes()[at..];
        match memchr::memchr(b'/', rest) {
            None => {
                items.push((rest, entries[i].mode, entries[i].oid));
                i += 1;
            }
            Some(slash) => {
                // Paths sorted by bytes keep a directory's entries together.
                let dir = &rest[..=slash];
                let n = entries[i..]
                    .iter()
                    .take_while(|e| e.path.as_bytes()[at..].starts_with(dir))
                    .count();
                let id = subtree(&entries[i..i + n], at + slash + 1, w)?;
                items.push((&rest[..slash], 0o40000, id));
                i += n;
            }
        }
    }
    let (bytes, id) = tree_bytes(&mut items);
    let written = w.write(ObjectKind::Tree, &bytes)?;
    debug_assert_eq!(written, id);
    Ok(id)
}

/// The bytes of a commit of `tree` with `parent`, by `patchbox <patchbox@localhost>` at
/// `time` (seconds since the epoch, UTC), with `message`.
pub fn commit_bytes(
    tree: &ObjectId,
    parent: Option<&ObjectId>,
    time: u64,
    message: &str,
) -> Vec<u8> {
    let mut c = format!("tree {tree}\n");
    if let Some(p) = parent {
        c.push_str(&format!("parent {p}\n"));
    }
    let who = format!("patchbox <patchbox@localhost> {time} +0000");
    c.push_str(&format!("author {who}\ncommitter {who}\n\n{message}\n"));
    c.into_bytes()
}

/// The tree id named by a commit's `tree` line.
pub fn commit_tree(commit: &[u8]) -> Option<ObjectId> {
    let hex = commit.strip_prefix(b"tree ")?.get(..40)?;
    ObjectId::from_hex(std::str::from_utf8(hex).ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trees_sort_directories_as_if_they_ended_in_a_slash() {
        let b = ObjectId::from_bytes([1u8; 20]);
        // "a.c" < "a/" (0x2e < 0x2f), but "a0" > "a/".
        let mut items: Vec<TreeItem<'_>> = vec![
            (b"a0", 0o100644, b),
            (b"a", 0o40000, b),
            (b"a.c", 0o100644, b),
        ];
        tree_bytes(&mut items);
        let names: Vec<&[u8]> = items.iter().map(|i| i.0).collect();
        assert_eq!(names, [&b"a.c"[..], b"a", b"a0"]);
    }

    #[test]
    fn commit_tree_reads_the_tree_line() {
        let t = ObjectId::from_bytes([7u8; 20]);
        let c = commit_bytes(&t, None, 1, "m");
        assert_eq!(commit_tree(&c), Some(t));
        assert_eq!(commit_tree(b"junk"), None);
    }
}
