//! Writing a git index (`DIRC` version 2, or 3 when an entry needs the skip-worktree bit)
//! whose entries carry the stat data of the files they describe, so that git trusts them
//! without reading them — `git status` in a sandbox of a large tree does not rehash it.
//!
//! The invariant the caller keeps: an entry is given stat data only when the file with that
//! stat data has exactly the entry's content. An entry without stat data is written with
//! zeros (size 0 included), which git never takes for a match: it reads the file and
//! compares. Racy git needs no help here: git itself distrusts an entry whose mtime is not
//! older than the index file, and the index is written after the files it describes.
//!
//! ```
//! use patchbox::git::index::parse_index_bytes;
//! use patchbox::git::oid::ObjectId;
//! use patchbox::git::private::index_write::encode_index;
//! use patchbox::git::private::TreeEntry;
//! let oid = ObjectId::from_bytes([1; 20]);
//! let e = TreeEntry { path: b"src/lib.rs".to_vec(), mode: 0o100644, oid, skip_worktree: false };
//! let bytes = encode_index(&[e], &|_| None);
//! let back = parse_index_bytes(&bytes).unwrap();
//! assert_eq!(back[0].path, b"src/lib.rs");
//! assert_eq!(back[0].size, 0);
//! assert_eq!(back[0].oid, oid);
//! ```

use sha1::{Digest, Sha1};

use crate::git::index::LStat;
use crate::git::private::TreeEntry;

/// The bytes of an index of `entries` (sorted by path bytes, one per path), entry `i` with
/// the stat data `stat(i)` (zeros for `None`), checksum included.
pub fn encode_index(entries: &[TreeEntry], stat: &dyn Fn(usize) -> Option<LStat>) -> Vec<u8> {
    let extended = entries.iter().any(|e| e.skip_worktree);
    let version: u32 = if extended { 3 } else { 2 };
    let mut out = Vec::with_capacity(12 + entries.len() * 96 + 20);
    out.extend_from_slice(b"DIRC");
    out.extend_from_slice(&version.to_be_bytes());
    out.extend_from_slice(&(entries.len() as u32).to_be_bytes());
    for (i, e) in entries.iter().enumerate() {
        let start = out.len();
        let st = stat(i).unwrap_or_default();
        // The index keeps the low 32 bits of every field, as git does.
        for v in [
            st.ctime.secs as u32,
            st.ctime.nanos as u32,
            st.mtime.secs as u32,
            st.mtime.nanos as u32,
            st.dev as u32,
            st.ino as u32,
            e.mode,
            st.uid,
            st.gid,
            st.size as u32,
        ] {
            out.extend_from_slice(&v.to_be_bytes());
        }
        out.extend_from_slice(e.oid.as_bytes());
        let mut flags = e.path.len().min(0xfff) as u16;
        if e.skip_worktree {
            flags |= 0x4000;
        }
        out.extend_from_slice(&flags.to_be_bytes());
        if e.skip_worktree {
            out.extend_from_slice(&0x4000u16.to_be_bytes());
        }
        out.extend_from_slice(&e.path);
        // One to eight NULs: the entry's length becomes a multiple of eight.
        let len = out.len() - start;
        out.resize(start + ((len + 8) & !7), 0);
    }
    let digest = Sha1::digest(&out);
    out.extend_from_slice(&digest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::git::index::parse_index_bytes;
    use crate::git::oid::ObjectId;

    #[test]
    fn round_trips_through_the_reader() {
        let entries = vec![
            TreeEntry {
                path: b"a".to_vec(),
                mode: 0o100755,
                oid: ObjectId::from_bytes([2; 20]),
                skip_worktree: false,
            },
            TreeEntry {
                path: vec![b'n'; 5000],
                mode: 0o100644,
                oid: ObjectId::from_bytes([3; 20]),
                skip_worktree: false,
            },
            TreeEntry {
                path: b"sub".to_vec(),
                mode: 0o160000,
                oid: ObjectId::from_bytes([4; 20]),
                skip_worktree: true,
            },
        ];
        let st = LStat {
            size: 7,
            mtime: crate::fs::Timestamp::new(10, 11),
            ctime: crate::fs::Timestamp::new(12, 13),
            dev: 14,
            ino: 15,
            uid: 16,
            gid: 17,
            mode: 0o100755,
        };
        let bytes = encode_index(&entries, &|i| (i == 0).then_some(st));
        let back = parse_index_bytes(&bytes).unwrap();
        assert_eq!(back.len(), 3);
        assert_eq!(back[0].mtime, (10, 11));
        assert_eq!(back[0].ino, 15);
        assert_eq!(back[0].uid, 16);
        assert!(back[0].stat_matches(&st, (100, 0)));
        assert_eq!(back[1].path.len(), 5000);
        assert!(back[2].skip_worktree());
        assert!(back[2].is_gitlink());
    }
}
