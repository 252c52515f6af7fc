//! Read-only access to a git repository's object store.
//!
//! A snapshot of a clean git project does not need to copy tracked files whose content is
//! already in the user's object store: when the library later needs the base version of such a
//! file, it reads the blob by its id from `<git_dir>/objects` with [`ObjectStore::read_blob`].
//!
//! The reader is native (no `git` process) and **strictly read-only**: files are only ever
//! opened for reading; no lock file, index, pack, `.rev`/`.bitmap` or loose object is created,
//! touched or rewritten, so the user's repository is never written.
//!
//! Supported:
//! - loose objects (`objects/xx/<38 hex>`, zlib, `<type> <len>\0` header);
//! - packs (`objects/pack/*.idx` versions 1 and 2, including the large-offset table, and the
//!   matching `.pack`), with `OFS_DELTA` and `REF_DELTA` chains resolved iteratively (a
//!   `REF_DELTA` base may live in another pack, a loose file or an alternate);
//! - `objects/info/alternates`, recursively (relative entries are resolved against the objects
//!   directory that names them), and linked worktrees (`<git_dir>/commondir`);
//! - packs that appear after [`ObjectStore::open`] (e.g. a concurrent `git gc`): on a miss the
//!   pack directories are rescanned once before the object is reported missing.
//!
//! Every object that is returned has had its SHA-1 (`<type> <len>\0` + content) checked against
//! the requested id, so corrupt or mismatched data is an error, never silently wrong content.
//! Input-dependent failures (corrupt indexes, truncated packs, bad zlib streams, absurd sizes)
//! are [`Error::Git`] values, never panics. Only SHA-1 repositories are supported; opening a
//! repository with `extensions.objectFormat = sha256` is an error.
//!
//! A small LRU cache of recently reconstructed pack objects makes reading many versions of the
//! same file (which share delta bases) cheap.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;
use std::io::{BufReader, Read};
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use flate2::bufread::ZlibDecoder;
use parking_lot::{Mutex, RwLock};
use sha1::{Digest, Sha1};

use crate::error::{Error, IoContext, Result};

/// Longest delta chain that is followed before the data is declared corrupt (git's own
/// `pack-objects --depth` is capped at 4095).
const MAX_CHAIN: usize = 10_000;
/// How many times a `REF_DELTA` base may be looked up outside its own pack, nested.
const MAX_CROSS_DEPTH: u32 = 64;
/// Alternates nesting limit (git uses 5).
const MAX_ALTERNATE_DEPTH: u32 = 5;
/// `.idx` files up to this size are read into memory; larger ones are searched with `pread`.
const IDX_IN_MEMORY_MAX: u64 = 16 << 20;
/// Total bytes kept by the reconstructed-object cache.
const CACHE_BUDGET: usize = 16 << 20;
/// Upper bound for a speculative allocation made from a size read out of the repository; the
/// buffer grows past it only as real data arrives.
const PREALLOC_MAX: u64 = 16 << 20;

/// The four object types of git.
///
/// ```
/// use patchbox::git::odb::ObjectKind;
/// assert_eq!(ObjectKind::Blob.as_str(), "blob");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ObjectKind {
    /// A commit.
    Commit,
    /// A tree (directory listing).
    Tree,
    /// A blob (file content).
    Blob,
    /// An annotated tag.
    Tag,
}

impl ObjectKind {
    /// The name git uses in object headers (`"blob"`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            ObjectKind::Commit => "commit",
            ObjectKind::Tree => "tree",
            ObjectKind::Blob => "blob",
            ObjectKind::Tag => "tag",
        }
    }

    fn from_name(name: &[u8]) -> Option<ObjectKind> {
        match name {
            b"commit" => Some(ObjectKind::Commit),
            b"tree" => Some(ObjectKind::Tree),
            b"blob" => Some(ObjectKind::Blob),
            b"tag" => Some(ObjectKind::Tag),
            _ => None,
        }
    }

    fn from_pack_type(t: u8) -> Option<ObjectKind> {
        match t {
            1 => Some(ObjectKind::Commit),
            2 => Some(ObjectKind::Tree),
            3 => Some(ObjectKind::Blob),
            4 => Some(ObjectKind::Tag),
            _ => None,
        }
    }
}

/// Parses a 40-digit hexadecimal object id (either case).
///
/// ```
/// use patchbox::git::odb::{oid_from_hex, oid_to_hex};
/// let hex = "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"; // the empty blob
/// let oid = oid_from_hex(hex).unwrap();
/// assert_eq!(oid_to_hex(&oid), hex);
/// assert!(oid_from_hex("xyz").is_none());
/// ```
pub fn oid_from_hex(hex: &str) -> Option<[u8; 20]> {
    let b = hex.as_bytes();
    if b.len() != 40 {
        return None;
    }
    let nib = |c: u8| -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            b'A'..=b'F' => Some(c - b'A' + 10),
            _ => None,
        }
    };
    let mut out = [0u8; 20];
    for (i, o) in out.iter_mut().enumerate() {
        *o = (nib(b[2 * i])? << 4) | nib(b[2 * i + 1])?;
    }
    Some(out)
}

/// Formats an object id as 40 lowercase hexadecimal digits.
///
/// ```
/// assert_eq!(patchbox::git::odb::oid_to_hex(&[0xab; 20]), "ab".repeat(20));
/// ```
pub fn oid_to_hex(oid: &[u8; 20]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(40);
    for &b in oid {
        s.push(HEX[(b >> 4) as usize] as char);
        s.push(HEX[(b & 15) as usize] as char);
    }
    s
}

/// The id git gives an object of `kind` with `data`: SHA-1 of `<kind> <len>\0` + data.
///
/// ```
/// use patchbox::git::odb::{object_id, oid_to_hex, ObjectKind};
/// assert_eq!(
///     oid_to_hex(&object_id(ObjectKind::Blob, b"")),
///     "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"
/// );
/// ```
pub fn object_id(kind: ObjectKind, data: &[u8]) -> [u8; 20] {
    let mut h = Sha1::new();
    h.update(kind.as_str().as_bytes());
    h.update(b" ");
    h.update(data.len().to_string().as_bytes());
    h.update([0u8]);
    h.update(data);
    h.finalize().into()
}

