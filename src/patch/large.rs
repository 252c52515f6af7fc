//! The patch of a large text file, written from the open files instead of from memory.
//!
//! [`write`](super::write) takes both sides whole. For a small edit to a large file that
//! means holding both files in fresh buffers, and on the machines measured faulting those
//! buffers in costs more than the diff (perf, a finalize of 100 edits with a 24 MB header:
//! two thirds of reading it was the kernel zeroing and mapping new pages). Here the sides are
//! read in fixed-size chunks through two reused buffers: the common head is found going
//! forward, the common tail going backward from the ends, and only the window between them —
//! every changed byte plus a few equal lines on each side — is read into memory and handed to
//! the same hunk writer, told how many lines precede the window. The blob ids of the `index`
//! line are hashed from the same chunks. The bytes written are exactly those of
//! [`write_file_diff`](super::write::write_file_diff) on the whole contents (tested below
//! against it with chunks of a few bytes, so every boundary case is crossed).
//!
//! Only two regular text files under one path are written here; anything else (binary by
//! git's heuristic, a side that changed size while being read) returns `Ok(false)` with
//! nothing written, and the caller writes from memory.
//!
//! ```
//! use std::io::Write;
//! let dir = tempfile::tempdir()?;
//! let (a, b) = (dir.path().join("a"), dir.path().join("b"));
//! std::fs::write(&a, "one\ntwo\nthree\n")?;
//! std::fs::write(&b, "one\n2\nthree\n")?;
//! let path = patchbox::RelPath::new("f.txt")?;
//! let (fa, fb) = (std::fs::File::open(&a)?, std::fs::File::open(&b)?);
//! let side = |file| patchbox::patch::large::FileSide { path: &path, mode: 0o100644, file, id: None };
//! let mut out = Vec::new();
//! assert!(patchbox::patch::large::write_file_diff_from_files(&mut out, side(&fa), side(&fb), 1 << 20)?);
//! assert!(out.ends_with(b"@@ -1,3 +1,3 @@\n one\n-two\n+2\n three\n"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use sha1::{Digest, Sha1};

use super::bytes::{common_prefix, common_suffix};
use super::write::{
    normalize_mode, push_diff_git_line, push_mode_change, push_name_line, write_hunks_at,
    BINARY_SNIFF_LEN, CONTEXT,
};
use crate::fs::relpath::RelPath;
use crate::git::oid::ObjectId;
use crate::git::quote::quote_path;

/// One side of [`write_file_diff_from_files`]: a regular file, open for reading.
pub struct FileSide<'a> {
    /// Its path in the patch (both sides share it).
    pub path: &'a RelPath,
    /// git's mode (`0o100644` or `0o100755`).
    pub mode: u32,
    /// The file, read with positioned reads (its offset is not used).
    pub file: &'a File,
    /// Its blob id when the caller knows it (then it is not hashed here). Invariant: the id
    /// of exactly the file's content.
    pub id: Option<ObjectId>,
}

/// Reads exactly `buf.len()` bytes at `off`, or fails (a file shorter than when measured).
fn read_at(f: &File, buf: &mut [u8], off: u64) -> io::Result<()> {
    f.read_exact_at(buf, off)
}

/// A blob hasher fed chunk by chunk: SHA-1 of `blob <len>\0` and the content.
fn blob_hasher(len: u64) -> Sha1 {
    let mut h = Sha1::new();
    h.update(format!("blob {len}\0").as_bytes());
    h
}

