//! Native writing of git-style patches, without running `git`.
//!
//! A delegated sub-agent's work comes back as a patch: the difference between the session's
//! `base/` snapshot and the sub-agent's sandbox. That patch must be accepted by `git apply`
//! (and, when it only touches text, by GNU `patch -p1`) in a copy of the old tree and must
//! reproduce the new tree exactly: contents byte for byte, the exec bit and symlinks. Spawning
//! `git diff` would require a repository and a `git` binary on every machine, so this module
//! writes the same format itself, following what `git diff --binary` (git 2.39) emits:
//!
//! * the `diff --git a/P b/P` header with git's C-style path quoting ([`quote_path`]);
//! * the extended header lines `new file mode`, `deleted file mode`, `old mode`/`new mode`
//!   and `index <old>..<new>[ <mode>]` with full 40-hex blob ids ([`blob_id_hex`]), so that
//!   `git apply --3way` can find the preimage blobs;
//! * unified hunks with three lines of context computed with Myers' algorithm (the `similar`
//!   crate) over lines that keep their terminators, so CRLF survives, with
//!   `\ No newline at end of file` markers;
//! * `GIT binary patch` sections (forward and reverse `literal` blocks, zlib + git's base85)
//!   when either side is binary by git's heuristic ([`is_binary`]);
//! * symlinks as mode `120000` files whose content is the link target, and a change between
//!   a regular file and a symlink as a deletion followed by an addition, as git does.
//!
//! Large files stay cheap: as in xdiff, lines that occur only on one side are set aside before
//! Myers runs (a rewritten 200 000-line file diffs in a fraction of a second), and a time limit
//! per file bounds the pathological cases (heavily reordered lines), past which the diff is
//! coarser but still exact. The blob ids of the `index` line cost as much as the diff of a
//! small edit to a large file: a caller that knows the old side's id passes it
//! (`write_file_diff_known`, crate-private), and sides of a megabyte or more are hashed on
//! threads of their own while the hunks are written.
//!
//! Hunk headers carry no function-name context (git's `@@ ... @@ fn foo` suffix); appliers
//! ignore it, so the patch applies the same.

use crate::patch::bytes::{common_prefix, common_suffix};
use crate::patch::line_diff::line_ops;
use crate::patch::parse::split_lines;

use similar::{DiffOp, DiffTag};

use crate::fs::relpath::RelPath;
use crate::git::base85;
use crate::git::oid::{blob_id, blob_id_hex, ObjectId};
use crate::git::quote::quote_path;

/// Lines of context around each change, as in `git diff` without `-U`.
pub(super) const CONTEXT: usize = 3;

/// How many leading bytes git inspects for a NUL when deciding a file is binary.
pub(super) const BINARY_SNIFF_LEN: usize = 8000;

/// git's file-type bits for a symbolic link.
const MODE_SYMLINK: u32 = 0o120000;
/// git's mode for a regular, non-executable file.
const MODE_FILE: u32 = 0o100644;
/// git's mode for a regular, executable file.
const MODE_EXEC: u32 = 0o100755;
/// The file-type part of a mode.
const MODE_TYPE_MASK: u32 = 0o170000;

/// The all-zero object id git writes for the missing side of an addition or deletion.
pub(super) const NULL_ID: &str = "0000000000000000000000000000000000000000";

/// One side of a file change.
///
/// `mode` is git's: `0o100644`, `0o100755` or `0o120000` (a symlink, in which case `data` is
/// the link target's bytes). Any other mode is normalized the way git records it: a file-type
/// of symlink stays a symlink, anything else becomes a regular file, executable when the
/// owner's exec bit is set.
///
/// ```
/// use patchbox::patch::write::Side;
/// use patchbox::RelPath;
/// let p = RelPath::new("bin/run.sh").unwrap();
/// let side = Side { path: &p, mode: 0o100755, data: b"#!/bin/sh\n" };
/// assert_eq!(side.mode, 0o100755);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Side<'a> {
    /// The path of the file, relative to the tree root.
    pub path: &'a RelPath,
    /// git's mode: `0o100644`, `0o100755` or `0o120000`.
    pub mode: u32,
    /// The file's content, or the link target for a symlink.
    pub data: &'a [u8],
}

