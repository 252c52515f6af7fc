//! A fast hasher for sets and maps keyed by a project's paths: FxHash's mixing, eight bytes
//! at a time. The default hasher (SipHash) resists hash flooding, which paths from the
//! user's own tree and index need not, and costs several times more per path; on a tree of
//! 78,635 files the difference shows in every snapshot.

use std::collections::{HashMap, HashSet};
use std::hash::BuildHasherDefault;

/// The hasher (see the module documentation).
#[derive(Default)]
pub(crate) struct PathHasher(u64);

impl std::hash::Hasher for PathHasher {
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x517c_c1b7_2722_0a95;
        let mut h = self.0;
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            h = (h.rotate_left(5) ^ u64::from_le_bytes(w)).wrapping_mul(K);
        }
        for &b in chunks.remainder() {
            h = (h.rotate_left(5) ^ u64::from(b)).wrapping_mul(K);
        }
        self.0 = h;
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// A map keyed by paths as bytes.
pub(crate) type PathMap<'a, V> = HashMap<&'a [u8], V, BuildHasherDefault<PathHasher>>;

/// A set of paths as bytes.
pub(crate) type PathSet<'a> = HashSet<&'a [u8], BuildHasherDefault<PathHasher>>;
