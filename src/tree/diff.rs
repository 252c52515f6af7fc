//! Tree diff: what a sandbox changed relative to the session's base snapshot.
//!
//! Finalizing must cost what the delegation changed, not what the tree holds. When a sandbox
//! is created, the stat data of every node copied into it is recorded in a [`Manifest`]. At
//! finalize the sandbox is walked (one `lstat` per node, no reads); a node whose stat data
//! is unchanged and was equal to base when recorded is skipped. Everything else — changed
//! stat data, "racy" nodes whose ctime is not safely older than the recording, nodes a
//! chained sandbox inherited already changed — is compared by content against base. Without
//! a manifest (recovering a crashed session) every node is compared by content.

use std::fs;
use std::path::Path;

use crate::error::{IoContext, Result};
use crate::fs::relpath::RelPath;
use crate::fs::Timestamp;
use crate::git::oid::ObjectId;
use crate::patch::write::{self as patch_write, Side};
use crate::tree::snapshot::{self, Node, NodeKind, StatKey};

/// Where the diff reads base content from: a node's pre-image by its index in the base's
/// node list. The base decides whether that is a copy in `base/` or a blob in the object
/// store (see [`crate::tree::base`]).
pub trait BaseSource: Sync {
    /// The content of base node `i`: a file's bytes or a symlink's target.
    fn read(&self, i: usize) -> Result<Vec<u8>>;
    /// The size of base node `i` when cheaply known (lets unequal sizes skip reading).
    fn size(&self, i: usize) -> Option<u64>;
    /// The git blob id of base node `i`'s content when already known (a blob of the user's
    /// object store), so the patch's `index` line need not hash the pre-image again.
    /// Invariant: when `Some`, it is the id of exactly what [`BaseSource::read`] returns.
    fn blob_id(&self, _i: usize) -> Option<ObjectId> {
        None
    }
    /// Base node `i`'s regular file, opened, when its content can be read from it directly
    /// (a large file's patch is then written from the file in chunks, see
    /// [`crate::patch::large`]); `None`: only [`BaseSource::read`] gives it.
    fn open_file(&self, _i: usize) -> Option<fs::File> {
        None
    }
    /// Whether `f`, from [`BaseSource::open_file`]`(i)`, still holds node `i`'s content
    /// (checked after reading it).
    fn still_same(&self, _i: usize, _f: &fs::File) -> bool {
        true
    }
}

/// One node's recorded state in a sandbox.
#[derive(Clone, Debug)]
pub struct ManifestEntry {
    /// Path relative to the sandbox.
    pub rel: RelPath,
    /// Stat data of the sandbox's copy right after it was made.
    pub key: StatKey,
    /// Whether the copy was known to equal the base's node when recorded.
    pub same_as_base: bool,
}

/// First bytes of an encoded [`Manifest`] (format version 1).
const MANIFEST_MAGIC: &[u8] = b"patchbox-manifest-1\n";

/// The recorded state of a sandbox right after it was created, sorted by path bytes.
#[derive(Clone, Debug, Default)]
pub struct Manifest {
    entries: Vec<ManifestEntry>,
    /// The filesystem clock after the copy: entries with a ctime not older are racy.
    stamp: Timestamp,
}

impl Manifest {
    /// Builds a manifest; `entries` need not be sorted.
    pub fn new(mut entries: Vec<ManifestEntry>, stamp: Timestamp) -> Manifest {
        entries.sort_by(|a, b| a.rel.as_bytes().cmp(b.rel.as_bytes()));
        Manifest { entries, stamp }
    }

