//! The git index (`<git_dir>/index`, versions 2, 3 and 4): [`read_index`] parses it into
//! [`IndexEntry`] values that keep the stat data, and [`IndexEntry::stat_matches`] tells, by
//! git's own rule, whether a file whose [`LStat`] is known certainly still has the indexed
//! content — so later stages can trust unchanged tracked files without reading them.

use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use sha1::{Digest, Sha1};

use crate::error::{Error, Result};
use crate::fs::Timestamp;
use crate::git::oid::ObjectId;

///
/// The stat fields are the (32-bit truncated) values git recorded when it last refreshed the
/// entry; comparing them with a fresh `lstat` tells whether the file may have changed.
///
/// ```
/// use patchbox::git::index::IndexEntry;
/// let e = IndexEntry { path: b"src/lib.rs".to_vec(), mode: 0o100644, ..Default::default() };
/// assert_eq!(e.stage(), 0);
/// assert!(!e.is_gitlink());
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IndexEntry {
    /// Path relative to the work tree root, `/`-separated, raw bytes.
    pub path: Vec<u8>,
    /// Git mode: `0o100644`, `0o100755`, `0o120000` (symlink) or `0o160000` (gitlink).
    pub mode: u32,
    /// The object id (SHA-1) of the blob (or commit, for a gitlink).
    pub oid: ObjectId,
    /// Change time (seconds, nanoseconds).
    pub ctime: (u32, u32),
    /// Modification time (seconds, nanoseconds).
    pub mtime: (u32, u32),
    /// Device number.
    pub dev: u32,
    /// Inode number.
    pub ino: u32,
    /// Owner user id.
    pub uid: u32,
    /// Owner group id.
    pub gid: u32,
    /// File size (truncated to 32 bits).
    pub size: u32,
    /// The raw 16-bit flags word (assume-valid `0x8000`, extended `0x4000`, stage `0x3000`,
    /// name length `0x0fff`).
    pub flags: u16,
    /// The extended flags word of version 3+ entries (skip-worktree `0x4000`, intent-to-add
    /// `0x2000`); 0 when absent.
    pub extended_flags: u16,
}

impl IndexEntry {
    /// Merge stage: 0 for a normal entry, 1–3 for the sides of an unresolved conflict.
    pub fn stage(&self) -> u8 {
        ((self.flags >> 12) & 3) as u8
    }

    /// True for a submodule commit (mode `160000`).
    pub fn is_gitlink(&self) -> bool {
        self.mode & 0o170000 == 0o160000
    }

    /// True for a symlink entry (mode `120000`).
    pub fn is_symlink(&self) -> bool {
        self.mode & 0o170000 == 0o120000
    }

    /// The assume-valid ("assume unchanged") bit.
    pub fn assume_valid(&self) -> bool {
        self.flags & 0x8000 != 0
    }

    /// The skip-worktree bit (sparse checkout).
    pub fn skip_worktree(&self) -> bool {
        self.extended_flags & 0x4000 != 0
    }

    /// The intent-to-add bit (`git add -N`).
    pub fn intent_to_add(&self) -> bool {
        self.extended_flags & 0x2000 != 0
    }

    /// A copy of the entry with an empty `path`: the stat data, mode, id and flags only, made
    /// without an allocation. For holders that key the entry by a path of their own.
    pub fn without_path(&self) -> IndexEntry {
        IndexEntry {
            path: Vec::new(),
            ..*self
        }
    }
}

/// The `lstat` fields git records in its index, at full width.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LStat {
    /// Size in bytes.
    pub size: u64,
    /// Modification time (seconds, nanoseconds).
    pub mtime: Timestamp,
    /// Change time (seconds, nanoseconds).
    pub ctime: Timestamp,
    /// Device.
    pub dev: u64,
    /// Inode.
    pub ino: u64,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// `st_mode`.
    pub mode: u32,
}