/// Reduces any mode to one of the three git records for files.
pub(super) fn normalize_mode(mode: u32) -> u32 {
    if mode & MODE_TYPE_MASK == MODE_SYMLINK {
        MODE_SYMLINK
    } else if mode & 0o100 != 0 {
        MODE_EXEC
    } else {
        MODE_FILE
    }
}

/// True when the (normalized) mode describes a symlink.
fn is_symlink(mode: u32) -> bool {
    mode == MODE_SYMLINK
}

/// Appends the git-style diff of one path to `out`.
///
/// `old == None` is an addition, `new == None` a deletion. When both are given but one is a
/// regular file and the other a symlink, the change is written as a deletion followed by an
/// addition, as git does (likewise when the two sides name different paths: this writer
/// emits no rename headers). Identical content and mode write nothing; a change of mode alone
/// writes only the `old mode`/`new mode` header.
///
/// ```
/// use patchbox::patch::write::{write_file_diff, Side};
/// use patchbox::RelPath;
/// let p = RelPath::new("greeting.txt").unwrap();
/// let mut out = Vec::new();
/// write_file_diff(
///     &mut out,
///     Some(Side { path: &p, mode: 0o100644, data: b"hello\n" }),
///     Some(Side { path: &p, mode: 0o100644, data: b"hello world\n" }),
/// );
/// let text = String::from_utf8(out).unwrap();
/// assert!(text.starts_with("diff --git a/greeting.txt b/greeting.txt\nindex "));
/// assert!(text.ends_with("--- a/greeting.txt\n+++ b/greeting.txt\n@@ -1 +1 @@\n-hello\n+hello world\n"));
///
/// // Nothing changed: nothing written.
/// let mut none = Vec::new();
/// let same = Side { path: &p, mode: 0o100644, data: b"x\n" };
/// write_file_diff(&mut none, Some(same), Some(same));
/// assert!(none.is_empty());
/// ```
pub fn write_file_diff(out: &mut Vec<u8>, old: Option<Side<'_>>, new: Option<Side<'_>>) {
    write_file_diff_known(out, old, new, None);
}

/// [`write_file_diff`] when the caller already knows the old side's blob id (a base read
/// from the user's object store: the index names it), so the old content is not hashed
/// again for the `index` line.
///
/// Invariant (checked in debug builds): `old_id`, when given, is the blob id of the old
/// side's data.
pub(crate) fn write_file_diff_known(
    out: &mut Vec<u8>,
    old: Option<Side<'_>>,
    new: Option<Side<'_>>,
    old_id: Option<ObjectId>,
) {
    let old = old.map(|s| Side {
        mode: normalize_mode(s.mode),
        ..s
    });
    let new = new.map(|s| Side {
        mode: normalize_mode(s.mode),
        ..s
    });
    match (old, new) {
        (None, None) => {}
        (Some(o), Some(n))
            if is_symlink(o.mode) != is_symlink(n.mode)
                || o.path.as_bytes() != n.path.as_bytes() =>
        {
            write_one(out, Some(o), None, old_id);
            write_one(out, None, Some(n), None);
        }
        (o, n) => write_one(out, o, n, old_id),
    }
}

/// Sides at least this large are hashed on a thread of their own while the hunks are
/// written: the blob ids of a multi-megabyte file cost as much as its diff.
const PARALLEL_HASH_MIN: usize = 1 << 20;

