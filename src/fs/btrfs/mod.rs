//! Btrfs's own change record: which inodes of a subvolume a transaction wrote after a given
//! generation, learned from the filesystem's b-tree without reading any directory.
//!
//! Every write, `chmod`, rename, link or unlink updates the inode item of the file and of its
//! directory, and Btrfs stamps each inode item with the transaction that wrote it last
//! (`transid`), each file extent with the one that wrote its data, and each tree block with
//! the newest of its items. A search of the subvolume's tree from generation `G` on visits
//! only the blocks written since `G` (the kernel skips older subtrees), so it costs what
//! changed, not what the tree holds — what `btrfs subvolume find-new` does.
//!
//! [`Tracker`] wraps that for a sandbox that is a subvolume of its own: [`Tracker::mark`]
//! commits what was written so far and returns the generation a later
//! [`Tracker::changed_since`] starts from. The tree search needs `CAP_SYS_ADMIN`;
//! [`Tracker::open`] answers `None` without it, or on any other filesystem, and callers walk
//! instead.

pub mod ioctl;

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use ioctl::{le16, le32, le64, Key};

/// `statfs`'s `f_type` of a Btrfs filesystem.
const BTRFS_SUPER_MAGIC: i64 = 0x9123_683e;
/// The inode number of a subvolume's root directory (`BTRFS_FIRST_FREE_OBJECTID`).
pub const SUBVOLUME_ROOT_INO: u64 = 256;
/// The last inode number of a subvolume (`BTRFS_LAST_FREE_OBJECTID`).
const LAST_INO: u64 = u64::MAX - 255;
const ROOT_TREE: u64 = 1;
const INODE_ITEM: u8 = 1;
const INODE_REF: u8 = 12;
const INODE_EXTREF: u8 = 13;
const EXTENT_DATA: u8 = 108;
const ROOT_ITEM: u8 = 132;
const ROOT_REF: u8 = 156;
/// Size of `struct btrfs_inode_item`, which opens a root item too.
const INODE_ITEM_SIZE: usize = 160;

/// A Btrfs transaction id: a point in the filesystem's history.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Generation(pub u64);

/// One inode written after a generation, with its current paths from the subvolume's root
/// (no leading or trailing `/`; the root itself is the empty path).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Changed {
    /// The inode number (`st_ino`).
    pub ino: u64,
    /// Whether it is a directory (its entries changed, or it moved).
    pub is_dir: bool,
    /// Where it is now: one path per hard link; none for an inode being deleted.
    pub paths: Vec<Vec<u8>>,
}

/// The change record of one subvolume: an open descriptor of its root directory, and its
/// tree id. Holding one proves the directory is a subvolume's root on Btrfs and that this
/// process may search its tree.
#[derive(Debug)]
pub struct Tracker {
    root: File,
    path: PathBuf,
    tree_id: u64,
}

/// Creates directory `name` in `dir` as a Btrfs subvolume, so that a [`Tracker`] can follow
/// it and [`snapshot_of`] can copy it at once. `Ok(false)`: not Btrfs, not root (only root
/// may search a subvolume's tree, and remove one that is not empty), or the kernel refused;
/// nothing was created, and the caller makes a plain directory.
pub fn create_subvolume_in(dir: &Path, name: &std::ffi::OsStr) -> io::Result<bool> {
    if !rustix::process::geteuid().is_root() {
        return Ok(false);
    }
    let d = File::open(dir)?;
    if !is_btrfs(&d) {
        return Ok(false);
    }
    match ioctl::create_subvolume(d.as_fd(), name) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Err(e),
        Err(_) => Ok(false),
    }
}

/// Makes `name` in `dir` a writable snapshot of `source`, when `source` is a subvolume's root
/// on Btrfs and this process is root; `Ok(false)` (nothing made) otherwise. The snapshot
/// shares every file with `source` until one of them is written: a copy of any size in one
/// transaction.
pub fn snapshot_of(source: &Path, dir: &Path, name: &std::ffi::OsStr) -> io::Result<bool> {
    if !rustix::process::geteuid().is_root() {
        return Ok(false);
    }
    let src = File::open(source)?;
    if !is_btrfs(&src) || rustix::fs::fstat(&src)?.st_ino != SUBVOLUME_ROOT_INO {
        return Ok(false);
    }
    let d = File::open(dir)?;
    match ioctl::snapshot(src.as_fd(), d.as_fd(), name) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Err(e),
        Err(_) => Ok(false),
    }
}