impl LStat {
    /// Reads the fields from (l)stat metadata.
    pub fn from_metadata(m: &fs::Metadata) -> LStat {
        LStat {
            size: m.size(),
            mtime: Timestamp::mtime_of(m),
            ctime: Timestamp::ctime_of(m),
            dev: m.dev(),
            ino: m.ino(),
            uid: m.uid(),
            gid: m.gid(),
            mode: m.mode(),
        }
    }
}

impl IndexEntry {
    /// True when a regular file with stat data `st` certainly has this entry's content, by
    /// git's own rule: every recorded stat field equal (as 32-bit values), the same exec
    /// bit, and the entry not "racy" — its mtime and ctime strictly older than the index file's
    /// `index_mtime`, since an edit in the same second as the index write would not show.
    /// Entries flagged assume-valid, skip-worktree or intent-to-add, and conflict stages,
    /// are never trusted.
    pub fn stat_matches(&self, st: &LStat, index_mtime: impl Into<Timestamp>) -> bool {
        let index_mtime = index_mtime.into();
        let exec = st.mode & 0o100 != 0;
        let mode_ok = match self.mode {
            0o100644 => !exec,
            0o100755 => exec,
            _ => false,
        };
        mode_ok
            && self.stage() == 0
            && !self.assume_valid()
            && !self.skip_worktree()
            && !self.intent_to_add()
            && st.mode & 0o170000 == 0o100000
            && self.size == st.size as u32
            && self.mtime == (st.mtime.secs as u32, st.mtime.nanos as u32)
            && self.ctime == (st.ctime.secs as u32, st.ctime.nanos as u32)
            && self.ino == st.ino as u32
            && self.dev == st.dev as u32
            && self.uid == st.uid
            && self.gid == st.gid
            && Timestamp::new(self.mtime.0 as i64, self.mtime.1 as i64) < index_mtime
            && Timestamp::new(self.ctime.0 as i64, self.ctime.1 as i64) < index_mtime
    }
}

/// Reads a git index file (versions 2, 3 and 4) and returns all its entries in file order
/// (sorted by path, then stage). A missing file is an empty index.
///
/// The trailing SHA-1 checksum is verified (an all-zero trailer, written with
/// `index.skipHash`, is accepted). Optional extensions (`TREE`, `REUC`, `UNTR`, …) are skipped;
/// a split index (`link`) or sparse index (`sdir`) is refused with [`Error::Git`], as is any
/// corruption.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// // Missing index: nothing tracked.
/// assert!(patchbox::git::index::read_index(&dir.path().join("index")).unwrap().is_empty());
/// // Garbage: an error, never a panic.
/// std::fs::write(dir.path().join("bad"), b"DIRC\0\0\0\x02junk").unwrap();
/// assert!(patchbox::git::index::read_index(&dir.path().join("bad")).is_err());
/// ```
pub fn read_index(index_file: &Path) -> Result<Vec<IndexEntry>> {
    read_index_and_tree(index_file).map(|(entries, _)| entries)
}

/// [`read_index`], and the id of the tree of the whole index when its cache-tree
/// extension (`TREE`) holds it valid: git keeps there the trees of the index as it last
/// wrote or read them, and drops an entry (and its parents) as soon as a path below it
/// changes. `None`: no extension, or the whole tree is not known.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let (entries, tree) =
///     patchbox::git::index::read_index_and_tree(&dir.path().join("index")).unwrap();
/// assert!(entries.is_empty() && tree.is_none());
/// ```
pub fn read_index_and_tree(index_file: &Path) -> Result<(Vec<IndexEntry>, Option<ObjectId>)> {
    let data = match fs::read(index_file) {
        Ok(d) => d,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((Vec::new(), None)),
        Err(e) => return Err(Error::io("read git index", index_file, e)),
    };
    parse_index(&data).map_err(|reason| Error::Git {
        path: index_file.to_path_buf(),
        reason,
    })
}