/// Writes one `diff --git` section. At least one side is present; when both are, they share
/// the path and the file type. `old_id`: the old side's blob id when known.
fn write_one(
    out: &mut Vec<u8>,
    old: Option<Side<'_>>,
    new: Option<Side<'_>>,
    old_id: Option<ObjectId>,
) {
    let (a_path, b_path) = match (old, new) {
        (Some(o), Some(n)) => (o.path.as_bytes(), n.path.as_bytes()),
        (Some(o), None) => (o.path.as_bytes(), o.path.as_bytes()),
        (None, Some(n)) => (n.path.as_bytes(), n.path.as_bytes()),
        (None, None) => return,
    };
    let old_data: &[u8] = old.map_or(&[], |s| s.data);
    let new_data: &[u8] = new.map_or(&[], |s| s.data);

    if let (Some(o), Some(n)) = (old, new) {
        if o.mode == n.mode && o.data == n.data {
            return;
        }
    }

    let a_name = quote_path("a/", a_path);
    let b_name = quote_path("b/", b_path);

    push_diff_git_line(out, &a_name, &b_name);

    let mut index_mode = None;
    match (old, new) {
        (None, Some(n)) => {
            out.extend_from_slice(format!("new file mode {:o}\n", n.mode).as_bytes())
        }
        (Some(o), None) => {
            out.extend_from_slice(format!("deleted file mode {:o}\n", o.mode).as_bytes())
        }
        (Some(o), Some(n)) if o.mode != n.mode => {
            push_mode_change(out, o.mode, n.mode);
            if o.data == n.data {
                // A change of mode alone: git writes no index line and no hunks.
                return;
            }
        }
        (Some(o), Some(_)) => index_mode = Some(o.mode),
        (None, None) => return,
    }

    // The body (hunks or binary literals) does not depend on the ids: for large sides the
    // ids are computed on other threads while this one writes the body.
    let old_known = old_id.filter(|_| old.is_some());
    debug_assert!(old_known.is_none_or(|id| id == blob_id(old_data)));
    let hash_old = old.is_some() && old_known.is_none();
    let hash_new = new.is_some();
    let large = |hash: bool, data: &[u8]| hash && data.len() >= PARALLEL_HASH_MIN;
    let (old_hex, new_hex, body) = std::thread::scope(|s| {
        let old_job = large(hash_old, old_data).then(|| s.spawn(|| blob_id_hex(old_data)));
        let new_job = large(hash_new, new_data).then(|| s.spawn(|| blob_id_hex(new_data)));
        let mut body = Vec::new();
        write_body(&mut body, old, new, &a_name, &b_name);
        // A hashing thread cannot fail short of a panic; hash here again rather than lose
        // the patch.
        let join = |job: Option<std::thread::ScopedJoinHandle<'_, String>>,
                    hash: bool,
                    data: &[u8]| match job {
            Some(j) => j.join().unwrap_or_else(|_| blob_id_hex(data)),
            None if hash => blob_id_hex(data),
            None => NULL_ID.to_string(),
        };
        let old_hex = match old_known {
            Some(id) => id.to_hex(),
            None => join(old_job, hash_old, old_data),
        };
        (old_hex, join(new_job, hash_new, new_data), body)
    });
    out.extend_from_slice(format!("index {old_hex}..{new_hex}").as_bytes());
    if let Some(mode) = index_mode {
        out.push(b' ');
        out.extend_from_slice(format!("{mode:o}").as_bytes());
    }
    out.push(b'\n');
    out.extend_from_slice(&body);
}

/// Writes what follows the `index` line of a section: the binary literals, or the `---`/`+++`
/// names and the hunks (nothing for an empty file added or deleted).
fn write_body(
    out: &mut Vec<u8>,
    old: Option<Side<'_>>,
    new: Option<Side<'_>>,
    a_name: &[u8],
    b_name: &[u8],
) {
    let old_data: &[u8] = old.map_or(&[], |s| s.data);
    let new_data: &[u8] = new.map_or(&[], |s| s.data);
    if is_binary(old_data) || is_binary(new_data) {
        out.extend_from_slice(b"GIT binary patch\n");
        write_binary_literal(out, new_data);
        write_binary_literal(out, old_data);
        return;
    }

    if old_data.is_empty() && new_data.is_empty() {
        // Adding or deleting an empty file: the header says it all.
        return;
    }

    push_name_line(out, b"--- ", old.map(|o| (a_name, o.path)));
    push_name_line(out, b"+++ ", new.map(|n| (b_name, n.path)));
    write_hunks_at(out, old_data, new_data, 0);
}

