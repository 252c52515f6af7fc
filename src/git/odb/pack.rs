//! Pack data files (`objects/pack/*.pack`): opening a pack against its index, reading an
//! entry's header (type, size, delta base) and inflating its zlib stream. Deltas are applied
//! by [`crate::git::delta`].

use std::fs::File;
use std::io::{BufReader, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use flate2::bufread::ZlibDecoder;

use super::idx::Idx;
use super::{git_err, read_at_most, stream_err, PREALLOC_MAX};
use crate::error::{Error, IoContext, Result};
use crate::git::oid::{ObjectId, ObjectKind};

/// One `.idx` + `.pack` pair with its open file handles.
pub(super) struct Pack {
    pub(super) id: u32,
    pub(super) idx: Idx,
    pub(super) path: PathBuf,
    file: File,
    /// End of the object data (the 20-byte trailer starts here).
    data_end: u64,
}

pub(super) enum EntryKind {
    Base(ObjectKind),
    Ofs(u64),
    Ref(ObjectId),
}

pub(super) struct Entry {
    pub(super) kind: EntryKind,
    /// Inflated size (of the object, or of the delta for delta entries).
    pub(super) size: u64,
    /// Where the zlib stream starts.
    pub(super) data_pos: u64,
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
    pub(super) fn open(id: u32, idx_path: &Path) -> Result<Option<Pack>> {
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

    pub(super) fn corrupt(&self, off: u64, reason: impl std::fmt::Display) -> Error {
        git_err(&self.path, format!("object at offset {off}: {reason}"))
    }

    pub(super) fn entry(&self, off: u64) -> Result<Entry> {
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
                EntryKind::Ref(ObjectId::from_bytes(oid))
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
    pub(super) fn inflate(&self, entry_off: u64, pos: u64, size: u64) -> Result<Vec<u8>> {
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
