//! Pack index files (`objects/pack/*.idx`, versions 1 and 2): header and fanout checks, the
//! large-offset table, and the lookup of an object id's offset in its pack. Small indexes are
//! read into memory; large ones are searched with `pread`.

use std::borrow::Cow;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use super::{git_err, read_at_most};
use crate::error::{Error, IoContext, Result};
use crate::git::oid::ObjectId;

/// `.idx` files up to this size are read into memory; larger ones are searched with `pread`.
const IDX_IN_MEMORY_MAX: u64 = 16 << 20;

enum IdxData {
    Mem(Vec<u8>),
    File(File),
}

/// A parsed `.idx` (version 1 or 2).
pub(super) struct Idx {
    pub(super) path: PathBuf,
    data: IdxData,
    len: u64,
    version: u32,
    pub(super) count: u32,
    fanout: Box<[u32; 256]>,
    large_count: u64,
    pub(super) pack_checksum: [u8; 20],
}

impl Idx {
    pub(super) fn open(path: &Path) -> Result<Idx> {
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
    pub(super) fn find(&self, oid: &ObjectId) -> Result<Option<u64>> {
        match self.position(oid)? {
            Some(i) => self.offset_of(i).map(Some),
            None => Ok(None),
        }
    }

    /// Whether this index lists `oid`: [`find`](Self::find) without reading the offset
    /// table (a snapshot asks this of every tracked file).
    pub(super) fn has(&self, oid: &ObjectId) -> Result<bool> {
        Ok(self.position(oid)?.is_some())
    }

    /// The entry number of `oid` in the sorted id table, if listed.
    fn position(&self, oid: &ObjectId) -> Result<Option<u32>> {
        // The table holds raw ids: compare bytes, as it is sorted by them.
        let oid = oid.as_bytes();
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
            match cmp_id(&b, oid) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Ok(Some(mid)),
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
            match cmp_id(&block[at..at + 20], oid) {
                std::cmp::Ordering::Less => a = mid + 1,
                std::cmp::Ordering::Greater => b = mid,
                std::cmp::Ordering::Equal => return Ok(Some(lo + mid as u32)),
            }
        }
        Ok(None)
    }
}

/// Byte order of a 20-byte id `a` of the table against `b`. Ids are uniformly spread, so
/// their first eight bytes, compared as one big-endian word, almost always decide: no call
/// to `memcmp` per step of the search (a snapshot makes one search per tracked file).
fn cmp_id(a: &[u8], b: &[u8; 20]) -> std::cmp::Ordering {
    let word = |x: &[u8]| u64::from_be_bytes([x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7]]);
    word(a).cmp(&word(b)).then_with(|| a[8..20].cmp(&b[8..20]))
}

#[cfg(test)]
mod tests {
    use super::*;

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
            assert_eq!(idx.find(&ObjectId::from_bytes(*o)).unwrap(), Some(*off));
        }
        assert_eq!(idx.find(&ObjectId::from_bytes([0xee; 20])).unwrap(), None);
        let mut miss = entries[5].0;
        miss[19] = 1;
        assert_eq!(idx.find(&ObjectId::from_bytes(miss)).unwrap(), None);

        // The pread path gives the same answers.
        let big = Idx {
            data: IdxData::File(File::open(&p).unwrap()),
            ..Idx::open(&p).unwrap()
        };
        for (o, off) in &entries {
            assert_eq!(big.find(&ObjectId::from_bytes(*o)).unwrap(), Some(*off));
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
        assert!(idx.find(&ObjectId::from_bytes([1u8; 20])).is_err());
    }
}