/// Parses the bytes of an index file, as [`read_index`] does a file (the error names no
/// file: its path is `index`).
pub fn parse_index_bytes(data: &[u8]) -> Result<Vec<IndexEntry>> {
    parse_index(data)
        .map(|(entries, _)| entries)
        .map_err(|reason| Error::Git {
            path: "index".into(),
            reason,
        })
}

fn be32(d: &[u8], at: usize) -> std::result::Result<u32, String> {
    d.get(at..at + 4)
        .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
        .ok_or_else(|| "truncated index".to_string())
}

fn be16(d: &[u8], at: usize) -> std::result::Result<u16, String> {
    d.get(at..at + 2)
        .map(|b| u16::from_be_bytes([b[0], b[1]]))
        .ok_or_else(|| "truncated index".to_string())
}

/// Git's offset varint (used by index v4 path compression).
fn decode_varint(d: &[u8]) -> Option<(usize, usize)> {
    let mut i = 0;
    let mut c = *d.get(i)?;
    i += 1;
    let mut val = u64::from(c & 0x7f);
    while c & 0x80 != 0 {
        val = val.checked_add(1)?;
        if val > (u64::MAX >> 7) {
            return None;
        }
        c = *d.get(i)?;
        i += 1;
        val = (val << 7) + u64::from(c & 0x7f);
    }
    Some((usize::try_from(val).ok()?, i))
}

/// The entries and the cache-tree's root (see [`read_index_and_tree`]).
type Parsed = (Vec<IndexEntry>, Option<ObjectId>);

fn parse_index(data: &[u8]) -> std::result::Result<Parsed, String> {
    if data.len() < 12 + 20 {
        return Err("index file too short".into());
    }
    if &data[..4] != b"DIRC" {
        return Err("bad index signature (expected DIRC)".into());
    }
    let version = be32(data, 4)?;
    if !(2..=4).contains(&version) {
        return Err(format!("unsupported index version {version}"));
    }
    let count = be32(data, 8)? as usize;
    let body_end = data.len() - 20;
    let trailer = &data[body_end..];
    let body = &data[..body_end];
    let verified = |digest: &[u8]| {
        if digest != trailer {
            return Err("index checksum mismatch (file is corrupt)".to_string());
        }
        Ok(())
    };
    if trailer.iter().all(|&b| b == 0) {
        return parse_entries(body, version, count);
    }
    if body.len() < PARALLEL_CHECKSUM_FROM {
        verified(Sha1::digest(body).as_slice())?;
        return parse_entries(body, version, count);
    }
    // The checksum of a large index (8 MB on the Linux tree) costs as much as its parse:
    // both run at once, and nothing parsed is returned unless the checksum holds.
    let (digest, parsed) = crate::cores::beside(
        || Sha1::digest(body),
        || parse_entries(body, version, count),
    );
    verified(digest.as_slice())?;
    parsed
}

/// Index bodies from this size on (bytes) have their checksum computed on a second thread.
const PARALLEL_CHECKSUM_FROM: usize = 1 << 20;