/// Writes the `diff --git` section of `old` → `new` (same path, both regular files) as
/// [`write_file_diff`](super::write::write_file_diff) would from their whole contents, reading
/// them in `chunk`-byte pieces. Returns `Ok(false)`, with nothing written, when either side
/// is binary, the paths differ, or a file's size changes while it is read.
pub fn write_file_diff_from_files(
    out: &mut Vec<u8>,
    old: FileSide<'_>,
    new: FileSide<'_>,
    chunk: usize,
) -> io::Result<bool> {
    let chunk = chunk.max(1);
    if old.path.as_bytes() != new.path.as_bytes() {
        return Ok(false);
    }
    let (old_len, new_len) = (old.file.metadata()?.len(), new.file.metadata()?.len());

    // git's heuristic looks at the first bytes only.
    for (f, len) in [(old.file, old_len), (new.file, new_len)] {
        let mut sniff = vec![0u8; (BINARY_SNIFF_LEN as u64).min(len) as usize];
        read_at(f, &mut sniff, 0)?;
        if sniff.contains(&0) {
            return Ok(false);
        }
    }

    // The blob ids of the sides whose id is unknown are hashed on threads of their own
    // (SHA-1 of every byte: for a 24 MB file about as long as reading and comparing both
    // sides), while the common head and tail are found here.
    std::thread::scope(|s| {
        let (old_file, new_file) = (old.file, new.file);
        // A known id, or the thread hashing the side.
        let old_id = old
            .id
            .ok_or_else(|| s.spawn(move || hash_blob(old_file, old_len, chunk)));
        let new_id = new
            .id
            .ok_or_else(|| s.spawn(move || hash_blob(new_file, new_len, chunk)));
        let hex =
            |id: Result<ObjectId, std::thread::ScopedJoinHandle<'_, io::Result<ObjectId>>>| {
                let id = match id {
                    Ok(id) => id,
                    Err(h) => h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))?,
                };
                io::Result::Ok(id.to_hex())
            };
        write_around_change(out, &old, &new, chunk, (old_len, new_len), || {
            Ok((hex(old_id)?, hex(new_id)?))
        })
    })
}

/// SHA-1 of `blob <len>\0` and the `len` bytes of `f`, read in `chunk`-byte pieces.
fn hash_blob(f: &File, len: u64, chunk: usize) -> io::Result<ObjectId> {
    let mut h = blob_hasher(len);
    let mut buf = vec![0u8; chunk.min(len as usize).max(1)];
    let mut off = 0u64;
    while off < len {
        let n = (buf.len() as u64).min(len - off) as usize;
        read_at(f, &mut buf[..n], off)?;
        h.update(&buf[..n]);
        off += n as u64;
    }
    Ok(ObjectId::from_bytes(h.finalize().into()))
}

/// The body of [`write_file_diff_from_files`] once both sides are known to be text: finds the
/// common head and tail, reads the window between them, and writes the section with the
/// blob ids `ids` gives (called once the two files have been read).
fn write_around_change(
    out: &mut Vec<u8>,
    old: &FileSide<'_>,
    new: &FileSide<'_>,
    chunk: usize,
    (old_len, new_len): (u64, u64),
    ids: impl FnOnce() -> io::Result<(String, String)>,
) -> io::Result<bool> {
    let (old_mode, new_mode) = (normalize_mode(old.mode), normalize_mode(new.mode));
    // Forward: the first differing byte, the newlines before it, the last newline before it.
    let (mut a, mut b) = (vec![0u8; chunk], vec![0u8; chunk]);
    let mut raw_head: Option<u64> = None;
    let mut nl_before = 0u64; // newlines in old[..raw_head]
    let mut last_nl: Option<u64> = None; // position of the last of them
    let mut off = 0u64;
    while raw_head.is_none() && off < old_len.max(new_len) {
        let an = (chunk as u64).min(old_len.saturating_sub(off)) as usize;
        let bn = (chunk as u64).min(new_len.saturating_sub(off)) as usize;
        read_at(old.file, &mut a[..an], off)?;
        read_at(new.file, &mut b[..bn], off)?;
        let n = an.min(bn);
        let same = common_prefix(&a[..n], &b[..n]);
        let counted = &a[..same];
        nl_before += memchr::memchr_iter(b'\n', counted).count() as u64;
        if let Some(i) = memchr::memrchr(b'\n', counted) {
            last_nl = Some(off + i as u64);
        }
        if same < an || same < bn {
            raw_head = Some(off + same as u64);
        }
        off += chunk as u64;
    }
    let raw_head = raw_head.unwrap_or(old_len.min(new_len));
    let (a_name, b_name) = (
        quote_path("a/", old.path.as_bytes()),
        quote_path("b/", new.path.as_bytes()),
    );
    if raw_head == old_len && old_len == new_len {
        // The same content: a mode change alone, or nothing.
        if old_mode != new_mode {
            push_diff_git_line(out, &a_name, &b_name);
            push_mode_change(out, old_mode, new_mode);
        }
        return Ok(true);
    }
    // The common head as the writer counts it: whole lines.
    let head = last_nl.map_or(0, |p| p + 1);

    // Backward: the common tail, not reaching into the head.
    let room = old_len.min(new_len) - head;
    let mut tail = 0u64;
    while tail < room {
        let n = (chunk as u64).min(room - tail) as usize;
        read_at(old.file, &mut a[..n], old_len - tail - n as u64)?;
        read_at(new.file, &mut b[..n], new_len - tail - n as u64)?;
        let same = common_suffix(&a[..n], &b[..n]);
        tail += same as u64;
        if same < n {
            break;
        }
    }

    // The window: from CONTEXT + 2 line starts before the head (or the start) to CONTEXT + 2
    // newlines after the tail begins (or the end): the writer finds in it the head, the tail
    // and the context lines it would find in the whole files.
    let lo = nth_newline_back(old.file, head, CONTEXT as u64 + 2, chunk)?.map_or(0, |p| p + 1);
    let lines_before = nl_before - count_newlines(old.file, lo, raw_head, chunk)?;
    let old_tail_at = old_len - tail;
    let old_hi = nth_newline_forward(old.file, old_tail_at, old_len, CONTEXT as u64 + 2, chunk)?
        .map_or(old_len, |p| p + 1);
    let from_end = old_len - old_hi;
    let new_hi = new_len - from_end;
    let mut old_w = vec![0u8; (old_hi - lo) as usize];
    let mut new_w = vec![0u8; (new_hi - lo) as usize];
    read_at(old.file, &mut old_w, lo)?;
    read_at(new.file, &mut new_w, lo)?;

    // Nothing changed size under us (a grown file would have been read short).
    if old.file.metadata()?.len() != old_len || new.file.metadata()?.len() != new_len {
        return Ok(false);
    }
    let (old_hex, new_hex) = ids()?;

    push_diff_git_line(out, &a_name, &b_name);
    if old_mode != new_mode {
        push_mode_change(out, old_mode, new_mode);
        out.extend_from_slice(format!("index {old_hex}..{new_hex}\n").as_bytes());
    } else {
        out.extend_from_slice(format!("index {old_hex}..{new_hex} {old_mode:o}\n").as_bytes());
    }
    push_name_line(out, b"--- ", Some((&a_name, old.path)));
    push_name_line(out, b"+++ ", Some((&b_name, new.path)));
    write_hunks_at(out, &old_w, &new_w, lines_before as usize);
    Ok(true)
}