/// `diff --git <a_name> <b_name>` (names already quoted).
pub(super) fn push_diff_git_line(out: &mut Vec<u8>, a_name: &[u8], b_name: &[u8]) {
    out.extend_from_slice(b"diff --git ");
    out.extend_from_slice(a_name);
    out.push(b' ');
    out.extend_from_slice(b_name);
    out.push(b'\n');
}

/// The `old mode`/`new mode` lines of a section whose file mode changed.
pub(super) fn push_mode_change(out: &mut Vec<u8>, old: u32, new: u32) {
    out.extend_from_slice(format!("old mode {old:o}\nnew mode {new:o}\n").as_bytes());
}

/// One of the `---`/`+++` lines: `prefix`, then the quoted name of a side, or `/dev/null`.
/// git appends a TAB after a name containing a space so that GNU patch knows where the name
/// ends; /dev/null never gets one.
pub(super) fn push_name_line(out: &mut Vec<u8>, prefix: &[u8], side: Option<(&[u8], &RelPath)>) {
    out.extend_from_slice(prefix);
    match side {
        Some((name, path)) => {
            out.extend_from_slice(name);
            if path.as_bytes().contains(&b' ') {
                out.push(b'\t');
            }
        }
        None => out.extend_from_slice(b"/dev/null"),
    }
    out.push(b'\n');
}

/// Writes the unified hunks turning `old` into `new` (both text).
///
/// The common head and tail are found on the bytes first, so only the changed region (plus
/// its context lines) is split into lines and diffed: a small edit to a file of hundreds of
/// thousands of lines costs no per-line memory for the lines it does not touch. The hunks are
/// the same as when diffing the whole files: lines outside the region are equal on both
/// sides and only their first and last `CONTEXT` lines can appear in a hunk.
///
/// `lines_before`: how many lines precede `old` and `new` in the files they are windows of
/// (0 for whole files; see `patch::large`, which passes windows holding every changed byte
/// and enough equal lines around them).
pub(super) fn write_hunks_at(out: &mut Vec<u8>, old: &[u8], new: &[u8], lines_before: usize) {
    let head = common_head(old, new);
    let (old_tail, new_tail) = common_tail(old, new, head);
    let start = back_lines(old, head, CONTEXT);
    let skipped = lines_before + memchr::memchr_iter(b'\n', &old[..start]).count();
    let old_end = forward_lines(old, old_tail, CONTEXT);
    let new_end = new_tail + (old_end - old_tail);
    let old_lines = split_lines(&old[start..old_end]);
    let new_lines = split_lines(&new[start..new_end]);
    let ops = line_ops(&old_lines, &new_lines);
    // `group_diff_ops` keeps CONTEXT lines around changes and starts a new group only when
    // more than 2 * CONTEXT unchanged lines separate two changes: git's merge rule.
    for group in similar::group_diff_ops(ops, CONTEXT) {
        write_hunk(out, &group, &old_lines, &new_lines, skipped);
    }
}

/// Length in bytes of the whole lines `old` and `new` start with in common.
fn common_head(old: &[u8], new: &[u8]) -> usize {
    let d = common_prefix(old, new);
    memchr::memrchr(b'\n', &old[..d]).map_or(0, |i| i + 1)
}

/// Where the whole lines `old` and `new` end with in common begin (in each), not reaching
/// into the common head of `head` bytes.
fn common_tail(old: &[u8], new: &[u8], head: usize) -> (usize, usize) {
    let (ol, nl) = (old.len(), new.len());
    let e = common_suffix(&old[head..], &new[head..]);
    // The tail must start a line on both sides: at the head's end or after a newline.
    let (p, q) = (ol - e, nl - e);
    let starts_line = |d: &[u8], at: usize| at == head || d[at - 1] == b'\n';
    if starts_line(old, p) && starts_line(new, q) {
        return (p, q);
    }
    // Past the first byte of the common suffix both sides have the same bytes, so the next
    // newline in it ends a line on both.
    match memchr::memchr(b'\n', &old[p..]) {
        Some(i) => (p + i + 1, q + i + 1),
        None => (ol, nl),
    }
}

