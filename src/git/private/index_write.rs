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
//! let path = patchbox::RelPath::new("src/lib.rs").unwrap();
//! let e = TreeEntry { path, mode: 0o100644, oid, skip_worktree: false };
//! let bytes = encode_index(&[e], &|_| None);
//! let back = parse_index_bytes(&bytes).unwrap();
//! assert_eq!(back[0].path, b"src/lib.rs");
//! assert_eq!(back[0].size, 0);
//! assert_eq!(back[0].oid, oid);
//! ```

use std::io::Write;

use sha1::{Digest, Sha1};

use crate::git::index::LStat;
use crate::git::private::TreeEntry;

/// The bytes of an index of `entries` (sorted by path bytes, one per path), entry `i` with
/// the stat data `stat(i)` (zeros for `None`), checksum included.
pub fn encode_index(entries: &[TreeEntry], stat: &dyn Fn(usize) -> Option<LStat>) -> Vec<u8> {
    let mut out = Vec::new();
    encode_entries(entries, stat, usize::MAX, &mut |chunk| {
        out = chunk;
        true
    });
    let digest = Sha1::digest(&out);
    out.extend_from_slice(&digest);
    out
}

/// Writes the index [`encode_index`] makes to `file`, without holding it whole: it is
/// encoded in pieces of 1 MB, which a second thread hashes and writes while the
/// next is encoded (a checksum over a large index — 8 MB for 78,000 files — costs as much
/// as its encoding on a CPU without SHA instructions). On one thread when no other can be
/// made.
pub fn write_index(
    entries: &[TreeEntry],
    stat: &dyn Fn(usize) -> Option<LStat>,
    file: &std::fs::File,
) -> std::io::Result<()> {
    std::thread::scope(|s| {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(2);
        // `Write` is implemented for `&File`: the writer borrows the file, and the
        // fallback can still write it when no writer could be made.
        let shared: &std::fs::File = file;
        let writer = std::thread::Builder::new().spawn_scoped(s, move || {
            let mut file = shared;
            let mut h = Sha1::new();
            for piece in rx {
                h.update(&piece);
                file.write_all(&piece)?;
            }
            file.write_all(&h.finalize())
        });
        match writer {
            Ok(w) => {
                // A send fails only when the writer stopped on an error, which its join
                // returns.
                encode_entries(entries, stat, PIECE, &mut |piece| tx.send(piece).is_ok());
                drop(tx);
                w.join().unwrap_or_else(|p| std::panic::resume_unwind(p))
            }
            Err(_) => (&*file).write_all(&encode_index(entries, stat)),
        }
    })
}

/// The size of the pieces [`write_index`] hands to its writer.
const PIECE: usize = 1 << 20;

/// The index's bytes before its checksum, handed to `emit` in pieces of at least `piece`
/// bytes (the last one shorter); stops when `emit` returns false.
fn encode_entries(
    entries: &[TreeEntry],
    stat: &dyn Fn(usize) -> Option<LStat>,
    piece: usize,
    emit: &mut dyn FnMut(Vec<u8>) -> bool,
) {
    let extended = entries.iter().any(|e| e.skip_worktree);
    let version: u32 = if extended { 3 } else { 2 };
    // Room for the usual entry (62 bytes, a path, padding): capacity never touched costs
    // no memory, and a longer path only grows the buffer.
    let room = |n: usize| n.saturating_mul(160).min(piece.saturating_add(4096));
    let mut out = Vec::with_capacity(room(entries.len()).saturating_add(12));
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
        let path = e.path.as_bytes();
        let mut flags = path.len().min(0xfff) as u16;
        if e.skip_worktree {
            flags |= 0x4000;
        }
        out.extend_from_slice(&flags.to_be_bytes());
        if e.skip_worktree {
            out.extend_from_slice(&0x4000u16.to_be_bytes());
        }
        out.extend_from_slice(path);
        // One to eight NULs: the entry's length becomes a multiple of eight.
        let len = out.len() - start;
        out.resize(start + ((len + 8) & !7), 0);
        if out.len() >= piece {
            let next = Vec::with_capacity(room(entries.len() - i));
            if !emit(std::mem::replace(&mut out, next)) {
                return;
            }
        }
    }
    emit(out);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::relpath::RelPath;
    use crate::git::index::parse_index_bytes;
    use crate::git::oid::ObjectId;

    #[test]
    fn round_trips_through_the_reader() {
        let entries = vec![
            TreeEntry {
                path: RelPath::new("a").unwrap(),
                mode: 0o100755,
                oid: ObjectId::from_bytes([2; 20]),
                skip_worktree: false,
            },
            TreeEntry {
                path: RelPath::from_bytes(&[b'n'; 5000]).unwrap(),
                mode: 0o100644,
                oid: ObjectId::from_bytes([3; 20]),
                skip_worktree: false,
            },
            TreeEntry {
                path: RelPath::new("sub").unwrap(),
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

    /// The index written in pieces is byte for byte the one encoded whole, checksum
    /// included, for an index of many pieces.
    #[test]
    fn an_index_written_in_pieces_is_the_one_encoded_whole() {
        let mut entries: Vec<TreeEntry> = (0..40_000u32)
            .map(|i| TreeEntry {
                path: RelPath::new(format!("dir{:03}/file-{i:06}.c", i % 997)).unwrap(),
                mode: 0o100644,
                oid: ObjectId::from_bytes([(i % 251) as u8; 20]),
                skip_worktree: false,
            })
            .collect();
        entries.sort_by(|a, b| a.path.as_bytes().cmp(b.path.as_bytes()));
        let st = |i: usize| {
            (!i.is_multiple_of(3)).then_some(LStat {
                size: i as u64,
                ino: 1000 + i as u64,
                ..LStat::default()
            })
        };
        let whole = encode_index(&entries, &st);
        assert!(whole.len() > 2 * PIECE);
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("index");
        let f = std::fs::File::create(&p).unwrap();
        write_index(&entries, &st, &f).unwrap();
        drop(f);
        let written = std::fs::read(&p).unwrap();
        assert!(written == whole, "the pieces differ from the whole");
        assert_eq!(parse_index_bytes(&written).unwrap().len(), entries.len());
    }
}