fn git_err(path: &Path, reason: impl Into<String>) -> Error {
    Error::Git {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

/// Maps an error from reading a zlib stream: data errors are corruption ([`Error::Git`]),
/// anything else is an I/O failure.
fn stream_err(path: &Path, what: &str, e: std::io::Error) -> Error {
    use std::io::ErrorKind::*;
    match e.kind() {
        InvalidData | InvalidInput | UnexpectedEof => git_err(path, format!("{what}: {e}")),
        _ => Error::io("read object data", path, e),
    }
}

/// Reads as many bytes as are available at `off`, up to `buf.len()`.
fn read_at_most(file: &File, off: u64, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match file.read_at(&mut buf[got..], off + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

// ---------------------------------------------------------------------------------------------
// Pack index
// ---------------------------------------------------------------------------------------------

enum IdxData {
    Mem(Vec<u8>),
    File(File),
}

/// A parsed `.idx` (version 1 or 2).
struct Idx {
    path: PathBuf,
    data: IdxData,
    len: u64,
    version: u32,
    count: u32,
    fanout: Box<[u32; 256]>,
    large_count: u64,
    pack_checksum: [u8; 20],
}

impl Idx {
    fn open(path: &Path) -> Result<Idx> {
        let mut f = File::open(path).ctx("open pack index", path)?;
        let len = f.metadata().ctx("stat pack index", path)?.len();
        let data = if len <= IDX_IN_MEMORY_MAX {
            let mut v = Vec::with_capacity(len as usize);
            f.read_to_end(&mut v).ctx("read pack index", path)?;
            IdxData::Mem(v)
        } else {
            IdxData::File(f)
        };
        let mut idx = Idx {
            path: path.to_path_buf(),
            data,
            len,
            version: 1,
            count: 0,
            fanout: Box::new([0; 256]),
            large_count: 0,
            pack_checksum: [0; 20],
        };
        if let IdxData::Mem(v) = &idx.data {
            // The file may have changed between stat and read.
            idx.len = v.len() as u64;
        }
        idx.parse_header()?;
        Ok(idx)
    }

    fn corrupt(&self, reason: impl Into<String>) -> Error {
        git_err(&self.path, reason)
    }

    /// `len` bytes at `off`, which must lie inside the file.
    fn bytes(&self, off: u64, len: usize) -> Result<Cow<'_, [u8]>> {
        let end = off
            .checked_add(len as u64)
            .filter(|&e| e <= self.len)
            .ok_or_else(|| self.corrupt("index is truncated"))?;
        match &self.data {
            IdxData::Mem(v) => Ok(Cow::Borrowed(&v[off as usize..end as usize])),
            IdxData::File(f) => {
                let mut buf = vec![0u8; len];
                let n = read_at_most(f, off, &mut buf).ctx("read pack index", &self.path)?;
                if n != len {
                    return Err(self.corrupt("index is truncated"));
                }
                Ok(Cow::Owned(buf))
            }
        }
    }

    fn parse_header(&mut self) -> Result<()> {
        if self.len < 8 {
            return Err(self.corrupt("index is too short"));
        }
        let head = self.bytes(0, 8)?.into_owned();
        let fan_at = if head[..4] == [0xff, b't', b'O', b'c'] {
            let v = u32::from_be_bytes([head[4], head[5], head[6], head[7]]);
            if v != 2 {
                return Err(self.corrupt(format!("unsupported index version {v}")));
            }
            self.version = 2;
            8
        } else {
            self.version = 1;
            0
        };
        let fan = self.bytes(fan_at, 1024)?.into_owned();
        let mut prev = 0u32;
        for (i, c) in fan.chunks_exact(4).enumerate() {
            let v = u32::from_be_bytes([c[0], c[1], c[2], c[3]]);
            if v < prev {
                return Err(self.corrupt("fanout table is not monotonic"));
            }
            self.fanout[i] = v;
            prev = v;
        }
        self.count = prev;
        let n = u64::from(self.count);
        if self.version == 2 {
            // header, fanout, oids, crc32s, 4-byte offsets, large offsets, 2 checksums
            let min = 8 + 1024 + n * (20 + 4 + 4) + 40;
            if self.len < min || !(self.len - min).is_multiple_of(8) || (self.len - min) / 8 > n {
                return Err(self.corrupt(format!(
                    "size {} does not match {} objects",
                    self.len, self.count
                )));
            }
            self.large_count = (self.len - min) / 8;
        } else if self.len != 1024 + n * 24 + 40 {
            return Err(self.corrupt(format!(
                "size {} does not match {} objects (version 1)",
                self.len, self.count
            )));
        }
        let ck = self.bytes(self.len - 40, 20)?.into_owned();
        self.pack_checksum.copy_from_slice(&ck);
        Ok(())
    }

    /// Position of entry `i`'s object id, and the distance between consecutive ids.
    fn oid_pos(&self, i: u32) -> (u64, u64) {
        if self.version == 2 {
            (1032 + u64::from(i) * 20, 20)
        } else {
            (1024 + u64::from(i) * 24 + 4, 24)
        }
    }

    fn offset_of(&self, i: u32) -> Result<u64> {
        if self.version == 1 {
            let b = self.bytes(1024 + u64::from(i) * 24, 4)?;
            return Ok(u64::from(u32::from_be_bytes([b[0], b[1], b[2], b[3]])));
        }
        let n = u64::from(self.count);
        let at = 1032 + n * 24 + u64::from(i) * 4;
        let b = self.bytes(at, 4)?;
        let v = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
        if v & 0x8000_0000 == 0 {
            return Ok(u64::from(v));
        }
        let k = u64::from(v & 0x7fff_ffff);
        if k >= self.large_count {
            return Err(self.corrupt("large offset index out of range"));
        }
        let b = self.bytes(1032 + n * 28 + k * 8, 8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(&b);
        Ok(u64::from_be_bytes(a))
    }

    /// The pack offset of `oid`, if this index lists it.
    fn find(&self, oid: &[u8; 20]) -> Result<Option<u64>> {
        let first = oid[0] as usize;
        let mut lo = if first == 0 {
            0
        } else {
            self.fanout[first - 1]
        };
        let mut hi = self.fanout[first];
        // Narrow with single reads (cheap for in-memory data, few syscalls for large files) …
        while hi - lo > 64 {
            let mid = lo + (hi - lo) / 2;
            let (p, _) = self.oid_pos(mid);
            let b = self.bytes(p, 20)?;
            match b[..].cmp(&oid[..]) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return self.offset_of(mid).map(Some),
            }
        }
        if lo >= hi {
            return Ok(None);
        }
        // … then search the remaining block in one read.
        let (p, stride) = self.oid_pos(lo);
        let block = self.bytes(p, ((hi - lo - 1) as u64 * stride + 20) as usize)?;
        let (mut a, mut b) = (0usize, (hi - lo) as usize);
        while a < b {
            let mid = a + (b - a) / 2;
            let at = mid * stride as usize;
            match block[at..at + 20].cmp(&oid[..]) {
                std::cmp::Ordering::Less => a = mid + 1,
                std::cmp::Ordering::Greater => b = mid,
                std::cmp::Ordering::Equal => return self.offset_of(lo + mid as u32).map(Some),
            }
        }
        Ok(None)
    }
}

// ---------------------------------------------------------------------------------------------
// Pack data
// ---------------------------------------------------------------------------------------------

/// One `.idx` + `.pack` pair with its open file handles.
struct Pack {
    id: u32,
    idx: Idx,
    path: PathBuf,
    file: File,
    /// End of the object data (the 20-byte trailer starts here).
    data_end: u64,
}

enum EntryKind {
    Base(ObjectKind),
    Ofs(u64),
    Ref([u8; 20]),
}

struct Entry {
    kind: EntryKind,
    /// Inflated size (of the object, or of the delta for delta entries).
    size: u64,
    /// Where the zlib stream starts.
    data_pos: u64,
}

/// `Read` over a byte range of a pack through `pread`.
struct RangeReader<'a> {
    file: &'a File,
    pos: u64,
    end: u64,
}

impl Read for RangeReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.pos >= self.end || buf.is_empty() {
            return Ok(0);
        }
        let want = buf
            .len()
            .min((self.end - self.pos).min(usize::MAX as u64) as usize);
        let n = self.file.read_at(&mut buf[..want], self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl Pack {
    /// Opens the pack belonging to `idx_path`; `Ok(None)` when the `.pack` does not exist.
    fn open(id: u32, idx_path: &Path) -> Result<Option<Pack>> {
        let path = idx_path.with_extension("pack");
        let file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io("open pack", &path, e)),
        };
        let idx = match Idx::open(idx_path) {
            Ok(i) => i,
            // Removed between listing and opening (e.g. by a concurrent gc).
            Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                return Ok(None)
            }
            Err(e) => return Err(e),
        };
        let len = file.metadata().ctx("stat pack", &path)?.len();
        if len < 32 {
            return Err(git_err(&path, "pack is truncated"));
        }
        let mut head = [0u8; 12];
        if read_at_most(&file, 0, &mut head).ctx("read pack", &path)? != 12 {
            return Err(git_err(&path, "pack is truncated"));
        }
        if &head[..4] != b"PACK" {
            return Err(git_err(&path, "not a pack file (bad signature)"));
        }
        let version = u32::from_be_bytes([head[4], head[5], head[6], head[7]]);
        if version != 2 && version != 3 {
            return Err(git_err(
                &path,
                format!("unsupported pack version {version}"),
            ));
        }
        let count = u32::from_be_bytes([head[8], head[9], head[10], head[11]]);
        if count != idx.count {
            return Err(git_err(
                &path,
                format!("pack has {count} objects, its index {}", idx.count),
            ));
        }
        let mut trailer = [0u8; 20];
        if read_at_most(&file, len - 20, &mut trailer).ctx("read pack", &path)? != 20 {
            return Err(git_err(&path, "pack is truncated"));
        }
        if trailer != idx.pack_checksum {
            return Err(git_err(
                &path,
                "pack checksum does not match its index (truncated or replaced pack)",
            ));
        }
        Ok(Some(Pack {
            id,
            idx,
            path,
            file,
            data_end: len - 20,
        }))
    }

    fn corrupt(&self, off: u64, reason: impl std::fmt::Display) -> Error {
        git_err(&self.path, format!("object at offset {off}: {reason}"))
    }

    fn entry(&self, off: u64) -> Result<Entry> {
        if off < 12 || off >= self.data_end {
            return Err(self.corrupt(off, "offset outside the pack"));
        }
        let mut buf = [0u8; 64];
        let want = (self.data_end - off).min(64) as usize;
        let n = read_at_most(&self.file, off, &mut buf[..want]).ctx("read pack", &self.path)?;
        let buf = &buf[..n];
        let trunc = || self.corrupt(off, "truncated entry header");
        let mut i = 0;
        let mut c = *buf.first().ok_or_else(trunc)?;
        let t = (c >> 4) & 7;
        let mut size = u64::from(c & 15);
        let mut shift = 4u32;
        while c & 0x80 != 0 {
            i += 1;
            c = *buf.get(i).ok_or_else(trunc)?;
            let part = u64::from(c & 0x7f);
            if shift > 63 || (shift > 57 && part >> (64 - shift) != 0) {
                return Err(self.corrupt(off, "object size overflows"));
            }
            size |= part << shift;
            shift += 7;
        }
        i += 1;
        let kind = match t {
            1..=4 => EntryKind::Base(ObjectKind::from_pack_type(t).ok_or_else(trunc)?),
            6 => {
                let mut c = *buf.get(i).ok_or_else(trunc)?;
                i += 1;
                let mut v = u64::from(c & 0x7f);
                while c & 0x80 != 0 {
                    c = *buf.get(i).ok_or_else(trunc)?;
                    i += 1;
                    if v >= (u64::MAX >> 7) - 1 {
                        return Err(self.corrupt(off, "delta base offset overflows"));
                    }
                    v = ((v + 1) << 7) | u64::from(c & 0x7f);
                }
                if v == 0 || v > off - 12 {
                    return Err(self.corrupt(off, format!("bad delta base offset {v}")));
                }
                EntryKind::Ofs(off - v)
            }
            7 => {
                let b = buf.get(i..i + 20).ok_or_else(trunc)?;
                i += 20;
                let mut oid = [0u8; 20];
                oid.copy_from_slice(b);
                EntryKind::Ref(oid)
            }
            _ => return Err(self.corrupt(off, format!("invalid object type {t}"))),
        };
        Ok(Entry {
            kind,
            size,
            data_pos: off + i as u64,
        })
    }

    /// Inflates the zlib stream at `pos`, which must produce exactly `size` bytes.
    fn inflate(&self, entry_off: u64, pos: u64, size: u64) -> Result<Vec<u8>> {
        if pos >= self.data_end {
            return Err(self.corrupt(entry_off, "data outside the pack"));
        }
        let avail = self.data_end - pos;
        // zlib cannot expand more than ~1032:1; anything claiming more is corrupt.
        if size / 1032 > avail + 64 {
            return Err(self.corrupt(entry_off, format!("size {size} is impossible")));
        }
        let bufcap = (size.saturating_add(64)).clamp(512, 128 << 10) as usize;
        let reader = RangeReader {
            file: &self.file,
            pos,
            end: self.data_end,
        };
        let mut dec = ZlibDecoder::new(BufReader::with_capacity(bufcap, reader));
        let mut out = Vec::with_capacity(size.min(PREALLOC_MAX) as usize);
        (&mut dec)
            .take(size.saturating_add(1))
            .read_to_end(&mut out)
            .map_err(|e| stream_err(&self.path, "inflate", e))?;
        if out.len() as u64 != size {
            return Err(self.corrupt(
                entry_off,
                format!("inflated to {} bytes, expected {size}", out.len()),
            ));
        }
        Ok(out)
    }
}