/// The position of the `n`-th newline before `pos` (counting back), if there are `n`.
fn nth_newline_back(f: &File, pos: u64, n: u64, chunk: usize) -> io::Result<Option<u64>> {
    let mut buf = vec![0u8; chunk];
    let (mut end, mut seen) = (pos, 0u64);
    while end > 0 {
        let len = (chunk as u64).min(end) as usize;
        let start = end - len as u64;
        read_at(f, &mut buf[..len], start)?;
        for i in memchr::memrchr_iter(b'\n', &buf[..len]) {
            seen += 1;
            if seen == n {
                return Ok(Some(start + i as u64));
            }
        }
        end = start;
    }
    Ok(None)
}

/// The position of the `n`-th newline at or after `pos` (before `len`), if there are `n`.
fn nth_newline_forward(
    f: &File,
    pos: u64,
    len: u64,
    n: u64,
    chunk: usize,
) -> io::Result<Option<u64>> {
    let mut buf = vec![0u8; chunk];
    let (mut start, mut seen) = (pos, 0u64);
    while start < len {
        let l = (chunk as u64).min(len - start) as usize;
        read_at(f, &mut buf[..l], start)?;
        for i in memchr::memchr_iter(b'\n', &buf[..l]) {
            seen += 1;
            if seen == n {
                return Ok(Some(start + i as u64));
            }
        }
        start += l as u64;
    }
    Ok(None)
}