/// The entries and extensions of an index `body` (the file without its trailer), whose
/// header said `version` and `count`.
fn parse_entries(body: &[u8], version: u32, count: usize) -> std::result::Result<Parsed, String> {
    // 62 bytes is the smallest possible entry; don't trust `count` for the allocation.
    let mut entries = Vec::with_capacity(count.min(body.len() / 62 + 1));
    let mut pos = 12usize;
    let mut prev: Vec<u8> = Vec::new();
    for i in 0..count {
        let start = pos;
        if body.len() < start + 62 {
            return Err(format!("truncated index entry {i}"));
        }
        let w = |k: usize| be32(body, start + 4 * k);
        let mut raw = [0u8; 20];
        raw.copy_from_slice(&body[start + 40..start + 60]);
        let oid = ObjectId::from_bytes(raw);
        let flags = be16(body, start + 60)?;
        let mut e = IndexEntry {
            path: Vec::new(),
            ctime: (w(0)?, w(1)?),
            mtime: (w(2)?, w(3)?),
            dev: w(4)?,
            ino: w(5)?,
            mode: w(6)?,
            uid: w(7)?,
            gid: w(8)?,
            size: w(9)?,
            oid,
            flags,
            extended_flags: 0,
        };
        pos = start + 62;
        if flags & 0x4000 != 0 {
            if version < 3 {
                return Err(format!("entry {i} has extended flags in a version 2 index"));
            }
            let ext = be16(body, pos)?;
            if ext & !0x6000 != 0 {
                return Err(format!("entry {i} has unknown extended flags {ext:#06x}"));
            }
            e.extended_flags = ext;
            pos += 2;
        }
        if version == 4 {
            let (strip, n) = body
                .get(pos..)
                .and_then(decode_varint)
                .ok_or_else(|| format!("bad path compression in entry {i}"))?;
            pos += n;
            if strip > prev.len() {
                return Err(format!("bad path compression in entry {i}"));
            }
            let rest = body.get(pos..).unwrap_or(&[]);
            let nul = rest
                .iter()
                .position(|&b| b == 0)
                .ok_or_else(|| format!("unterminated path in entry {i}"))?;
            let mut path = Vec::with_capacity(prev.len() - strip + nul);
            path.extend_from_slice(&prev[..prev.len() - strip]);
            path.extend_from_slice(&rest[..nul]);
            pos += nul + 1;
            prev.clone_from(&path);
            e.path = path;
        } else {
            let namelen = usize::from(flags & 0x0fff);
            let rest = body.get(pos..).unwrap_or(&[]);
            let name_len = if namelen < 0x0fff {
                if rest.len() <= namelen || rest[..namelen].contains(&0) {
                    return Err(format!("bad path in entry {i}"));
                }
                namelen
            } else {
                rest.iter()
                    .position(|&b| b == 0)
                    .ok_or_else(|| format!("unterminated path in entry {i}"))?
            };
            e.path = rest[..name_len].to_vec();
            let ondisk = pos - start + name_len;
            pos = start + ((ondisk + 8) & !7);
            if pos > body.len() {
                return Err(format!("truncated index entry {i}"));
            }
        }
        entries.push(e);
    }
    // Extensions.
    let mut tree = None;
    while pos < body.len() {
        let sig = body
            .get(pos..pos + 4)
            .ok_or_else(|| "truncated index extension".to_string())?;
        let size = be32(body, pos + 4)? as usize;
        pos += 8;
        if size > body.len() - pos {
            return Err("truncated index extension".into());
        }
        match sig {
            b"link" => {
                return Err(
                    "split index (link extension) is not supported; run `git update-index --no-split-index`"
                        .into(),
                )
            }
            b"sdir" => {
                return Err(
                    "sparse index (sdir extension) is not supported; run `git sparse-checkout disable` or set index.sparse=false"
                        .into(),
                )
            }
            b"TREE" => tree = cache_tree_root(&body[pos..pos + size]),
            s if s[0].is_ascii_uppercase() => {}
            s => {
                return Err(format!(
                    "unknown required index extension {:?}",
                    String::from_utf8_lossy(s)
                ))
            }
        }
        pos += size;
    }
    // Checked only now: a split index has nameless entries, but was refused above.
    if let Some(i) = entries.iter().position(|e| e.path.is_empty()) {
        return Err(format!("empty path in entry {i}"));
    }
    Ok((entries, tree))
}

/// The tree id of the root entry of a cache-tree extension's `data`, when valid. The root
/// entry comes first: an empty path, its NUL, the number of index entries it covers in
/// ASCII (`-1`: invalid), a space, the number of subtrees, a newline, then the id. Anything
/// else (a malformed extension is no error: git would rebuild it) is `None`.
fn cache_tree_root(data: &[u8]) -> Option<ObjectId> {
    let rest = data.strip_prefix(b"\0")?;
    let line_end = rest.iter().position(|&b| b == b'\n')?;
    let (counts, after) = (&rest[..line_end], &rest[line_end + 1..]);
    let covered = counts.split(|&b| b == b' ').next()?;
    if covered.is_empty() || !covered.iter().all(u8::is_ascii_digit) {
        return None; // "-1": the whole tree is not known
    }
    let raw: [u8; 20] = after.get(..20)?.try_into().ok()?;
    Some(ObjectId::from_bytes(raw))
}