    /// The manifest as bytes, for keeping it beside the sandbox: crash recovery then diffs by
    /// stat data as finalize does, instead of reading every file.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(32 + self.entries.len() * 64);
        out.extend_from_slice(MANIFEST_MAGIC);
        for v in [self.stamp.secs, self.stamp.nanos] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&(self.entries.len() as u64).to_le_bytes());
        for e in &self.entries {
            let path = e.rel.as_bytes();
            out.extend_from_slice(&(path.len() as u32).to_le_bytes());
            out.extend_from_slice(path);
            out.extend_from_slice(&e.key.ino.to_le_bytes());
            out.extend_from_slice(&e.key.size.to_le_bytes());
            for v in [
                e.key.mtime.secs,
                e.key.mtime.nanos,
                e.key.ctime.secs,
                e.key.ctime.nanos,
            ] {
                out.extend_from_slice(&v.to_le_bytes());
            }
            out.extend_from_slice(&e.key.mode.to_le_bytes());
            out.push(u8::from(e.same_as_base));
        }
        out
    }

    /// Reads what [`Manifest::encode`] wrote; `None` when the bytes are not a whole manifest
    /// (then the caller compares by content).
    pub fn decode(data: &[u8]) -> Option<Manifest> {
        struct Cursor<'a>(&'a [u8]);
        impl Cursor<'_> {
            fn take(&mut self, n: usize) -> Option<&[u8]> {
                let (head, rest) = (self.0.get(..n)?, self.0.get(n..)?);
                self.0 = rest;
                Some(head)
            }
            fn u64(&mut self) -> Option<u64> {
                Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
            }
            fn i64(&mut self) -> Option<i64> {
                Some(i64::from_le_bytes(self.take(8)?.try_into().ok()?))
            }
            fn u32(&mut self) -> Option<u32> {
                Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
            }
        }
        let mut c = Cursor(data);
        if c.take(MANIFEST_MAGIC.len())? != MANIFEST_MAGIC {
            return None;
        }
        let stamp = Timestamp::new(c.i64()?, c.i64()?);
        let n = usize::try_from(c.u64()?).ok()?;
        // Each entry takes at least 57 bytes: a count beyond that is damage, not a manifest.
        let mut entries = Vec::with_capacity(n.min(data.len() / 57));
        for _ in 0..n {
            let len = c.u32()? as usize;
            let rel = RelPath::from_bytes(c.take(len)?).ok()?;
            let key = StatKey {
                ino: c.u64()?,
                size: c.u64()?,
                mtime: Timestamp::new(c.i64()?, c.i64()?),
                ctime: Timestamp::new(c.i64()?, c.i64()?),
                mode: c.u32()?,
            };
            let same_as_base = c.take(1)?[0] == 1;
            entries.push(ManifestEntry {
                rel,
                key,
                same_as_base,
            });
        }
        c.0.is_empty().then(|| Manifest::new(entries, stamp))
    }

    #[cfg(test)]
    fn lookup(&self, rel: &RelPath) -> Option<&ManifestEntry> {
        self.entries
            .binary_search_by(|e| e.rel.as_bytes().cmp(rel.as_bytes()))
            .ok()
            .map(|i| &self.entries[i])
    }

    /// True when the node at `rel`, now with stat data `now`, is certainly unchanged since
    /// recording and was equal to base then.
    #[cfg(test)]
    fn trusted_same(&self, rel: &RelPath, now: &StatKey) -> bool {
        self.lookup(rel).is_some_and(|e| self.trusts(e, now))
    }

    /// [`Manifest::trusted_same`] for paths asked in ascending order: `at` is where the
    /// previous answer stopped, so a listing's whole run costs one pass over the manifest
    /// instead of a binary search per path.
    fn trusted_same_from(&self, at: &mut usize, rel: &RelPath, now: &StatKey) -> bool {
        while self
            .entries
            .get(*at)
            .is_some_and(|e| e.rel.as_bytes() < rel.as_bytes())
        {
            *at += 1;
        }
        self.entries
            .get(*at)
            .is_some_and(|e| e.rel.as_bytes() == rel.as_bytes() && self.trusts(e, now))
    }

    fn trusts(&self, e: &ManifestEntry, now: &StatKey) -> bool {
        e.same_as_base && e.key == *now && e.key.ctime < self.stamp
    }
}

/// How one path differs between base and head.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    /// Path relative to the tree roots (and to the project).
    pub rel: RelPath,
    /// Index of the node in the base's node list, when it exists in base.
    pub base_index: Option<usize>,
    /// The node in base, `None` when added.
    pub old: Option<NodeKind>,
    /// The node in head, `None` when deleted.
    pub new: Option<NodeKind>,
}

/// The result of diffing a sandbox against base.
#[derive(Debug, Default)]
pub struct TreeDiff {
    /// Changed paths, sorted by path bytes (git's order).
    pub changes: Vec<Change>,
    /// New paths in head that the ignore rules exclude; not part of the patch.
    pub ignored: Vec<RelPath>,
}