/// The start of the line `n` lines before the line starting at `pos` (or of the data).
fn back_lines(data: &[u8], pos: usize, n: usize) -> usize {
    let mut p = pos;
    for _ in 0..n {
        if p == 0 {
            break;
        }
        p = memchr::memrchr(b'\n', &data[..p - 1]).map_or(0, |i| i + 1);
    }
    p
}

/// The end of the `n`-th line from `pos` on (or of the data).
fn forward_lines(data: &[u8], pos: usize, n: usize) -> usize {
    let mut p = pos;
    for _ in 0..n {
        if p >= data.len() {
            break;
        }
        p = memchr::memchr(b'\n', &data[p..]).map_or(data.len(), |i| p + i + 1);
    }
    p
}

/// Writes one hunk: its `@@` header and its lines.
/// `skipped`: how many lines (equal on both sides) precede `old_lines` and `new_lines`.
fn write_hunk(
    out: &mut Vec<u8>,
    group: &[DiffOp],
    old_lines: &[&[u8]],
    new_lines: &[&[u8]],
    skipped: usize,
) {
    let (Some(first), Some(last)) = (group.first(), group.last()) else {
        return;
    };
    let old_start = first.old_range().start;
    let old_len = last.old_range().end.saturating_sub(old_start);
    let new_start = first.new_range().start;
    let new_len = last.new_range().end.saturating_sub(new_start);

    out.extend_from_slice(b"@@ -");
    push_range(out, skipped + old_start, old_len);
    out.extend_from_slice(b" +");
    push_range(out, skipped + new_start, new_len);
    out.extend_from_slice(b" @@\n");

    for op in group {
        let (tag, old_range, new_range) = op.as_tag_tuple();
        match tag {
            DiffTag::Equal => push_lines(out, b' ', old_lines, old_range),
            DiffTag::Delete => push_lines(out, b'-', old_lines, old_range),
            DiffTag::Insert => push_lines(out, b'+', new_lines, new_range),
            DiffTag::Replace => {
                push_lines(out, b'-', old_lines, old_range);
                push_lines(out, b'+', new_lines, new_range);
            }
        }
    }
}

/// Writes one side of a hunk header the way xdiff does: 1-based start, `,len` omitted when
/// the length is 1, and for an empty range the number of the line before it (`0,0` at the
/// top of the file).
fn push_range(out: &mut Vec<u8>, start0: usize, len: usize) {
    let start = if len == 0 { start0 } else { start0 + 1 };
    out.extend_from_slice(start.to_string().as_bytes());
    if len != 1 {
        out.extend_from_slice(format!(",{len}").as_bytes());
    }
}

/// Writes `lines[range]`, each prefixed by `prefix`, adding git's marker after a line that
/// lacks its newline (only ever the last line of a file).
fn push_lines(out: &mut Vec<u8>, prefix: u8, lines: &[&[u8]], range: std::ops::Range<usize>) {
    for line in lines.get(range).unwrap_or(&[]) {
        out.push(prefix);
        out.extend_from_slice(line);
        if !line.ends_with(b"\n") {
            out.extend_from_slice(b"\n\\ No newline at end of file\n");
        }
    }
}

/// Writes one `literal <size>` block of a `GIT binary patch`: `data` zlib-deflated, in
/// base85 lines of at most 52 bytes each, then a blank line.
fn write_binary_literal(out: &mut Vec<u8>, data: &[u8]) {
    out.extend_from_slice(format!("literal {}\n", data.len()).as_bytes());
    let deflated = zlib_deflate(data);
    base85::encode_lines(out, &deflated);
    out.push(b'\n');
}