fn is_btrfs(f: &File) -> bool {
    // `f_type`'s width differs between targets.
    #[allow(clippy::unnecessary_cast)]
    rustix::fs::fstatfs(f).is_ok_and(|s| s.f_type as i64 == BTRFS_SUPER_MAGIC)
}

impl Tracker {
    /// The tracker of the subvolume whose root is `path`; `None` when `path` is not a
    /// subvolume's root on Btrfs or the tree search is not permitted here.
    pub fn open(path: &Path) -> Option<Tracker> {
        let root = File::open(path).ok()?;
        if !is_btrfs(&root) {
            return None;
        }
        let st = rustix::fs::fstat(&root).ok()?;
        if st.st_ino != SUBVOLUME_ROOT_INO {
            return None;
        }
        let (tree_id, _) = ioctl::dir_path(root.as_fd(), SUBVOLUME_ROOT_INO).ok()?;
        let t = Tracker {
            root,
            path: path.to_path_buf(),
            tree_id,
        };
        // The search is the privileged part: prove it works before promising anything.
        t.root_generation().ok()?;
        Some(t)
    }

    /// The subvolume's root directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether [`Tracker::path`] still names the subvolume this tracker follows (not one
    /// made in its place after it was removed or moved away).
    pub fn still_at_path(&self) -> bool {
        match (rustix::fs::fstat(&self.root), rustix::fs::stat(&self.path)) {
            (Ok(a), Ok(b)) => a.st_dev == b.st_dev && a.st_ino == b.st_ino,
            _ => false,
        }
    }

    /// Commits what was written in the filesystem so far (`syncfs`), then returns the
    /// subvolume's generation: every later write, and every write this commit did not
    /// include, carries a greater transaction id, so [`Tracker::changed_since`] of the
    /// returned value misses none of them.
    pub fn mark(&self) -> io::Result<Generation> {
        rustix::fs::syncfs(&self.root).map_err(io::Error::from)?;
        self.root_generation()
    }

    /// Whether another subvolume (or snapshot) was made inside this one: its writes go to
    /// its own tree, which [`Tracker::changed_since`] does not search.
    pub fn has_nested(&self) -> io::Result<bool> {
        let mut found = false;
        self.own_root_items(ROOT_REF, |_| found = true)?;
        Ok(found)
    }

    /// The generation of the subvolume's last committed change (its root item's).
    fn root_generation(&self) -> io::Result<Generation> {
        let mut g = None;
        self.own_root_items(ROOT_ITEM, |item| {
            if item.len() >= INODE_ITEM_SIZE + 8 {
                g = Some(le64(item, INODE_ITEM_SIZE));
            }
        })?;
        g.map(Generation)
            .ok_or_else(|| io::Error::other("no root item for the subvolume"))
    }

    /// Every item of type `kind` the root tree keeps about this subvolume.
    fn own_root_items(&self, kind: u8, mut each: impl FnMut(&[u8])) -> io::Result<()> {
        let k = |offset| Key {
            objectid: self.tree_id,
            kind,
            offset,
        };
        ioctl::search(
            self.root.as_fd(),
            ROOT_TREE,
            k(0),
            k(u64::MAX),
            0,
            |_, item| each(item),
        )
    }