/// Diffs `head_dir` against the base whose node list is `base` (sorted by path bytes) and
/// whose content `src` reads.
///
/// `manifest`: the head's recorded state, or `None` to compare everything by content.
/// `is_ignored`: decides whether a new path is an ignored output.
pub fn diff_trees(
    base: &[Node],
    src: &dyn BaseSource,
    head_dir: &Path,
    manifest: Option<&Manifest>,
    is_ignored: &dyn Fn(&RelPath) -> bool,
) -> Result<TreeDiff> {
    let head = snapshot::list_tree(head_dir)?;
    diff_listing(base, src, head_dir, &head, manifest, is_ignored)
}

/// [`diff_trees`] with the head already listed ([`snapshot::list_tree`] of `head_dir`), for
/// a caller that needs the listing too (a chained sandbox copies what it lists).
pub fn diff_listing(
    base: &[Node],
    src: &dyn BaseSource,
    head_dir: &Path,
    head: &[(Node, StatKey)],
    manifest: Option<&Manifest>,
    is_ignored: &dyn Fn(&RelPath) -> bool,
) -> Result<TreeDiff> {
    let mut out = TreeDiff::default();
    let (mut i, mut j) = (0, 0);
    // Where the manifest's search stopped: head is sorted, so it only moves forward.
    let mut at = 0usize;
    while i < base.len() || j < head.len() {
        let ord = match (base.get(i), head.get(j)) {
            (Some(b), Some(h)) => b.rel.as_bytes().cmp(h.0.rel.as_bytes()),
            (Some(_), None) => std::cmp::Ordering::Less,
            _ => std::cmp::Ordering::Greater,
        };
        match ord {
            std::cmp::Ordering::Less => {
                let b = &base[i];
                out.changes.push(Change {
                    rel: b.rel.clone(),
                    base_index: Some(i),
                    old: Some(b.kind),
                    new: None,
                });
                i += 1;
            }
            std::cmp::Ordering::Greater => {
                let (h, _) = &head[j];
                if is_ignored(&h.rel) {
                    out.ignored.push(h.rel.clone());
                } else {
                    out.changes.push(Change {
                        rel: h.rel.clone(),
                        base_index: None,
                        old: None,
                        new: Some(h.kind),
                    });
                }
                j += 1;
            }
            std::cmp::Ordering::Equal => {
                let b = &base[i];
                let (h, key) = &head[j];
                let trusted = manifest.is_some_and(|m| m.trusted_same_from(&mut at, &h.rel, key));
                if !trusted
                    && (b.kind != h.kind
                        || !same_content(src, i, &head_dir.join(h.rel.as_path()), h.kind, key)?)
                {
                    out.changes.push(Change {
                        rel: h.rel.clone(),
                        base_index: Some(i),
                        old: Some(b.kind),
                        new: Some(h.kind),
                    });
                }
                i += 1;
                j += 1;
            }
        }
    }
    Ok(out)
}

/// Reads a node's content: a file's bytes or a symlink's target.
pub fn read_node(path: &Path, kind: NodeKind) -> Result<Vec<u8>> {
    use std::os::unix::ffi::OsStrExt;
    match kind {
        NodeKind::Symlink => Ok(fs::read_link(path)
            .ctx("read symlink", path)?
            .as_os_str()
            .as_bytes()
            .to_vec()),
        NodeKind::File { .. } => fs::read(path).ctx("read", path),
    }
}

fn same_content(
    src: &dyn BaseSource,
    i: usize,
    head: &Path,
    kind: NodeKind,
    head_key: &StatKey,
) -> Result<bool> {
    if let (NodeKind::File { .. }, Some(n)) = (kind, src.size(i)) {
        if n != head_key.size {
            return Ok(false);
        }
    }
    Ok(src.read(i)? == read_node(head, kind)?)
}