/// Reads a little-endian base-128 size from a delta header.
fn delta_varint(d: &[u8], i: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    let mut shift = 0u32;
    loop {
        let c = *d.get(*i)?;
        *i += 1;
        let part = u64::from(c & 0x7f);
        if shift > 63 || (shift > 57 && part >> (64 - shift) != 0) {
            return None;
        }
        v |= part << shift;
        shift += 7;
        if c & 0x80 == 0 {
            return Some(v);
        }
    }
}

/// Applies a git delta to `base`. The error is a short reason.
fn apply_delta(base: &[u8], delta: &[u8]) -> std::result::Result<Vec<u8>, String> {
    let mut i = 0;
    let src = delta_varint(delta, &mut i).ok_or("bad delta header")?;
    let tgt = delta_varint(delta, &mut i).ok_or("bad delta header")?;
    if src != base.len() as u64 {
        return Err(format!(
            "delta expects a base of {src} bytes, the base has {}",
            base.len()
        ));
    }
    let mut out: Vec<u8> = Vec::with_capacity(tgt.min(PREALLOC_MAX) as usize);
    while i < delta.len() {
        let op = delta[i];
        i += 1;
        if op & 0x80 != 0 {
            let mut off = 0u64;
            let mut len = 0u64;
            for k in 0..4 {
                if op & (1 << k) != 0 {
                    off |= u64::from(*delta.get(i).ok_or("truncated copy op")?) << (8 * k);
                    i += 1;
                }
            }
            for k in 0..3 {
                if op & (0x10 << k) != 0 {
                    len |= u64::from(*delta.get(i).ok_or("truncated copy op")?) << (8 * k);
                    i += 1;
                }
            }
            if len == 0 {
                len = 0x10000;
            }
            let end = off
                .checked_add(len)
                .filter(|&e| e <= base.len() as u64)
                .ok_or("copy op outside the base")?;
            if out.len() as u64 + len > tgt {
                return Err("delta produces more than its declared size".into());
            }
            out.extend_from_slice(&base[off as usize..end as usize]);
        } else if op != 0 {
            let n = op as usize;
            let data = delta.get(i..i + n).ok_or("truncated insert op")?;
            i += n;
            if out.len() as u64 + n as u64 > tgt {
                return Err("delta produces more than its declared size".into());
            }
            out.extend_from_slice(data);
        } else {
            return Err("reserved delta opcode 0".into());
        }
    }
    if out.len() as u64 != tgt {
        return Err(format!(
            "delta produced {} bytes, declared {tgt}",
            out.len()
        ));
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Cache of reconstructed pack objects
// ---------------------------------------------------------------------------------------------

type Obj = (ObjectKind, Arc<Vec<u8>>);

#[derive(Default)]
struct Cache {
    map: HashMap<(u32, u64), (u64, Obj)>,
    order: BTreeMap<u64, (u32, u64)>,
    bytes: usize,
    tick: u64,
}

impl Cache {
    fn get(&mut self, key: (u32, u64)) -> Option<Obj> {
        self.tick += 1;
        let tick = self.tick;
        let (t, obj) = self.map.get_mut(&key)?;
        self.order.remove(t);
        *t = tick;
        self.order.insert(tick, key);
        Some(obj.clone())
    }

    fn put(&mut self, key: (u32, u64), obj: &Obj) {
        let size = obj.1.len();
        if size > CACHE_BUDGET / 8 || self.map.contains_key(&key) {
            return;
        }
        self.tick += 1;
        self.map.insert(key, (self.tick, obj.clone()));
        self.order.insert(self.tick, key);
        self.bytes += size;
        while self.bytes > CACHE_BUDGET {
            let Some((_, k)) = self.order.pop_first() else {
                break;
            };
            if let Some((_, (_, d))) = self.map.remove(&k) {
                self.bytes -= d.len();
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The store
// ---------------------------------------------------------------------------------------------

enum Slot {
    Ok(Arc<Pack>),
    Broken { idx_path: PathBuf, reason: String },
}

impl Slot {
    fn idx_path(&self) -> &Path {
        match self {
            Slot::Ok(p) => &p.idx.path,
            Slot::Broken { idx_path, .. } => idx_path,
        }
    }
}

/// Read-only access to `<git_dir>/objects`, its alternates (recursively) and, for a linked
/// worktree, the objects of the common directory.
///
/// `ObjectStore` is `Send + Sync` and meant to be shared in an `Arc`; it keeps one open file
/// handle per pack and per large pack index, reads with `pread`, and never writes anything.
///
/// ```
/// use std::io::Write;
/// use std::process::{Command, Stdio};
/// use patchbox::git::odb::{oid_from_hex, ObjectStore};
///
/// let tmp = tempfile::tempdir()?;
/// let git = |args: &[&str]| {
///     Command::new("git")
///         .args(args)
///         .current_dir(tmp.path())
///         .env("HOME", tmp.path())
///         .env("GIT_CONFIG_NOSYSTEM", "1")
///         .stdin(Stdio::piped())
///         .stdout(Stdio::piped())
///         .spawn()
/// };
/// git(&["init", "-q"])?.wait()?;
/// let mut child = git(&["hash-object", "-w", "--stdin"])?;
/// child.stdin.take().unwrap().write_all(b"hello\n")?;
/// let out = child.wait_with_output()?;
/// let oid = oid_from_hex(String::from_utf8_lossy(&out.stdout).trim()).unwrap();
///
/// let store = ObjectStore::open(&tmp.path().join(".git"))?;
/// assert!(store.contains(&oid));
/// assert_eq!(store.read_blob(&oid)?.as_deref(), Some(&b"hello\n"[..]));
/// assert_eq!(store.read_blob(&[0x11; 20])?, None);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct ObjectStore {
    git_dir: PathBuf,
    /// The primary objects directory first, then alternates in discovery order.
    object_dirs: Vec<PathBuf>,
    /// Append-only; replaced wholesale (copy on write) by a rescan.
    packs: RwLock<Arc<Vec<Slot>>>,
    rescan_lock: Mutex<()>,
    cache: Mutex<Cache>,
}

impl std::fmt::Debug for ObjectStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectStore")
            .field("git_dir", &self.git_dir)
            .field("object_dirs", &self.object_dirs)
            .field("packs", &self.packs.read().len())
            .finish()
    }
}

impl ObjectStore {
    /// Opens the object store of the repository whose git directory is `git_dir` (a `.git`
    /// directory, a bare repository, a linked worktree's `.git/worktrees/<name>`, or a
    /// `.git` file containing `gitdir: <path>`).
    ///
    /// Reads `commondir`, `objects/info/alternates` (recursively) and every pack index. A pack
    /// whose index or data is corrupt does not make `open` fail; lookups that cannot be
    /// answered without it return an error instead.
    ///
    /// ```no_run
    /// # fn main() -> patchbox::Result<()> {
    /// let store = patchbox::git::odb::ObjectStore::open(std::path::Path::new("/src/project/.git"))?;
    /// # Ok(()) }
    /// ```
    pub fn open(git_dir: &Path) -> Result<ObjectStore> {
        let git_dir = resolve_gitfile(git_dir)?;
        let common = match std::fs::read(git_dir.join("commondir")) {
            Ok(raw) => {
                let text = trim_line_end(&raw);
                if text.is_empty() {
                    return Err(git_err(&git_dir.join("commondir"), "empty commondir"));
                }
                let p = PathBuf::from(std::ffi::OsString::from_vec(text.to_vec()));
                if p.is_absolute() {
                    p
                } else {
                    git_dir.join(p)
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => git_dir.clone(),
            Err(e) => return Err(Error::io("read commondir", git_dir.join("commondir"), e)),
        };
        check_object_format(&common.join("config"))?;
        let objects = common.join("objects");
        let meta = std::fs::metadata(&objects).ctx("open objects directory", &objects)?;
        if !meta.is_dir() {
            return Err(git_err(&objects, "not a directory"));
        }
        let mut object_dirs = Vec::new();
        let mut seen = HashSet::new();
        collect_object_dirs(&objects, 0, &mut object_dirs, &mut seen)?;
        let store = ObjectStore {
            git_dir,
            object_dirs,
            packs: RwLock::new(Arc::new(Vec::new())),
            rescan_lock: Mutex::new(()),
            cache: Mutex::new(Cache::default()),
        };
        store.rescan()?;
        Ok(store)
    }

    /// The objects directories searched, primary first, then alternates.
    ///
    /// ```no_run
    /// # fn main() -> patchbox::Result<()> {
    /// let store = patchbox::git::odb::ObjectStore::open(std::path::Path::new(".git"))?;
    /// for dir in store.object_dirs() {
    ///     println!("{}", dir.display());
    /// }
    /// # Ok(()) }
    /// ```
    pub fn object_dirs(&self) -> &[PathBuf] {
        &self.object_dirs
    }

    /// The content of blob `oid` (20 raw bytes).
    ///
    /// `Ok(None)` when the object is not in the store; [`Error::Git`] when it is there but is
    /// not a blob, or its data is corrupt (including a SHA-1 that does not match `oid`).
    ///
    /// ```no_run
    /// # fn main() -> patchbox::Result<()> {
    /// use patchbox::git::odb::{oid_from_hex, ObjectStore};
    /// let store = ObjectStore::open(std::path::Path::new(".git"))?;
    /// let oid = oid_from_hex("e69de29bb2d1d6434b8b29ae775ad8c2e48c5391").unwrap();
    /// if let Some(data) = store.read_blob(&oid)? {
    ///     assert!(data.is_empty());
    /// }
    /// # Ok(()) }
    /// ```
    pub fn read_blob(&self, oid: &[u8; 20]) -> Result<Option<Vec<u8>>> {
        match self.read_object(oid)? {
            None => Ok(None),
            Some((ObjectKind::Blob, data)) => Ok(Some(data)),
            Some((kind, _)) => Err(git_err(
                &self.git_dir,
                format!(
                    "object {} is a {}, not a blob",
                    oid_to_hex(oid),
                    kind.as_str()
                ),
            )),
        }
    }

    /// The type and content of object `oid`, verified against its id; `Ok(None)` when the
    /// object is not in the store.
    ///
    /// ```no_run
    /// # fn main() -> patchbox::Result<()> {
    /// use patchbox::git::odb::{ObjectKind, ObjectStore};
    /// let store = ObjectStore::open(std::path::Path::new(".git"))?;
    /// if let Some((kind, data)) = store.read_object(&[0x12; 20])? {
    ///     println!("{} of {} bytes", kind.as_str(), data.len());
    /// }
    /// # Ok(()) }
    /// ```
    pub fn read_object(&self, oid: &[u8; 20]) -> Result<Option<(ObjectKind, Vec<u8>)>> {
        Ok(self
            .read_depth(oid, 0)?
            .map(|(k, d)| (k, Arc::try_unwrap(d).unwrap_or_else(|a| (*a).clone()))))
    }

    /// Whether the object exists: an index lookup or a file-existence check, without reading
    /// or verifying the data. Objects only listed by a pack that could not be opened do not
    /// count.
    ///
    /// ```no_run
    /// # fn main() -> patchbox::Result<()> {
    /// let store = patchbox::git::odb::ObjectStore::open(std::path::Path::new(".git"))?;
    /// assert!(!store.contains(&[0u8; 20]));
    /// # Ok(()) }
    /// ```
    pub fn contains(&self, oid: &[u8; 20]) -> bool {
        if self.contains_now(oid) {
            return true;
        }
        self.rescan().is_ok() && self.contains_now(oid)
    }

    fn contains_now(&self, oid: &[u8; 20]) -> bool {
        let packs = self.packs.read().clone();
        for slot in packs.iter() {
            if let Slot::Ok(p) = slot {
                if matches!(p.idx.find(oid), Ok(Some(_))) {
                    return true;
                }
            }
        }
        self.object_dirs
            .iter()
            .any(|d| std::fs::metadata(loose_path(d, oid)).is_ok_and(|m| m.is_file()))
    }

    fn read_depth(&self, oid: &[u8; 20], depth: u32) -> Result<Option<Obj>> {
        if depth > MAX_CROSS_DEPTH {
            return Err(git_err(
                &self.git_dir,
                format!("delta bases of {} nest too deeply", oid_to_hex(oid)),
            ));
        }
        if let Some(o) = self.try_read(oid, depth)? {
            return Ok(Some(o));
        }
        self.rescan()?;
        if let Some(o) = self.try_read(oid, depth)? {
            return Ok(Some(o));
        }
        let packs = self.packs.read().clone();
        for slot in packs.iter() {
            if let Slot::Broken { idx_path, reason } = slot {
                return Err(git_err(
                    idx_path,
                    format!(
                        "object {} not found, and this pack is unreadable: {reason}",
                        oid_to_hex(oid)
                    ),
                ));
            }
        }
        Ok(None)
    }

    fn try_read(&self, oid: &[u8; 20], depth: u32) -> Result<Option<Obj>> {
        let packs = self.packs.read().clone();
        for slot in packs.iter() {
            if let Slot::Ok(p) = slot {
                if let Some(off) = p.idx.find(oid)? {
                    let (kind, data) = self.read_packed(p, off, depth)?;
                    verify(&p.path, oid, kind, &data)?;
                    return Ok(Some((kind, data)));
                }
            }
        }
        for dir in &self.object_dirs {
            if let Some((kind, data)) = read_loose(&loose_path(dir, oid))? {
                verify(&loose_path(dir, oid), oid, kind, &data)?;
                return Ok(Some((kind, Arc::new(data))));
            }
        }
        Ok(None)
    }

    /// Reconstructs the object at `off` in `pack`, following its delta chain iteratively.
    fn read_packed(&self, pack: &Pack, off: u64, depth: u32) -> Result<Obj> {
        // Delta entries from the requested object down to (excluding) the base.
        let mut chain: Vec<(u64, Entry)> = Vec::new();
        let mut cur = off;
        let (kind, mut data) = loop {
            if let Some(hit) = self.cache.lock().get((pack.id, cur)) {
                break hit;
            }
            if chain.len() >= MAX_CHAIN {
                return Err(pack.corrupt(off, "delta chain is too long (cycle?)"));
            }
            let e = pack.entry(cur)?;
            match e.kind {
                EntryKind::Base(k) => {
                    let d = Arc::new(pack.inflate(cur, e.data_pos, e.size)?);
                    let obj = (k, d);
                    if !chain.is_empty() {
                        self.cache.lock().put((pack.id, cur), &obj);
                    }
                    break obj;
                }
                EntryKind::Ofs(base) => {
                    chain.push((cur, e));
                    cur = base;
                }
                EntryKind::Ref(base_oid) => {
                    chain.push((cur, e));
                    if let Some(o) = pack.idx.find(&base_oid)? {
                        cur = o;
                        continue;
                    }
                    // A base outside this pack (another pack, loose, an alternate).
                    match self.read_depth(&base_oid, depth + 1)? {
                        Some(o) => break o,
                        None => {
                            return Err(pack.corrupt(
                                cur,
                                format!("delta base {} is missing", oid_to_hex(&base_oid)),
                            ))
                        }
                    }
                }
            }
        };
        for (eoff, e) in chain.iter().rev() {
            let delta = pack.inflate(*eoff, e.data_pos, e.size)?;
            let out = apply_delta(&data, &delta).map_err(|r| pack.corrupt(*eoff, r))?;
            data = Arc::new(out);
            self.cache
                .lock()
                .put((pack.id, *eoff), &(kind, data.clone()));
        }
        Ok((kind, data))
    }

    /// Opens pack indexes that are not known yet (all of them on the first call).
    fn rescan(&self) -> Result<()> {
        let _guard = self.rescan_lock.lock();
        let current = self.packs.read().clone();
        let known: HashSet<&Path> = current.iter().map(Slot::idx_path).collect();
        let mut added = Vec::new();
        let mut next_id = current.len() as u32;
        for dir in &self.object_dirs {
            let pack_dir = dir.join("pack");
            let rd = match std::fs::read_dir(&pack_dir) {
                Ok(rd) => rd,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(Error::io("list pack directory", &pack_dir, e)),
            };
            let mut idxs = Vec::new();
            for ent in rd {
                let ent = ent.ctx("list pack directory", &pack_dir)?;
                let p = ent.path();
                if p.extension().is_some_and(|x| x == "idx") && !known.contains(p.as_path()) {
                    idxs.push(p);
                }
            }
            idxs.sort();
            for p in idxs {
                match Pack::open(next_id, &p) {
                    Ok(Some(pack)) => {
                        added.push(Slot::Ok(Arc::new(pack)));
                        next_id += 1;
                    }
                    Ok(None) => {}
                    Err(e) => {
                        added.push(Slot::Broken {
                            idx_path: p,
                            reason: e.to_string(),
                        });
                        next_id += 1;
                    }
                }
            }
        }
        if !added.is_empty() {
            let mut all: Vec<Slot> = Vec::with_capacity(current.len() + added.len());
            for s in current.iter() {
                all.push(match s {
                    Slot::Ok(p) => Slot::Ok(p.clone()),
                    Slot::Broken { idx_path, reason } => Slot::Broken {
                        idx_path: idx_path.clone(),
                        reason: reason.clone(),
                    },
                });
            }
            all.extend(added);
            *self.packs.write() = Arc::new(all);
        }
        Ok(())
    }
}

/// Checks the SHA-1 of an object against the id it was requested by.
fn verify(path: &Path, oid: &[u8; 20], kind: ObjectKind, data: &[u8]) -> Result<()> {
    let got = object_id(kind, data);
    if &got != oid {
        return Err(git_err(
            path,
            format!(
                "object {} hashes to {} (corrupt data)",
                oid_to_hex(oid),
                oid_to_hex(&got)
            ),
        ));
    }
    Ok(())
}

fn loose_path(objects: &Path, oid: &[u8; 20]) -> PathBuf {
    let hex = oid_to_hex(oid);
    objects.join(&hex[..2]).join(&hex[2..])
}

/// Reads a loose object; `Ok(None)` when the file does not exist.
fn read_loose(path: &Path) -> Result<Option<(ObjectKind, Vec<u8>)>> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("open loose object", path, e)),
    };
    let flen = file.metadata().ctx("stat loose object", path)?.len();
    let mut dec = ZlibDecoder::new(BufReader::with_capacity(
        (flen.clamp(64, 64 << 10)) as usize,
        file,
    ));
    let mut head = [0u8; 64];
    let mut got = 0;
    let nul = loop {
        if let Some(p) = head[..got].iter().position(|&b| b == 0) {
            break p;
        }
        if got == head.len() {
            return Err(git_err(path, "loose object header is too long"));
        }
        let n = dec
            .read(&mut head[got..])
            .map_err(|e| stream_err(path, "inflate loose object", e))?;
        if n == 0 {
            return Err(git_err(path, "loose object is truncated"));
        }
        got += n;
    };
    let bad = || git_err(path, "malformed loose object header");
    let h = &head[..nul];
    let sp = h.iter().position(|&b| b == b' ').ok_or_else(bad)?;
    let kind = ObjectKind::from_name(&h[..sp]).ok_or_else(bad)?;
    let digits = &h[sp + 1..];
    if digits.is_empty() || digits.len() > 19 || !digits.iter().all(u8::is_ascii_digit) {
        return Err(bad());
    }
    let size = digits
        .iter()
        .fold(0u64, |a, &d| a * 10 + u64::from(d - b'0'));
    if size / 1032 > flen + 64 {
        return Err(git_err(path, format!("size {size} is impossible")));
    }
    let mut data = Vec::with_capacity(size.min(PREALLOC_MAX) as usize);
    data.extend_from_slice(&head[nul + 1..got]);
    if (data.len() as u64) < size {
        let rest = size - data.len() as u64;
        (&mut dec)
            .take(rest + 1)
            .read_to_end(&mut data)
            .map_err(|e| stream_err(path, "inflate loose object", e))?;
    }
    if data.len() as u64 != size {
        return Err(git_err(
            path,
            format!("loose object has {} bytes, header says {size}", data.len()),
        ));
    }
    Ok(Some((kind, data)))
}

fn trim_line_end(raw: &[u8]) -> &[u8] {
    let mut t = raw;
    while let [rest @ .., b'\n' | b'\r'] = t {
        t = rest;
    }
    t
}

/// Follows a `.git` file (`gitdir: <path>`); directories are returned as they are.
fn resolve_gitfile(path: &Path) -> Result<PathBuf> {
    let meta = std::fs::metadata(path).ctx("open git directory", path)?;
    if meta.is_dir() {
        return Ok(path.to_path_buf());
    }
    let raw = std::fs::read(path).ctx("read gitfile", path)?;
    let text = trim_line_end(&raw);
    let target = text
        .strip_prefix(b"gitdir: ")
        .ok_or_else(|| git_err(path, "not a git directory or gitfile"))?;
    let p = PathBuf::from(std::ffi::OsString::from_vec(target.to_vec()));
    Ok(if p.is_absolute() {
        p
    } else {
        path.parent().unwrap_or(Path::new(".")).join(p)
    })
}

/// Refuses repositories whose objects are not SHA-1.
fn check_object_format(config: &Path) -> Result<()> {
    let raw = match std::fs::read(config) {
        Ok(r) => r,
        Err(_) => return Ok(()),
    };
    for line in raw.split(|&b| b == b'\n') {
        let l: Vec<u8> = line
            .iter()
            .filter(|b| !b.is_ascii_whitespace())
            .map(u8::to_ascii_lowercase)
            .collect();
        if let Some(v) = l.strip_prefix(b"objectformat=") {
            let v = v.split(|&b| b == b'#' || b == b';').next().unwrap_or(&[]);
            let v = v.strip_prefix(b"\"").unwrap_or(v);
            let v = v.strip_suffix(b"\"").unwrap_or(v);
            if v != b"sha1" {
                return Err(git_err(
                    config,
                    format!(
                        "object format {:?} is not supported (only sha1)",
                        String::from_utf8_lossy(v)
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Adds `objects` and, recursively, its alternates to `out` (each directory once).
fn collect_object_dirs(
    objects: &Path,
    depth: u32,
    out: &mut Vec<PathBuf>,
    seen: &mut HashSet<PathBuf>,
) -> Result<()> {
    let canon = std::fs::canonicalize(objects).unwrap_or_else(|_| objects.to_path_buf());
    if !seen.insert(canon) {
        return Ok(());
    }
    out.push(objects.to_path_buf());
    if depth >= MAX_ALTERNATE_DEPTH {
        return Ok(());
    }
    let alt_file = objects.join("info").join("alternates");
    let raw = match std::fs::read(&alt_file) {
        Ok(r) => r,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io("read alternates", &alt_file, e)),
    };
    for line in raw.split(|&b| b == b'\n') {
        let line = trim_line_end(line);
        if line.is_empty() || line[0] == b'#' {
            continue;
        }
        let bytes = if line[0] == b'"' {
            match unquote_c(line) {
                Some(b) => b,
                None => return Err(git_err(&alt_file, "badly quoted entry")),
            }
        } else {
            line.to_vec()
        };
        let p = PathBuf::from(std::ffi::OsString::from_vec(bytes));
        let p = if p.is_absolute() { p } else { objects.join(p) };
        // Like git: an alternate that does not exist is ignored.
        if std::fs::metadata(&p).is_ok_and(|m| m.is_dir()) {
            collect_object_dirs(&p, depth + 1, out, seen)?;
        }
    }
    Ok(())
}

/// Undoes git's C-style quoting of a path (`"a\tb\\c\303\251"`).
fn unquote_c(s: &[u8]) -> Option<Vec<u8>> {
    let inner = s.strip_prefix(b"\"")?.strip_suffix(b"\"")?;
    let mut out = Vec::with_capacity(inner.len());
    let mut i = 0;
    while i < inner.len() {
        let c = inner[i];
        i += 1;
        if c != b'\\' {
            out.push(c);
            continue;
        }
        let e = *inner.get(i)?;
        i += 1;
        out.push(match e {
            b'a' => 7,
            b'b' => 8,
            b'f' => 12,
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            b'v' => 11,
            b'\\' => b'\\',
            b'"' => b'"',
            b'0'..=b'3' => {
                let d = inner.get(i..i + 2)?;
                if !d.iter().all(|x| (b'0'..=b'7').contains(x)) {
                    return None;
                }
                i += 2;
                ((e - b'0') << 6) | ((d[0] - b'0') << 3) | (d[1] - b'0')
            }
            _ => return None,
        });
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn varint(mut v: u64, out: &mut Vec<u8>) {
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(b);
                return;
            }
            out.push(b | 0x80);
        }
    }

    fn delta(src: u64, tgt: u64, ops: &[u8]) -> Vec<u8> {
        let mut d = Vec::new();
        varint(src, &mut d);
        varint(tgt, &mut d);
        d.extend_from_slice(ops);
        d
    }

    #[test]
    fn delta_copy_and_insert() {
        let base = b"hello world";
        // copy offset 6 len 5 ("world"), insert " ", copy offset 0 len 5 ("hello")
        let d = delta(11, 11, &[0x91, 6, 5, 1, b' ', 0x90, 5]);
        assert_eq!(apply_delta(base, &d).unwrap(), b"world hello");
    }

    #[test]
    fn delta_copy_size_zero_means_64k() {
        let base: Vec<u8> = (0..0x10000u32).map(|i| i as u8).collect();
        let d = delta(0x10000, 0x10000, &[0x80]);
        assert_eq!(apply_delta(&base, &d).unwrap(), base);
    }

    #[test]
    fn delta_errors() {
        let base = b"abc";
        assert!(apply_delta(base, &delta(4, 1, &[1, b'x'])).is_err()); // wrong base size
        assert!(apply_delta(base, &delta(3, 1, &[0])).is_err()); // reserved opcode
        assert!(apply_delta(base, &delta(3, 4, &[0x91, 1, 3])).is_err()); // copy past base
        assert!(apply_delta(base, &delta(3, 2, &[3, b'x'])).is_err()); // truncated insert
        assert!(apply_delta(base, &delta(3, 1, &[2, b'x', b'y'])).is_err()); // exceeds target
        assert!(apply_delta(base, &delta(3, 5, &[1, b'x'])).is_err()); // short of target
        assert!(apply_delta(base, &delta(3, 1, &[0x91])).is_err()); // truncated copy
        assert!(apply_delta(base, &[0xff; 12]).is_err()); // varint overflow
        assert!(apply_delta(base, &[]).is_err());
        let huge = delta(3, u64::MAX, &[0x90, 3]);
        assert!(apply_delta(base, &huge).is_err());
    }

    #[test]
    fn unquote() {
        assert_eq!(
            unquote_c(br#""a\tb\\c\303\251\"""#).unwrap(),
            b"a\tb\\c\xc3\xa9\""
        );
        assert!(unquote_c(br#""a\q""#).is_none());
        assert!(unquote_c(br#""a\3""#).is_none());
        assert!(unquote_c(b"\"abc").is_none());
    }

    #[test]
    fn store_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<ObjectStore>();
        check::<Arc<ObjectStore>>();
    }

    #[test]
    fn hex_round_trip() {
        let mut oid = [0u8; 20];
        for (i, b) in oid.iter_mut().enumerate() {
            *b = (i * 13) as u8;
        }
        assert_eq!(oid_from_hex(&oid_to_hex(&oid)), Some(oid));
        assert_eq!(oid_from_hex(&oid_to_hex(&oid).to_uppercase()), Some(oid));
        assert!(oid_from_hex(&"g".repeat(40)).is_none());
    }

    #[test]
    fn cache_evicts_by_bytes() {
        let mut c = Cache::default();
        let big = Arc::new(vec![0u8; CACHE_BUDGET / 8]);
        for i in 0..20u64 {
            c.put((0, i), &(ObjectKind::Blob, big.clone()));
        }
        assert!(c.bytes <= CACHE_BUDGET);
        assert!(c.get((0, 19)).is_some());
        assert!(c.get((0, 0)).is_none());
    }

    fn write_idx_v2(path: &Path, entries: &mut [([u8; 20], u64)], pack_ck: [u8; 20]) {
        entries.sort();
        let mut v = vec![0xff, b't', b'O', b'c', 0, 0, 0, 2];
        for b in 0..256usize {
            let n = entries.iter().filter(|(o, _)| (o[0] as usize) <= b).count() as u32;
            v.extend_from_slice(&n.to_be_bytes());
        }
        for (o, _) in entries.iter() {
            v.extend_from_slice(o);
        }
        for _ in entries.iter() {
            v.extend_from_slice(&[0; 4]);
        }
        let mut large = Vec::new();
        for (_, off) in entries.iter() {
            if *off >= 0x8000_0000 {
                v.extend_from_slice(&(0x8000_0000u32 | large.len() as u32).to_be_bytes());
                large.push(*off);
            } else {
                v.extend_from_slice(&(*off as u32).to_be_bytes());
            }
        }
        for l in large {
            v.extend_from_slice(&l.to_be_bytes());
        }
        v.extend_from_slice(&pack_ck);
        v.extend_from_slice(&[0; 20]);
        std::fs::write(path, v).unwrap();
    }

    #[test]
    fn idx_lookup_and_large_offsets() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("x.idx");
        let mut entries: Vec<([u8; 20], u64)> = (0..300u32)
            .map(|i| {
                let mut o = [0u8; 20];
                o[0] = (i % 3) as u8;
                o[1..5].copy_from_slice(&i.to_be_bytes());
                (
                    o,
                    if i % 7 == 0 {
                        (1 << 33) + u64::from(i)
                    } else {
                        u64::from(i) * 100
                    },
                )
            })
            .collect();
        write_idx_v2(&p, &mut entries, [9; 20]);
        let idx = Idx::open(&p).unwrap();
        assert_eq!(idx.count, 300);
        for (o, off) in &entries {
            assert_eq!(idx.find(o).unwrap(), Some(*off));
        }
        assert_eq!(idx.find(&[0xee; 20]).unwrap(), None);
        let mut miss = entries[5].0;
        miss[19] = 1;
        assert_eq!(idx.find(&miss).unwrap(), None);

        // The pread path gives the same answers.
        let big = Idx {
            data: IdxData::File(File::open(&p).unwrap()),
            ..Idx::open(&p).unwrap()
        };
        for (o, off) in &entries {
            assert_eq!(big.find(o).unwrap(), Some(*off));
        }
    }

    #[test]
    fn idx_corruption_is_an_error() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("x.idx");
        let mut entries = vec![([1u8; 20], 12u64), ([2u8; 20], 40u64)];
        write_idx_v2(&p, &mut entries, [0; 20]);
        let good = std::fs::read(&p).unwrap();
        for cut in [0, 7, 8, 100, 1032, good.len() - 1] {
            std::fs::write(&p, &good[..cut]).unwrap();
            assert!(Idx::open(&p).is_err(), "cut at {cut}");
        }
        let mut bad = good.clone();
        bad[8 + 4 * 10] = 0xff; // non-monotonic fanout
        std::fs::write(&p, &bad).unwrap();
        assert!(Idx::open(&p).is_err());
        let mut bad = good.clone();
        bad[7] = 3; // version 3
        std::fs::write(&p, &bad).unwrap();
        assert!(Idx::open(&p).is_err());
        // A large offset index pointing past the table.
        let mut bad = good;
        let at = 1032 + 2 * 24;
        bad[at..at + 4].copy_from_slice(&0x8000_0005u32.to_be_bytes());
        std::fs::write(&p, &bad).unwrap();
        let idx = Idx::open(&p).unwrap();
        assert!(idx.find(&[1u8; 20]).is_err());
    }

    #[test]
    fn object_format_check() {
        let tmp = tempfile::tempdir().unwrap();
        let c = tmp.path().join("config");
        std::fs::write(&c, "[extensions]\n\tobjectFormat = sha256\n").unwrap();
        assert!(check_object_format(&c).is_err());
        std::fs::write(&c, "[extensions]\n\tobjectformat = sha1\n").unwrap();
        assert!(check_object_format(&c).is_ok());
        assert!(check_object_format(&tmp.path().join("none")).is_ok());
    }
}