    /// The inodes written after `since` (an earlier [`Tracker::mark`]) that the tree holds:
    /// call it right after a new mark, whose `syncfs` put every write made before it into
    /// the tree. A write racing the call may or may not be in the answer; it is in the
    /// answer from the new mark.
    pub fn changed_since(&self, since: Generation) -> io::Result<Vec<Changed>> {
        let fd = self.root.as_fd();
        let after = since.0;
        // ino → is a directory (None: seen by its extents only, so not a directory).
        let mut changed: HashMap<u64, Option<bool>> = HashMap::new();
        let mut refs: HashMap<u64, Vec<(u64, Vec<u8>)>> = HashMap::new();
        let from = Key {
            objectid: SUBVOLUME_ROOT_INO,
            kind: 0,
            offset: 0,
        };
        let to = Key {
            objectid: LAST_INO,
            kind: u8::MAX,
            offset: u64::MAX,
        };
        ioctl::search(fd, 0, from, to, after + 1, |key, item| match key.kind {
            // `transid` (the last writer) of an inode item; `mode` says a directory.
            INODE_ITEM if item.len() >= INODE_ITEM_SIZE && le64(item, 8) > after => {
                let mode = le32(item, 52);
                changed.insert(key.objectid, Some(mode & 0o170000 == 0o040000));
            }
            // A file extent's `generation`: data written without the inode item changing.
            EXTENT_DATA if item.len() >= 8 && le64(item, 0) > after => {
                changed.entry(key.objectid).or_insert(None);
            }
            INODE_REF | INODE_EXTREF => {
                refs.entry(key.objectid)
                    .or_default()
                    .extend(parse_refs(key, item));
            }
            _ => {}
        })?;
        let mut dirs: HashMap<u64, Vec<u8>> = HashMap::new();
        let mut out = Vec::with_capacity(changed.len());
        for (ino, is_dir) in changed {
            let is_dir = is_dir.unwrap_or(false);
            let mut paths = Vec::new();
            if is_dir {
                match ioctl::dir_path(fd, ino) {
                    Ok((_, mut p)) => {
                        if p.last() == Some(&b'/') {
                            p.pop();
                        }
                        paths.push(p);
                    }
                    // Deleted since: its parent's change tells the rest.
                    Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
                    Err(e) => return Err(e),
                }
            } else {
                // The refs the changed leaves carried; the others are looked up (a ref
                // may sit in an older neighbour leaf).
                let own = match refs.remove(&ino) {
                    Some(r) => r,
                    None => self.refs_of(ino)?,
                };
                for (parent, name) in own {
                    let dir = match dirs.get(&parent) {
                        Some(d) => d.clone(),
                        None => match ioctl::dir_path(fd, parent) {
                            Ok((_, d)) => {
                                dirs.insert(parent, d.clone());
                                d
                            }
                            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => continue,
                            Err(e) => return Err(e),
                        },
                    };
                    let mut p = dir;
                    p.extend_from_slice(&name);
                    paths.push(p);
                }
            }
            out.push(Changed { ino, is_dir, paths });
        }
        out.sort_by_key(|c| c.ino);
        Ok(out)
    }

    /// Every (parent directory, name) link of inode `ino`, whatever their age.
    fn refs_of(&self, ino: u64) -> io::Result<Vec<(u64, Vec<u8>)>> {
        let mut out = Vec::new();
        let k = |kind, offset| Key {
            objectid: ino,
            kind,
            offset,
        };
        ioctl::search(
            self.root.as_fd(),
            0,
            k(INODE_REF, 0),
            k(INODE_EXTREF, u64::MAX),
            0,
            |key, item| out.extend(parse_refs(key, item)),
        )?;
        Ok(out)
    }
}

/// The (parent directory, name) pairs of an `INODE_REF` (parent in the key; several names
/// packed) or an `INODE_EXTREF` (parent in each record) item.
fn parse_refs(key: Key, item: &[u8]) -> Vec<(u64, Vec<u8>)> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    loop {
        let (parent, name_at) = match key.kind {
            INODE_REF => (key.offset, pos + 10),
            INODE_EXTREF => (le64(item, pos), pos + 18),
            _ => return out,
        };
        let Some(len_at) = name_at.checked_sub(2) else {
            return out;
        };
        let len = le16(item, len_at) as usize;
        let Some(name) = item.get(name_at..name_at + len) else {
            return out;
        };
        // The subvolume root's own ref (`..` to itself) names no path.
        if parent != key.objectid {
            out.push((parent, name.to_vec()));
        }
        pos = name_at + len;
        if pos >= item.len() {
            return out;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inode_refs_unpack_every_name() {
        // Two links of inode 300 in directory 257: "a" and "bc".
        let mut item = Vec::new();
        for (index, name) in [(2u64, &b"a"[..]), (3, b"bc")] {
            item.extend_from_slice(&index.to_le_bytes());
            item.extend_from_slice(&(name.len() as u16).to_le_bytes());
            item.extend_from_slice(name);
        }
        let key = Key {
            objectid: 300,
            kind: INODE_REF,
            offset: 257,
        };
        assert_eq!(
            parse_refs(key, &item),
            vec![(257, b"a".to_vec()), (257, b"bc".to_vec())]
        );
        // An extended ref carries its parent in the record.
        let mut ext = Vec::new();
        ext.extend_from_slice(&258u64.to_le_bytes());
        ext.extend_from_slice(&9u64.to_le_bytes());
        ext.extend_from_slice(&3u16.to_le_bytes());
        ext.extend_from_slice(b"xyz");
        let key = Key {
            kind: INODE_EXTREF,
            offset: 12345,
            ..key
        };
        assert_eq!(parse_refs(key, &ext), vec![(258, b"xyz".to_vec())]);
        // Truncated items give what they hold, never panic.
        assert_eq!(parse_refs(key, &ext[..20]), vec![]);
    }
}