/// Writes the git-style patch for `changes`, reading old content through `src` and new
/// content from `head_dir`. One file is held in memory at a time (plus the patch itself).
pub fn render_patch(src: &dyn BaseSource, head_dir: &Path, changes: &[Change]) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    for c in changes {
        if write_large_change(&mut out, src, head_dir, c) {
            continue;
        }
        let old_data = match c.base_index {
            Some(i) if c.old.is_some() => Some(src.read(i)?),
            _ => None,
        };
        let new_data = match c.new {
            Some(k) => Some(read_node(&head_dir.join(c.rel.as_path()), k)?),
            None => None,
        };
        write_change(&mut out, src, c, old_data.as_deref(), new_data.as_deref());
    }
    Ok(out)
}

/// A pre-image at least this large, changed into a regular file, has its patch written from
/// the files in chunks instead of from both contents in memory (see [`crate::patch::large`]).
const LARGE_FILE_MIN: u64 = 4 << 20;

/// Appends the patch of change `c` read from the files themselves when both sides are
/// regular files and the pre-image is large; `false` (nothing appended) when it does not
/// apply, or when anything goes wrong (the caller then reads both contents, and reports any
/// error with its path).
fn write_large_change(
    out: &mut Vec<u8>,
    src: &dyn BaseSource,
    head_dir: &Path,
    c: &Change,
) -> bool {
    use std::os::unix::fs::OpenOptionsExt;
    let (Some(i), Some(old @ NodeKind::File { .. }), Some(new @ NodeKind::File { .. })) =
        (c.base_index, c.old, c.new)
    else {
        return false;
    };
    if src.size(i).is_none_or(|n| n < LARGE_FILE_MIN) {
        return false;
    }
    let Some(old_file) = src.open_file(i) else {
        return false;
    };
    let Ok(new_file) = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(head_dir.join(c.rel.as_path()))
    else {
        return false;
    };
    let mark = out.len();
    let written = crate::patch::large::write_file_diff_from_files(
        out,
        crate::patch::large::FileSide {
            path: &c.rel,
            mode: old.git_mode(),
            file: &old_file,
            id: src.blob_id(i),
        },
        crate::patch::large::FileSide {
            path: &c.rel,
            mode: new.git_mode(),
            file: &new_file,
            id: None,
        },
        1 << 20,
    );
    if matches!(written, Ok(true)) && src.still_same(i, &old_file) {
        return true;
    }
    out.truncate(mark);
    false
}

/// Appends the patch of one change whose contents the caller has read already: `old` is
/// base node `c.base_index`'s content (as `src` reads it), `new` the head's.
pub fn write_change(
    out: &mut Vec<u8>,
    src: &dyn BaseSource,
    c: &Change,
    old: Option<&[u8]>,
    new: Option<&[u8]>,
) {
    let old_side = c.old.zip(old).map(|(k, d)| Side {
        path: &c.rel,
        mode: k.git_mode(),
        data: d,
    });
    let new_side = c.new.zip(new).map(|(k, d)| Side {
        path: &c.rel,
        mode: k.git_mode(),
        data: d,
    });
    let old_id = c.base_index.and_then(|i| src.blob_id(i));
    patch_write::write_file_diff_known(out, old_side, new_side, old_id);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_round_trips_and_refuses_damage() {
        let key = |n: i64| StatKey {
            ino: n as u64,
            size: 3,
            mtime: crate::fs::Timestamp::new(n, 5),
            ctime: crate::fs::Timestamp::new(n + 1, -1),
            mode: 0o100644,
        };
        let m = Manifest::new(
            vec![
                ManifestEntry {
                    rel: RelPath::new("b/c").unwrap(),
                    key: key(7),
                    same_as_base: false,
                },
                ManifestEntry {
                    rel: RelPath::new("a").unwrap(),
                    key: key(9),
                    same_as_base: true,
                },
            ],
            crate::fs::Timestamp::new(100, 200),
        );
        let bytes = m.encode();
        let back = Manifest::decode(&bytes).unwrap();
        assert_eq!(back.encode(), bytes);
        assert!(back.trusted_same(&RelPath::new("a").unwrap(), &key(9)));
        assert!(!back.trusted_same(&RelPath::new("b/c").unwrap(), &key(7)));
        for cut in [0, 5, bytes.len() - 1] {
            assert!(Manifest::decode(&bytes[..cut]).is_none(), "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(Manifest::decode(&longer).is_none());
    }
}