/// zlib-compresses `data` at the fastest level, like git's default (`Z_BEST_SPEED`), so that
/// small literals come out byte-identical to git's. Compressing into memory does not fail; should the encoder report
/// an error anyway, an uncompressed (stored) zlib stream is returned, which is just as valid.
fn zlib_deflate(data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut enc = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
    match enc.write_all(data).and_then(|()| enc.finish()) {
        Ok(v) => v,
        Err(_) => zlib_stored(data),
    }
}

/// A zlib stream made of stored (uncompressed) deflate blocks.
fn zlib_stored(data: &[u8]) -> Vec<u8> {
    let mut out = vec![0x78, 0x01];
    let mut chunks = data.chunks(0xffff).peekable();
    if chunks.peek().is_none() {
        // One final, empty stored block.
        out.extend_from_slice(&[0x01, 0x00, 0x00, 0xff, 0xff]);
    }
    while let Some(chunk) = chunks.next() {
        let last = chunks.peek().is_none();
        out.push(u8::from(last));
        // chunk.len() <= 0xffff by construction.
        let len = chunk.len() as u16;
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&(!len).to_le_bytes());
        out.extend_from_slice(chunk);
    }
    out.extend_from_slice(&adler32(data).to_be_bytes());
    out
}

/// The Adler-32 checksum zlib appends to a stream.
fn adler32(data: &[u8]) -> u32 {
    const MOD: u32 = 65521;
    let (mut a, mut b) = (1u32, 0u32);
    for chunk in data.chunks(5552) {
        for &byte in chunk {
            a += u32::from(byte);
            b += a;
        }
        a %= MOD;
        b %= MOD;
    }
    (b << 16) | a
}

