//! A shared layer's digest: what its manifest lists, in 28 bytes.
//!
//! A later snapshot of a project asks whether the project's newest shared layer (see
//! [`super::shared_lower`]) holds exactly its clean tracked files: then every one of them is
//! served by the layer, no whiteout is needed, and nothing of the layer's manifest has to be
//! read. Reading and decoding the manifest (one record per file, 78,635 on the Linux tree)
//! cost a later session more than anything after its walk; hashing the session's own list
//! of clean tracked files costs a fraction of that. So each layer carries, beside its
//! manifest, the count of its files and a SHA-1 over them: per file, in path order, the
//! path's length and bytes, the mode bit, the blob id and the mtime. Equal digests mean
//! equal lists (SHA-1 over lists the user's own repository produced: no adversary chooses
//! them), and anything else means "compare the manifest", which is what was done before.
//!
//! ```text
//! digest: "patchbox-layer-digest 1\n", then the count of files (u64, little-endian) and
//!         the 20 bytes of the SHA-1
//! ```
//!
//! A layer made before digests existed has none: the first snapshot that decodes its
//! manifest records it, best effort.
//!
//! ```
//! use patchbox::fs::Timestamp;
//! use patchbox::git::oid::ObjectId;
//! use patchbox::isolation::layer_digest::Digester;
//! let oid = ObjectId::from_bytes([7; 20]);
//! let mut a = Digester::new();
//! a.add(b"src/main.c", false, &oid, Timestamp::new(1_700_000_000, 5));
//! let mut b = Digester::new();
//! b.add(b"src/main.c", true, &oid, Timestamp::new(1_700_000_000, 5));
//! assert_ne!(a.finish(), b.finish());
//! ```

use std::path::Path;

use crate::error::Result;
use crate::fs::state_dir::{self, StateDir};
use crate::fs::Timestamp;
use crate::git::list_digest::ListDigest;
use crate::git::oid::ObjectId;

/// The digest's file, in a layer's directory.
pub const FILE: &str = "digest";

const MAGIC: &[u8] = b"patchbox-layer-digest 1\n";

/// The count of a layer's files and a SHA-1 over their records (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LayerDigest {
    /// How many files the manifest lists.
    pub files: u64,
    /// The SHA-1 over their records, in path order.
    pub sha1: [u8; 20],
}

/// Builds a [`LayerDigest`] from files given in path order.
pub struct Digester {
    list: ListDigest,
    files: u64,
}

impl Default for Digester {
    fn default() -> Self {
        Self::new()
    }
}

impl Digester {
    /// An empty list's digester.
    pub fn new() -> Digester {
        Digester {
            list: ListDigest::new(),
            files: 0,
        }
    }

    /// Adds the next file (in path order): its path, whether it is executable, its blob id
    /// and its mtime.
    pub fn add(&mut self, path: &[u8], executable: bool, oid: &ObjectId, mtime: Timestamp) {
        self.list.record(|r| {
            r.path(path);
            r.bytes(&[u8::from(executable)]);
            r.bytes(oid.as_bytes());
            r.bytes(&mtime.secs.to_le_bytes());
            r.bytes(&mtime.nanos.to_le_bytes());
        });
        self.files += 1;
    }

    /// The digest of the files added.
    pub fn finish(self) -> LayerDigest {
        LayerDigest {
            files: self.files,
            sha1: self.list.finish(),
        }
    }
}

impl LayerDigest {
    /// The digest as stored.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(MAGIC.len() + 28);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&self.files.to_le_bytes());
        out.extend_from_slice(&self.sha1);
        out
    }

    /// Reads a stored digest back; `None` when the bytes are not one.
    pub fn decode(data: &[u8]) -> Option<LayerDigest> {
        let rest = data.strip_prefix(MAGIC)?;
        if rest.len() != 28 {
            return None;
        }
        let (files, sha1) = rest.split_at(8);
        Some(LayerDigest {
            files: u64::from_le_bytes(files.try_into().ok()?),
            sha1: sha1.try_into().ok()?,
        })
    }
}

/// The digest recorded in the layer directory `dir`, if there is a valid one.
pub fn read(dir: &Path) -> Option<LayerDigest> {
    std::fs::read(dir.join(FILE))
        .ok()
        .and_then(|b| LayerDigest::decode(&b))
}

/// Records `digest` in the layer directory `dir` (an older published layer, whose manifest
/// it describes), atomically.
pub fn record(dir: &StateDir, digest: &LayerDigest) -> Result<()> {
    state_dir::write_atomic(&dir.join(Path::new(FILE))?, &digest.encode())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest(files: &[(&[u8], bool, u8, i64)]) -> LayerDigest {
        let mut d = Digester::new();
        for &(p, x, o, t) in files {
            d.add(p, x, &ObjectId::from_bytes([o; 20]), Timestamp::new(t, 0));
        }
        d.finish()
    }

    #[test]
    fn each_field_and_the_split_of_paths_counts() {
        let base = digest(&[(b"a", false, 1, 5), (b"bc", false, 2, 6)]);
        assert_eq!(base, digest(&[(b"a", false, 1, 5), (b"bc", false, 2, 6)]));
        assert_eq!(base.files, 2);
        for other in [
            digest(&[(b"ab", false, 1, 5), (b"c", false, 2, 6)]),
            digest(&[(b"a", true, 1, 5), (b"bc", false, 2, 6)]),
            digest(&[(b"a", false, 3, 5), (b"bc", false, 2, 6)]),
            digest(&[(b"a", false, 1, 7), (b"bc", false, 2, 6)]),
            digest(&[(b"a", false, 1, 5)]),
        ] {
            assert_ne!(base, other);
        }
    }

    #[test]
    fn the_digest_is_the_sha1_of_the_documented_records() {
        // Stored digests outlive versions: the record layout is the module docs' one.
        use sha1::{Digest as _, Sha1};
        let mut d = Digester::new();
        let mut whole = Vec::new();
        let oid = ObjectId::from_bytes([9; 20]);
        for i in 0..5000u32 {
            let p = format!("dir/file-{i}");
            d.add(
                p.as_bytes(),
                i % 3 == 0,
                &oid,
                Timestamp::new(i64::from(i), 1),
            );
            whole.extend_from_slice(&(p.len() as u64).to_le_bytes());
            whole.extend_from_slice(p.as_bytes());
            whole.push(u8::from(i % 3 == 0));
            whole.extend_from_slice(oid.as_bytes());
            whole.extend_from_slice(&i64::from(i).to_le_bytes());
            whole.extend_from_slice(&1i64.to_le_bytes());
        }
        assert!(whole.len() > 64 * 1024);
        let got = d.finish();
        assert_eq!(got.files, 5000);
        assert_eq!(got.sha1, <[u8; 20]>::from(Sha1::digest(&whole)));
    }

    #[test]
    fn round_trip_and_refusals() {
        let d = digest(&[(b"a", false, 1, 5)]);
        assert_eq!(LayerDigest::decode(&d.encode()), Some(d));
        let e = d.encode();
        assert_eq!(LayerDigest::decode(&e[..e.len() - 1]), None);
        assert_eq!(LayerDigest::decode(&e[1..]), None);
    }
}
