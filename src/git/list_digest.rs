//! A SHA-1 over a long list of small records (a path, a mode, an id, per file): the digests
//! that let a later session skip work when its list equals an earlier one (the index's tree,
//! a shared layer's files).
//!
//! Records are gathered in a buffer and hashed in large pieces: on a list of 78,000 files,
//! one hash update per field would cost more than the hashing itself. What a record holds is
//! its user's choice; [`Record::path`] writes a path with its length first, so that no two
//! lists of paths give the same bytes.
//!
//! ```
//! use patchbox::git::list_digest::ListDigest;
//! let digest = |mode: u32| {
//!     let mut d = ListDigest::new();
//!     d.record(|r| {
//!         r.path(b"src/main.c");
//!         r.bytes(&mode.to_le_bytes());
//!     });
//!     d.finish()
//! };
//! assert_eq!(digest(0o100644), digest(0o100644));
//! assert_ne!(digest(0o100644), digest(0o100755));
//! ```

use sha1::{Digest as _, Sha1};

/// How much is gathered before it is hashed.
const PIECE: usize = 64 * 1024;

/// A SHA-1 being made over records added in order (see the module docs).
pub struct ListDigest {
    hash: Sha1,
    buf: Vec<u8>,
}

/// One record being added: its fields go to the digest's buffer in the order written.
pub struct Record<'a> {
    buf: &'a mut Vec<u8>,
}

impl Record<'_> {
    /// A path (or any variable-length field): its length as a little-endian `u64`, then its
    /// bytes.
    pub fn path(&mut self, path: &[u8]) {
        self.buf
            .extend_from_slice(&(path.len() as u64).to_le_bytes());
        self.buf.extend_from_slice(path);
    }

    /// Fixed-length bytes (an id, a mode, a time), as they are.
    pub fn bytes(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }
}

impl Default for ListDigest {
    fn default() -> Self {
        Self::new()
    }
}

impl ListDigest {
    /// The digest of an empty list, to add records to.
    pub fn new() -> ListDigest {
        ListDigest {
            hash: Sha1::new(),
            buf: Vec::with_capacity(PIECE + 4096),
        }
    }

    /// Adds the next record, whose fields `write` writes.
    pub fn record(&mut self, write: impl FnOnce(&mut Record<'_>)) {
        write(&mut Record { buf: &mut self.buf });
        if self.buf.len() >= PIECE {
            self.hash.update(&self.buf);
            self.buf.clear();
        }
    }

    /// The SHA-1 of every record added.
    pub fn finish(mut self) -> [u8; 20] {
        self.hash.update(&self.buf);
        self.hash.finalize().into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pieces are an implementation detail: the digest is the SHA-1 of all the bytes, in
    /// order, however many pieces they were hashed in.
    #[test]
    fn the_digest_is_the_sha1_of_the_records_bytes() {
        let mut d = ListDigest::new();
        let mut all = Vec::new();
        for i in 0..20_000u32 {
            let path = format!("dir/{i}/file");
            d.record(|r| {
                r.path(path.as_bytes());
                r.bytes(&i.to_le_bytes());
            });
            all.extend_from_slice(&(path.len() as u64).to_le_bytes());
            all.extend_from_slice(path.as_bytes());
            all.extend_from_slice(&i.to_le_bytes());
        }
        assert!(all.len() > 2 * PIECE);
        let want: [u8; 20] = Sha1::digest(&all).into();
        assert_eq!(d.finish(), want);
    }
}