/// git's binary heuristic: a NUL byte within the first 8000 bytes.
///
/// ```
/// use patchbox::patch::write::is_binary;
/// assert!(!is_binary(b"plain text\n"));
/// assert!(is_binary(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR"));
/// let mut late = vec![b'a'; 8000];
/// late.push(0);
/// assert!(!is_binary(&late)); // beyond the window git looks at
/// ```
pub fn is_binary(data: &[u8]) -> bool {
    data[..data.len().min(BINARY_SNIFF_LEN)].contains(&0)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::io::Read;

    /// The hunks computed on the whole files, without trimming on bytes first.
    fn hunks_whole(old: &[u8], new: &[u8]) -> Vec<u8> {
        let (old_lines, new_lines) = (split_lines(old), split_lines(new));
        let mut out = Vec::new();
        for group in similar::group_diff_ops(line_ops(&old_lines, &new_lines), CONTEXT) {
            write_hunk(&mut out, &group, &old_lines, &new_lines, 0);
        }
        out
    }

    /// Files made of few distinct lines (so lines repeat near every boundary), with or
    /// without a final newline, short or longer lines, LF or CRLF (also used by
    /// `patch::large`'s tests).
    pub(in crate::patch) fn text() -> impl Strategy<Value = Vec<u8>> {
        (
            proptest::collection::vec(0u8..4, 0..60),
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
        )
            .prop_map(|(lines, final_nl, long, crlf)| {
                let mut v = Vec::new();
                for l in lines {
                    v.extend_from_slice(if long { b"line " } else { b"" });
                    v.push(b'a' + l);
                    if crlf {
                        v.push(b'\r');
                    }
                    v.push(b'\n');
                }
                if !final_nl {
                    v.pop();
                }
                v
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        #[test]
        fn trimmed_hunks_equal_whole_file_hunks(
            old in text(),
            edits in proptest::collection::vec((0usize..80, 0usize..4, text()), 0..4),
        ) {
            // The new file: the old one with a few regions replaced.
            let mut new = old.clone();
            for (at, del, ins) in edits {
                let at = at.min(new.len());
                let end = (at + del).min(new.len());
                new.splice(at..end, ins.iter().copied().take(6));
            }
            let mut trimmed = Vec::new();
            write_hunks_at(&mut trimmed, &old, &new, 0);
            let whole = hunks_whole(&old, &new);
            prop_assert_eq!(
                String::from_utf8_lossy(&trimmed),
                String::from_utf8_lossy(&whole)
            );
        }
    }

    fn inflate(z: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        flate2::read::ZlibDecoder::new(z)
            .read_to_end(&mut v)
            .unwrap();
        v
    }

    #[test]
    fn patch_write_zlib_stored_round_trips() {
        for n in [0usize, 1, 5, 65535, 65536, 200_000] {
            let data: Vec<u8> = (0..n).map(|i| (i * 7 % 251) as u8).collect();
            assert_eq!(inflate(&zlib_stored(&data)), data, "size {n}");
            assert_eq!(inflate(&zlib_deflate(&data)), data, "size {n}");
        }
    }

    #[test]
    fn patch_write_base85_matches_git() {
        // From `git diff --binary` on an empty blob.
        let mut lit = Vec::new();
        write_binary_literal(&mut lit, b"");
        assert_eq!(lit, b"literal 0\nHcmV?d00001\n\n");
    }

    #[test]
    fn patch_write_length_chars() {
        let mut out = Vec::new();
        // 4000 bytes of incompressible-ish data: several full 52-byte lines.
        let data: Vec<u8> = (0u32..4000)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        write_binary_literal(&mut out, &data);
        let text = String::from_utf8(out).unwrap();
        let mut lines = text.lines();
        assert_eq!(lines.next(), Some("literal 4000"));
        let body: Vec<&str> = lines.take_while(|l| !l.is_empty()).collect();
        assert!(body.len() > 1);
        for l in &body[..body.len() - 1] {
            assert!(l.starts_with('z'));
            assert_eq!(l.len(), 1 + 65);
        }
    }

    #[test]
    fn patch_write_hunk_headers() {
        let p = RelPath::new("f").unwrap();
        let side = |data: &'static [u8]| Side {
            path: &p,
            mode: 0o100644,
            data,
        };
        let mut out = Vec::new();
        write_file_diff(&mut out, Some(side(b"")), Some(side(b"a\nb\n")));
        assert!(out.ends_with(b"@@ -0,0 +1,2 @@\n+a\n+b\n"));
        out.clear();
        write_file_diff(&mut out, Some(side(b"a\n")), Some(side(b"")));
        assert!(out.ends_with(b"@@ -1 +0,0 @@\n-a\n"));
        out.clear();
        write_file_diff(&mut out, Some(side(b"a")), Some(side(b"a\n")));
        assert!(out.ends_with(b"@@ -1 +1 @@\n-a\n\\ No newline at end of file\n+a\n"));
    }

    #[test]
    fn patch_write_different_paths_are_delete_then_add() {
        let a = RelPath::new("old-name").unwrap();
        let b = RelPath::new("new-name").unwrap();
        let mut out = Vec::new();
        write_file_diff(
            &mut out,
            Some(Side {
                path: &a,
                mode: 0o100644,
                data: b"x\n",
            }),
            Some(Side {
                path: &b,
                mode: 0o100644,
                data: b"x\n",
            }),
        );
        let text = String::from_utf8(out).unwrap();
        let del = text.find("diff --git a/old-name b/old-name\ndeleted file mode 100644\n");
        let add = text.find("diff --git a/new-name b/new-name\nnew file mode 100644\n");
        assert!(del.is_some() && add.is_some() && del < add, "{text}");
    }

    #[test]
    fn patch_write_odd_modes_are_normalized() {
        let p = RelPath::new("f").unwrap();
        let mut out = Vec::new();
        // 0o100664 is how a group-writable file might be reported; git records 100644.
        write_file_diff(
            &mut out,
            None,
            Some(Side {
                path: &p,
                mode: 0o100664,
                data: b"x\n",
            }),
        );
        assert!(out.starts_with(b"diff --git a/f b/f\nnew file mode 100644\n"));
    }
}