/// One entry per path, sorted: stage 0 if present, else stage 2 ("ours"), else the first.
pub(crate) fn dedup_tracked(mut entries: Vec<IndexEntry>) -> Vec<IndexEntry> {
    if !entries.windows(2).all(|w| w[0].path <= w[1].path) {
        entries.sort_by(|a, b| a.path.cmp(&b.path).then(a.stage().cmp(&b.stage())));
    }
    // In place: a second list of 78,000 entries would be 9 MB of fresh memory.
    let rank = |s: u8| match s {
        0 => 0,
        2 => 1,
        _ => 2,
    };
    entries.dedup_by(|later, kept| {
        if later.path != kept.path {
            return false;
        }
        if rank(later.stage()) < rank(kept.stage()) {
            std::mem::swap(later, kept);
        }
        true
    });
    entries
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry_bytes(path: &[u8], mode: u32, ext: Option<u16>) -> Vec<u8> {
        let mut v = Vec::new();
        for x in [1u32, 2, 3, 4, 5, 6, mode, 7, 8, 9] {
            v.extend_from_slice(&x.to_be_bytes());
        }
        v.extend_from_slice(&[0xab; 20]);
        let mut flags = path.len().min(0xfff) as u16;
        if ext.is_some() {
            flags |= 0x4000;
        }
        v.extend_from_slice(&flags.to_be_bytes());
        if let Some(x) = ext {
            v.extend_from_slice(&x.to_be_bytes());
        }
        v
    }

    fn finish(mut v: Vec<u8>) -> Vec<u8> {
        let d = Sha1::digest(&v);
        v.extend_from_slice(&d);
        v
    }

    fn header(version: u32, n: u32) -> Vec<u8> {
        let mut v = b"DIRC".to_vec();
        v.extend_from_slice(&version.to_be_bytes());
        v.extend_from_slice(&n.to_be_bytes());
        v
    }

    fn v2_entry(path: &[u8], ext: Option<u16>) -> Vec<u8> {
        let mut e = entry_bytes(path, 0o100644, ext);
        e.extend_from_slice(path);
        let len = e.len();
        e.resize((len + 8) & !7, 0);
        e
    }

    /// An index large enough for the checksum to run beside the parse: read whole when it
    /// holds, refused when one byte anywhere in its entries differs.
    #[test]
    fn a_large_index_is_checked_while_parsed() {
        let n = 12_000u32;
        let mut v = header(2, n);
        for i in 0..n {
            v.extend(v2_entry(
                format!("dir{:03}/file-{i:08}.txt", i / 100).as_bytes(),
                None,
            ));
        }
        let good = finish(v);
        assert!(good.len() > PARALLEL_CHECKSUM_FROM);
        let entries = parse_index(&good).unwrap().0;
        assert_eq!(entries.len(), n as usize);
        assert_eq!(entries[11_999].path, b"dir119/file-00011999.txt");
        // A flipped bit in an entry's stat data: structurally valid, caught by the checksum.
        let mut bad = good.clone();
        bad[(good.len() / 2) & !63] ^= 1;
        let e = parse_index(&bad).unwrap_err();
        assert!(e.contains("checksum mismatch"), "{e}");
    }

    #[test]
    fn the_cache_tree_root_is_read_only_when_valid() {
        let id = [7u8; 20];
        let mut valid = b"\x0012 2\n".to_vec();
        valid.extend_from_slice(&id);
        valid.extend_from_slice(b"sub\x003 0\n");
        assert_eq!(cache_tree_root(&valid), Some(ObjectId::from_bytes(id)));
        assert_eq!(cache_tree_root(b"\x00-1 2\nsub\x00-1 0\n"), None);
        assert_eq!(cache_tree_root(b"\x0012 2\n0123"), None, "a truncated id");
        assert_eq!(cache_tree_root(b"sub\x003 0\n"), None, "not the root first");
        assert_eq!(cache_tree_root(b""), None);
    }

    #[test]
    fn parses_v2_and_v3() {
        let mut v = header(3, 2);
        v.extend(v2_entry(b"a/b", None));
        v.extend(v2_entry(b"c", Some(0x4000)));
        let es = parse_index(&finish(v)).unwrap().0;
        assert_eq!(es.len(), 2);
        assert_eq!(es[0].path, b"a/b");
        assert_eq!(es[0].ctime, (1, 2));
        assert_eq!(es[0].size, 9);
        assert_eq!(es[0].mode, 0o100644);
        assert!(es[1].skip_worktree());
    }

    #[test]
    fn parses_long_names() {
        // Name length 0xfff means "4095 or more": the name runs to its NUL.
        let long = vec![b'n'; 5000];
        let mut v = header(2, 2);
        v.extend(v2_entry(&long, None));
        v.extend(v2_entry(b"z", None));
        let es = parse_index(&finish(v)).unwrap().0;
        assert_eq!(es[0].path, long);
        assert_eq!(es[1].path, b"z");
    }

    #[test]
    fn parses_v4_prefix_compression() {
        let mut v = header(4, 3);
        for (strip, suffix) in [(0u8, &b"dir/aaa"[..]), (3, b"bbb"), (7, b"x")] {
            v.extend(entry_bytes(b"", 0o100644, None));
            v.push(strip);
            v.extend_from_slice(suffix);
            v.push(0);
        }
        let es = parse_index(&finish(v)).unwrap().0;
        let paths: Vec<_> = es.iter().map(|e| e.path.clone()).collect();
        assert_eq!(
            paths,
            [b"dir/aaa".to_vec(), b"dir/bbb".to_vec(), b"x".to_vec()]
        );
    }

    #[test]
    fn rejects_corruption_without_panicking() {
        let mut v = header(2, 1);
        v.extend(v2_entry(b"file", None));
        let good = finish(v);
        assert!(parse_index(&good).is_ok());
        // Every truncation and every single-byte flip must be an error, not a panic.
        for n in 0..good.len() {
            assert!(parse_index(&good[..n]).is_err());
        }
        for i in 0..good.len() - 20 {
            let mut b = good.clone();
            b[i] ^= 0x40;
            assert!(parse_index(&b).is_err());
        }
        // Bogus entry counts with a valid checksum.
        let mut v = header(4, u32::MAX);
        v.extend(entry_bytes(b"", 0, None));
        v.extend_from_slice(&[0xff; 12]);
        assert!(parse_index(&finish(v)).is_err());
    }

    #[test]
    fn refuses_split_and_sparse() {
        for sig in [b"link", b"sdir"] {
            let mut v = header(2, 0);
            v.extend_from_slice(sig);
            v.extend_from_slice(&0u32.to_be_bytes());
            let e = parse_index(&finish(v)).unwrap_err();
            assert!(e.contains("not supported"), "{e}");
        }
        let mut v = header(2, 0);
        v.extend_from_slice(b"TREE");
        v.extend_from_slice(&1u32.to_be_bytes());
        v.push(0);
        assert!(parse_index(&finish(v)).is_ok());
    }

    #[test]
    fn varint_matches_git() {
        assert_eq!(decode_varint(&[0x05]), Some((5, 1)));
        assert_eq!(decode_varint(&[0x80, 0x00]), Some((128, 2)));
        assert_eq!(decode_varint(&[0x80]), None);
        assert_eq!(decode_varint(&[0xff; 20]), None);
    }
}