/// How many newlines `f` holds in `[from, to)`.
fn count_newlines(f: &File, from: u64, to: u64, chunk: usize) -> io::Result<u64> {
    let mut buf = vec![0u8; chunk];
    let (mut at, mut count) = (from, 0u64);
    while at < to {
        let l = (chunk as u64).min(to - at) as usize;
        read_at(f, &mut buf[..l], at)?;
        count += memchr::memchr_iter(b'\n', &buf[..l]).count() as u64;
        at += l as u64;
    }
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::patch::write::tests::text;
    use crate::patch::write::{write_file_diff, Side};
    use proptest::prelude::*;

    fn from_memory(old: &[u8], new: &[u8], old_mode: u32, new_mode: u32) -> Vec<u8> {
        let p = RelPath::new("dir/a file.c").unwrap();
        let mut out = Vec::new();
        write_file_diff(
            &mut out,
            Some(Side {
                path: &p,
                mode: old_mode,
                data: old,
            }),
            Some(Side {
                path: &p,
                mode: new_mode,
                data: new,
            }),
        );
        out
    }

    fn from_files(
        old: &[u8],
        new: &[u8],
        old_mode: u32,
        new_mode: u32,
        chunk: usize,
        known: bool,
    ) -> Option<Vec<u8>> {
        let d = tempfile::tempdir().unwrap();
        let (a, b) = (d.path().join("a"), d.path().join("b"));
        std::fs::write(&a, old).unwrap();
        std::fs::write(&b, new).unwrap();
        let (fa, fb) = (File::open(&a).unwrap(), File::open(&b).unwrap());
        let p = RelPath::new("dir/a file.c").unwrap();
        let id = known.then(|| crate::git::oid::blob_id(old));
        let mut out = Vec::new();
        let ok = write_file_diff_from_files(
            &mut out,
            FileSide {
                path: &p,
                mode: old_mode,
                file: &fa,
                id,
            },
            FileSide {
                path: &p,
                mode: new_mode,
                file: &fb,
                id: None,
            },
            chunk,
        )
        .unwrap();
        ok.then_some(out)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1500))]
        #[test]
        fn streamed_patch_equals_the_in_memory_one(
            old in text(),
            edits in proptest::collection::vec((0usize..400, 0usize..12, text()), 0..4),
            chunk in 1usize..40,
            known in any::<bool>(),
            mode_change in any::<bool>(),
        ) {
            let mut new = old.clone();
            for (at, del, ins) in edits {
                let at = at.min(new.len());
                let end = (at + del).min(new.len());
                new.splice(at..end, ins.iter().copied().take(20));
            }
            let new_mode = if mode_change { 0o100755 } else { 0o100644 };
            let want = from_memory(&old, &new, 0o100644, new_mode);
            let got = from_files(&old, &new, 0o100644, new_mode, chunk, known)
                .expect("text sides are written");
            prop_assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(&want));
        }
    }

    #[test]
    fn large_files_with_edits_at_the_edges_match_and_binary_is_left_to_the_caller() {
        let lines: Vec<String> = (0..20_000).map(|i| format!("line {i}\n")).collect();
        let old = lines.concat().into_bytes();
        let cases: Vec<Vec<u8>> = vec![
            [&old[..], b"appended\n"].concat(),
            [b"prepended\n", &old[..]].concat(),
            old[..old.len() - 1].to_vec(), // final newline dropped
            spliced(&old, 50_000, 10, b"X"),
            old[..70_000].to_vec(),
        ];
        for new in cases {
            for chunk in [7, 4096, 1 << 20] {
                assert_eq!(
                    from_files(&old, &new, 0o100644, 0o100644, chunk, false).unwrap(),
                    from_memory(&old, &new, 0o100644, 0o100644),
                    "chunk {chunk}"
                );
            }
        }
        // Small oddities: empty sides, no newline anywhere, one long line.
        let long: Vec<u8> = b"x".repeat(5000);
        let odd: [(&[u8], &[u8]); 7] = [
            (b"", b"x\n"),
            (b"x\n", b""),
            (b"x", b"x\n"),
            (b"abc", b"abd"),
            (b"a\nb", b"a\nc"),
            (&long, b"y"),
            (b"a\r\nb\r\n", b"a\r\nB\r\n"),
        ];
        for (o, n) in odd {
            for chunk in [1, 2, 3, 64] {
                assert_eq!(
                    from_files(o, n, 0o100644, 0o100644, chunk, false).unwrap(),
                    from_memory(o, n, 0o100644, 0o100644),
                    "{:?} -> {:?}, chunk {chunk}",
                    String::from_utf8_lossy(&o[..o.len().min(10)]),
                    String::from_utf8_lossy(n)
                );
            }
        }
        let mut bin = old.clone();
        bin[10] = 0;
        assert_eq!(
            from_files(&bin, &old, 0o100644, 0o100644, 4096, false),
            None
        );
        // Same bytes, same mode: nothing; same bytes, new mode: the mode lines only.
        assert_eq!(
            from_files(&old, &old, 0o100644, 0o100644, 4096, true),
            Some(Vec::new())
        );
        assert_eq!(
            from_files(&old, &old, 0o100644, 0o100755, 4096, true).unwrap(),
            from_memory(&old, &old, 0o100644, 0o100755)
        );
    }

    fn spliced(v: &[u8], at: usize, len: usize, with: &[u8]) -> Vec<u8> {
        let mut v = v.to_vec();
        v.splice(at..at + len, with.iter().copied());
        v
    }
}
