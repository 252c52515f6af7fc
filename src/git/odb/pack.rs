//! Pack data files (`objects/pack/*.pack`): opening a pack against its index, reading an
//! entry's header (type, size, delta base), inflating its zlib stream, and applying git
//! deltas.

use std::fs::File;
use std::io::{BufReader, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use flate2::bufread::ZlibDecoder;

use super::idx::Idx;
use super::{git_err, read_at_most, stream_err, PREALLOC_MAX};
use crate::error::{Error, IoContext, Result};
use crate::git::oid::ObjectKind;

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
    Ref([u8; 20]),
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
pub(super) fn apply_delta(base: &[u8], delta: &[u8]) -> std::result::Result<Vec<u8>, String> {
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
}
