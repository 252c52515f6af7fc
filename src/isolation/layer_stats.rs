//! The stat data of a shared layer's files, recorded once per layer.
//!
//! A session over a shared layer writes its private repository's index with the stat data
//! each file shows through the mount, which for a file the layer serves is the layer file's
//! own (see [`super::shared_lower`]). Reading it with one `lstat` per file cost a later
//! session as much as the walk of the project itself (78,635 calls on the Linux tree), yet a
//! layer's files never change once it is published. So the data is recorded beside the
//! layer, `<ulid>/stats`: by the session that writes the layer (from the copy it just made),
//! else by the first session that needs it, and read back by every later one.
//!
//! The record names the inode of the layer's `tree/`: a layer copied or restored elsewhere
//! (other inodes) does not match it and is read again. A file whose change time moved since
//! (a link to it made as a pending patch's pre-image) keeps its recorded key; git then
//! compares that file's content once in the sandbox and finds it clean — slower for that
//! file, never wrong.
//!
//! ```text
//! stats: "patchbox-layer-stats 1\n", then little-endian u64s: tree/'s device and inode,
//!        the count of files; per file of the manifest, in its order: ino, size, mtime
//!        seconds and nanoseconds, ctime seconds and nanoseconds, mode
//! ```

use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use super::shared_lower::SharedLayer;
use crate::error::{Error, Result};
use crate::fs::state_dir::{self, StateDir};
use crate::fs::Timestamp;
use crate::tree::snapshot::StatKey;

const FILE: &str = "stats";
const MAGIC: &[u8] = b"patchbox-layer-stats 1\n";
const RECORD: usize = 7 * 8;

/// The stat data of every file of `layer`'s manifest, in its order: the recorded data when
/// it is still this layer's, else one `lstat` per file (then recorded, best effort).
pub fn keys(layer: &SharedLayer) -> Result<Vec<StatKey>> {
    let tree = layer.tree();
    let id = tree_id(&tree)?;
    let n = layer.file_count()?;
    if let Some(keys) = std::fs::read(layer.dir.join(FILE))
        .ok()
        .and_then(|b| decode(&b, id, n))
    {
        return Ok(keys);
    }
    let mut keys = Vec::with_capacity(n);
    for f in &layer.manifest()?.files {
        let p = tree.join(std::ffi::OsStr::from_bytes(&f.path));
        let m = std::fs::symlink_metadata(&p)
            .map_err(|e| Error::io("stat shared lower file", &p, e))?;
        keys.push(StatKey::from_metadata(&m));
    }
    let _ = record(layer, &keys);
    Ok(keys)
}

/// Records `keys` (the stat data of the layer's manifest files, in its order) beside
/// `layer`, atomically. The session that writes a layer calls it with what its copy
/// returned; a failure only costs a later session the `lstat`s.
pub fn record(layer: &SharedLayer, keys: &[StatKey]) -> Result<()> {
    if keys.len() != layer.file_count()? {
        return Ok(());
    }
    let id = tree_id(&layer.tree())?;
    let dir = StateDir::open(&layer.dir)?;
    state_dir::write_atomic(&dir.join(Path::new(FILE))?, &encode(keys, id))
}

/// The device and inode of a layer's `tree/`.
fn tree_id(tree: &Path) -> Result<(u64, u64)> {
    let m = std::fs::symlink_metadata(tree).map_err(|e| Error::io("stat", tree, e))?;
    Ok((m.dev(), m.ino()))
}

fn encode(keys: &[StatKey], (dev, ino): (u64, u64)) -> Vec<u8> {
    let mut out = Vec::with_capacity(MAGIC.len() + 24 + keys.len() * RECORD);
    out.extend_from_slice(MAGIC);
    for v in [dev, ino, keys.len() as u64] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    for k in keys {
        for v in [
            k.ino,
            k.size,
            k.mtime.secs as u64,
            k.mtime.nanos as u64,
            k.ctime.secs as u64,
            k.ctime.nanos as u64,
            u64::from(k.mode),
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
    out
}

/// The keys of a record made for the tree `id` holding `n` files; `None` for anything else.
fn decode(data: &[u8], id: (u64, u64), n: usize) -> Option<Vec<StatKey>> {
    let rest = data.strip_prefix(MAGIC)?;
    let word = |b: &[u8], i: usize| -> Option<u64> {
        Some(u64::from_le_bytes(
            b.get(i * 8..i * 8 + 8)?.try_into().ok()?,
        ))
    };
    if (word(rest, 0)?, word(rest, 1)?) != id || word(rest, 2)? != n as u64 {
        return None;
    }
    let body = rest.get(24..)?;
    if body.len() != n * RECORD {
        return None;
    }
    body.chunks_exact(RECORD)
        .map(|r| {
            Some(StatKey {
                ino: word(r, 0)?,
                size: word(r, 1)?,
                mtime: Timestamp::new(word(r, 2)? as i64, word(r, 3)? as i64),
                ctime: Timestamp::new(word(r, 4)? as i64, word(r, 5)? as i64),
                mode: u32::try_from(word(r, 6)?).ok()?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_refusals() {
        let k = StatKey {
            ino: 7,
            size: 9,
            mtime: Timestamp::new(1_700_000_000, 5),
            ctime: Timestamp::new(-1, 999_999_999),
            mode: 0o100644,
        };
        let b = encode(&[k, k], (1, 2));
        assert_eq!(decode(&b, (1, 2), 2), Some(vec![k, k]));
        assert_eq!(decode(&b, (1, 3), 2), None, "another tree");
        assert_eq!(decode(&b, (1, 2), 3), None, "another count");
        assert_eq!(decode(&b[..b.len() - 1], (1, 2), 2), None, "cut short");
    }
}
